"""The llama.cpp backend: a GGUF served in-process by llama-cpp-python's low-level API, batched.

One llama.cpp context holds every sequence of a batch (one `seq_id` per row, a unified KV cache): the
prompts are prefilled in chunks of `n_batch` tokens, every prefix shared by two or more of them (a role's
protocol system prompt, a GRPO group's copies) once, then shared with `llama_memory_seq_cp`; every
decode step is ONE `llama_decode` of one token per live row.
llama.cpp only computes the logits; the next token is drawn in Python by rc1.envs.rollout.sample_tokens,
the function the torch decoder uses, from the same `torch.Generator`: temperature, top-p, greedy and the
recorded per-token log-probs mean exactly what they mean on the torch path. The turn ends by the same
rule too (rc1.envs.rollout.StopRule), and the episodes come from the same loop (run_episodes).

The GGUF must hold the same weights as the torch model (rc1.generation.serve exports them, f32 or f16,
never a lossy quantization) and be checked against torch before a stage trusts it (rc1.generation.verify).
"""

from __future__ import annotations

import ctypes
import logging
import os
import time
from dataclasses import dataclass
from itertools import groupby
from pathlib import Path
from typing import Sequence

from rc1.generation.base import SamplingParams, decoder_episodes

log = logging.getLogger("rc1.generation")

_QUIET = None  # the no-op log callback handed to llama.cpp (kept alive for the process)


def _quiet_llama(llama_cpp) -> None:
    global _QUIET
    if _QUIET is None:
        _QUIET = llama_cpp.llama_log_callback(lambda level, text, user: None)
        llama_cpp.llama_log_set(_QUIET, ctypes.c_void_p(0))


@dataclass(frozen=True)
class LoraSwap:
    """Seconds of each part of one LlamaCppSampler.set_lora."""

    load_s: float    # llama_adapter_lora_init: the adapter GGUF read into memory and checked against the base
    set_s: float     # llama_set_adapters_lora on the context (0 without one); llama.cpp re-plans its compute
                     # graph at the next decode, which pays for that
    clear_s: float   # the KV cache cleared
    free_s: float    # the previous adapter freed (0 without one)


class LlamaCppSampler:
    """A GGUF in llama.cpp; `episodes` runs rc1's episode loop on its batched decoder.

    `max_rows`: sequences decoded together at most (the rollout batch is cut to it). The context is sized
    for the batch asked for (its rows x its longest prompt + new tokens) and re-made only when a batch needs
    more rows or a longer row than it has room for."""

    backend = "llamacpp"

    def __init__(self, gguf: str | os.PathLike, tokenizer, eos_ids: Sequence[int], *, threads: int | None = None,
                 max_rows: int = 64, n_batch: int = 2048, gpu_layers: int = 0):
        import llama_cpp

        self.L = llama_cpp
        _quiet_llama(llama_cpp)
        llama_cpp.llama_backend_init()
        self.gguf, self.tokenizer, self.eos_ids = Path(gguf), tokenizer, list(eos_ids)
        self.threads = threads or max(1, os.cpu_count() or 1)
        self.max_rows, self.n_batch = max(1, int(max_rows)), int(n_batch)
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = int(gpu_layers)
        self.model = llama_cpp.llama_model_load_from_file(str(self.gguf).encode("utf-8"), mparams)
        if not self.model:
            raise RuntimeError(f"llama.cpp could not load {self.gguf}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self.ctx, self.n_ctx, self.n_seq = None, 0, 0
        self.batch, self.batch_size = None, 0
        self.adapter, self.adapter_scale = None, 1.0

    # ------------------------------------------------------------------ a LoRA adapter on the loaded base
    def set_lora(self, path: str | os.PathLike | None, scale: float = 1.0) -> LoraSwap:
        """Put the LoRA adapter GGUF at `path` on the loaded base (llama_adapter_lora_init: tens of ms for a
        small adapter), replacing and freeing the previous one; None takes it off. The KV cache is cleared:
        what it holds was computed with the old weights. Returns the seconds of each part."""
        L = self.L
        new = None
        t0 = time.perf_counter()
        if path is not None:
            new = L.llama_adapter_lora_init(self.model, str(path).encode("utf-8"))
            if not new:
                raise RuntimeError(f"llama.cpp could not load the LoRA adapter {path}")
        t1 = time.perf_counter()
        old, self.adapter, self.adapter_scale = self.adapter, new, float(scale)
        t2 = t3 = t1
        if self.ctx is not None:
            self._apply_adapter()
            t2 = time.perf_counter()
            L.llama_memory_clear(L.llama_get_memory(self.ctx), True)
            t3 = time.perf_counter()
        if old is not None:
            L.llama_adapter_lora_free(old)
        return LoraSwap(load_s=t1 - t0, set_s=t2 - t1, clear_s=t3 - t2, free_s=time.perf_counter() - t3)

    def _apply_adapter(self) -> None:
        L = self.L
        if self.adapter is None:
            rc = L.llama_set_adapters_lora(self.ctx, None, 0, None)
        else:
            adapters = (L.llama_adapter_lora_p_ctypes * 1)(self.adapter)
            scales = (ctypes.c_float * 1)(self.adapter_scale)
            rc = L.llama_set_adapters_lora(self.ctx, adapters, 1, scales)
        if rc != 0:
            raise RuntimeError(f"llama_set_adapters_lora failed with code {rc}")

    # ------------------------------------------------------------------ context and batch
    def _ensure(self, per_row: int, rows: int) -> None:
        """A context with room for `rows` sequences of `per_row` tokens, and a batch of n_batch tokens.

        One unified KV cache: the shared prompt prefix is stored once and tagged with every row's sequence
        (llama_memory_seq_cp copies no data there)."""
        L = self.L
        if self.ctx is not None and per_row <= self.n_ctx // self.n_seq and rows <= self.n_seq:
            L.llama_memory_clear(L.llama_get_memory(self.ctx), True)
            return
        if self.ctx is not None:
            L.llama_free(self.ctx)
            self.ctx = None
        rows = max(rows, 1)
        per_row = 256 * -(-max(per_row, 1) // 256)
        cparams = L.llama_context_default_params()
        cparams.n_ctx, cparams.n_batch = per_row * rows, self.n_batch
        cparams.n_ubatch = min(512, self.n_batch)
        cparams.n_seq_max = rows
        cparams.kv_unified = True
        cparams.n_threads = cparams.n_threads_batch = self.threads
        cparams.no_perf = True
        self.ctx = L.llama_init_from_model(self.model, cparams)
        if not self.ctx:
            raise RuntimeError(f"llama.cpp could not make a context of {rows} sequences x {per_row} tokens")
        self.n_ctx, self.n_seq = per_row * rows, rows
        if self.adapter is not None:  # a new context starts without the adapter
            self._apply_adapter()
        if self.batch is None:
            self.batch = L.llama_batch_init(self.n_batch, 0, 1)
            self.batch_size = self.n_batch

    def _decode(self, entries: list[tuple[int, int, int, bool]]):
        """Run (token, position, seq_id, wants_logits) entries; the logits of those that want them, in order,
        as a float32 [n, vocab] numpy array."""
        import numpy as np

        L, b = self.L, self.batch
        outputs: list[np.ndarray] = []
        for start in range(0, len(entries), self.batch_size):
            chunk = entries[start:start + self.batch_size]
            for i, (tok, pos, seq, want) in enumerate(chunk):
                b.token[i], b.pos[i], b.n_seq_id[i] = tok, pos, 1
                b.seq_id[i][0] = seq
                b.logits[i] = 1 if want else 0
            b.n_tokens = len(chunk)
            rc = L.llama_decode(self.ctx, b)
            if rc != 0:
                raise RuntimeError(f"llama_decode failed with code {rc} ({len(chunk)} tokens, context {self.n_ctx})")
            n_out = sum(1 for e in chunk if e[3])
            if n_out:
                ptr = L.llama_get_logits(self.ctx)
                outputs.append(np.ctypeslib.as_array(ptr, shape=(n_out, self.n_vocab)).copy())
        return np.concatenate(outputs) if outputs else np.zeros((0, self.n_vocab), dtype=np.float32)

    # ------------------------------------------------------------------ one model turn for a batch
    def decode_batch(self, stop_rule, prompts: Sequence[Sequence[int]], limits: Sequence[int],
                     stops: Sequence[bool], *, greedy: bool, temperature: float, top_p: float, generator,
                     ) -> tuple[list[list[int]], list[list[float]], list[bool]]:
        """Generate one turn per prompt: (ids, their log-probs, hit_limit) per row (rc1.envs.rollout.BatchDecoder)."""
        import numpy as np
        import torch

        from rc1.envs.rollout import prefix_tree, sample_tokens, stops_here

        L = self.L
        n = len(prompts)
        self._ensure(max(len(p) + lim for p, lim in zip(prompts, limits)) + 1, n)
        mem = L.llama_get_memory(self.ctx)
        first_row: dict[tuple[int, ...], int] = {}
        for r, p in enumerate(prompts):
            first_row.setdefault(tuple(p), r)
        # Each distinct prompt is prefilled in the sequence of its first row, every prefix it shares with others
        # (the protocol system prompt of a role, a GRPO group's copies) once: rc1.envs.rollout.prefix_tree.
        distinct = list(first_row)
        rows_of = list(first_row.values())
        last_logits: dict[int, np.ndarray] = {}
        for _, wave in groupby(prefix_tree(distinct), key=lambda seg: seg.wave):
            segs = list(wave)
            entries = []
            for seg in segs:
                row, p = rows_of[seg.row], distinct[seg.row]
                if seg.source != seg.row:
                    L.llama_memory_seq_cp(mem, rows_of[seg.source], row, 0, seg.start)
                entries += [(p[i], i, row, i == len(p) - 1) for i in range(seg.start, seg.end)]
            out = self._decode(entries)
            ends = [seg for seg in segs if seg.end == len(distinct[seg.row])]
            last_logits.update({rows_of[seg.row]: out[k] for k, seg in enumerate(ends)})
        for r, p in enumerate(prompts):
            src = first_row[tuple(p)]
            if src != r:
                L.llama_memory_seq_cp(mem, src, r, -1, -1)
        logits = torch.from_numpy(np.stack([last_logits[first_row[tuple(p)]] for p in prompts]))
        generated: list[list[int]] = [[] for _ in range(n)]
        logprobs: list[list[float]] = [[] for _ in range(n)]
        hit_limit = [False] * n
        rows = list(range(n))
        while rows:
            nxt, nxt_logp = sample_tokens(logits, greedy=greedy, temperature=temperature, top_p=top_p,
                                          generator=generator)
            live, step = [], []
            for r, tok, lp in zip(rows, nxt.tolist(), nxt_logp.tolist()):
                generated[r].append(tok)
                logprobs[r].append(lp)
                ended, hit_limit[r] = stops_here(stop_rule, generated[r], stops[r], limits[r])
                if ended:
                    L.llama_memory_seq_rm(mem, r, -1, -1)
                else:
                    live.append(r)
                    step.append((tok, len(prompts[r]) + len(generated[r]) - 1, r, True))
            rows = live
            if rows:
                logits = torch.from_numpy(self._decode(step))
        L.llama_memory_clear(mem, True)
        return generated, logprobs, hit_limit

    # ------------------------------------------------------------------ Sampler
    def episodes(self, items: Sequence[dict], *, num_generations: int, params: SamplingParams) -> list:
        return decoder_episodes(self, items, num_generations=num_generations, params=params, max_rows=self.max_rows)

    def close(self) -> None:
        L = self.L
        if self.batch is not None:
            L.llama_batch_free(self.batch)
            self.batch = None
        if self.ctx is not None:
            L.llama_free(self.ctx)
            self.ctx = None
        if self.adapter is not None:
            L.llama_adapter_lora_free(self.adapter)
            self.adapter = None
        if self.model is not None:
            L.llama_model_free(self.model)
            self.model = None

    def __del__(self):  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass
