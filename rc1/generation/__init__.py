"""One sampling interface for every stage that samples from fixed weights.

    from rc1.generation import base_ref, sample_episodes
    gen = sample_episodes(cfg, base_ref(cfg), items, greedy=True, n_per_item=1)
    gen.episodes, gen.backend, gen.seconds, gen.note

`generation.backend` (config): `torch` (rc1's KV-cache decoder over transformers, any device), `llamacpp`
(the same weights as a f32/f16 GGUF in llama.cpp, batched), `vllm` (CUDA, optional extra), or `auto`: vLLM
on CUDA when installed, else llama.cpp when installed and its architecture exports to GGUF, else torch.
llama.cpp is trusted only after it agreed with the torch model on a few prompts (rc1.generation.verify);
when it does not, the stage samples with torch and says why in one logged line (and in `Generation.note`).

Every backend runs the same episode loop (rc1.envs.rollout.run_episodes) and the same sampling code
(rc1.envs.rollout.sample_tokens), so token-in/token-out and the meaning of temperature, top-p, greedy,
max_new_tokens and the turn-end rule are the same; each Episode says which backend made it.

Modules: base (the contract), torch_backend, llamacpp, vllm_backend, serve (ModelRef, the served GGUF),
verify (the llama.cpp vs torch check), paged (engine pure_pt's training rollouts through transformers'
continuous batching, `generation.rollout_backend: paged`: like vLLM it draws with its own sampler from the same
distribution and rc1 cuts each turn by the same rule), adapter_sync (its LoRA rollouts through llama.cpp).
"""

from __future__ import annotations

import importlib.util
import logging
import time
from dataclasses import dataclass, field
from typing import Sequence

from rc1.generation.base import BACKENDS, Sampler, SamplingParams
from rc1.generation.serve import ModelRef, base_ref

log = logging.getLogger("rc1.generation")

__all__ = ["BACKENDS", "Generation", "ModelRef", "Sampler", "SamplingParams", "base_ref", "choose_backend",
           "open_sampler", "sample_episodes"]


def installed(backend: str) -> bool:
    return importlib.util.find_spec(BACKENDS[backend]) is not None


def choose_backend(requested: str, device_type: str, architecture: str | None) -> str:
    """The backend `requested` (generation.backend) means on this device (before llama.cpp's check)."""
    from rc1.models.export import SUPPORTED

    if requested != "auto":
        return requested
    if device_type == "cuda" and installed("vllm"):
        return "vllm"
    if installed("llamacpp") and architecture in SUPPORTED:
        return "llamacpp"
    return "torch"


@dataclass
class Generation:
    """What a stage got: the episodes (items x n_per_item, copies consecutive), the backend that made
    them, the generation time, and why a requested backend was not used (empty when it was)."""

    episodes: list
    backend: str
    seconds: float
    note: str = ""
    check: dict = field(default_factory=dict)

    def describe(self) -> dict:
        return {"backend": self.backend, "seconds": round(self.seconds, 2), "note": self.note or None,
                "check": self.check or None}


def _device_and_dtype(cfg, device, dtype):
    import torch

    from rc1.runtime.device import dtype_for, get_device

    device = device if device is not None else get_device(cfg.run.device_pref)
    if cfg.run.threads and device.type == "cpu":
        torch.set_num_threads(cfg.run.threads)
    return device, dtype if dtype is not None else dtype_for(device, cfg.run.mixed_precision)


def open_sampler(cfg, ref: ModelRef, *, device=None, dtype=None) -> tuple[Sampler, str, dict]:
    """(sampler, note, check) for `ref` on the backend cfg.generation.backend picks (see the module docstring).

    `note` says why another backend than the chosen one samples (llama.cpp failed its check); `check` is the
    llama.cpp agreement record when llama.cpp was considered."""
    import torch

    from rc1.generation.torch_backend import TorchSampler

    device, dtype = _device_and_dtype(cfg, device, dtype)
    gen_cfg = cfg.generation
    backend = choose_backend(gen_cfg.backend, device.type, ref.architecture)
    if backend == "vllm":
        from rc1.generation.vllm_backend import VllmSampler, open_vllm
        from rc1.models.export import save_merged

        hf_dir = ref.hf_dir
        model, tok = ref.load(torch.device("cpu"), torch.float32)
        if hf_dir is None:
            import tempfile
            from pathlib import Path

            hf_dir = save_merged(model, tok, Path(tempfile.mkdtemp(prefix="rc1-vllm-")) / "hf")
        from rc1.envs.rollout import eos_ids

        engine = open_vllm(hf_dir, gpu_memory_utilization=gen_cfg.vllm_gpu_memory_utilization, seed=cfg.run.seed)
        return VllmSampler(engine, tok, eos_ids(model, tok)), "", {}
    if backend == "llamacpp":
        sampler, note, check = _open_llamacpp(cfg, ref, device)
        if sampler is not None:
            return sampler, note, check
        log.warning("generation: %s", note)
        model, tok = ref.load(device, dtype)
        return TorchSampler(model, tok), note, check
    model, tok = ref.load(device, dtype)
    return TorchSampler(model, tok), "", {}


def _open_llamacpp(cfg, ref: ModelRef, device):
    """(LlamaCppSampler or None, note, check record): the served GGUF, trusted after its check."""
    import torch

    from rc1.envs.env import ChatFormat
    from rc1.envs.rollout import eos_ids
    from rc1.generation.llamacpp import LlamaCppSampler
    from rc1.generation.serve import checkpoint_gguf_budget, served_gguf
    from rc1.generation.verify import cached_agreement, compare_decoders, record_agreement

    gen_cfg = cfg.generation
    threads = cfg.run.threads or torch.get_num_threads()
    gpu_layers = 999 if device.type in ("mps", "cuda") else 0
    checkpoint_gguf_budget()  # a bad RC1_CHECKPOINT_GGUF_GB is a setting to fix (exit 2), not a reason to fall back
    try:
        gguf = served_gguf(ref, gen_cfg.gguf_dtype)
    except Exception as exc:  # an architecture or tokenizer the export does not handle: torch samples instead
        return None, f"llama.cpp not used for {ref.name}: GGUF export failed ({exc})", {}
    record = cached_agreement(gguf, "float32")
    # the tokenizer and end-of-turn ids come from the torch model, which the check also compares against
    model, tok = ref.load(torch.device("cpu"), torch.float32)
    eos = eos_ids(model, tok)
    sampler = LlamaCppSampler(gguf, tok, eos, threads=threads, max_rows=gen_cfg.max_rows, gpu_layers=gpu_layers)
    if record is None:
        record = compare_decoders(ChatFormat(tok, eos), model, sampler)
        record_agreement(gguf, "float32", record)
    check = {**record.to_dict(), "gguf": str(gguf.name), "gguf_dtype": gen_cfg.gguf_dtype}
    del model
    if not record.ok:
        sampler.close()
        return None, (f"llama.cpp disagrees with torch on {ref.name} ({record.problems[0]}): sampling with torch"), check
    return sampler, "", check


def sample_episodes(cfg, ref: ModelRef, items: Sequence[dict], *, greedy: bool, n_per_item: int = 1,
                    seed: int | None = None, max_new_tokens: int | None = None, max_turns: int | None = None,
                    max_length: int | None = None, batch_size: int = 8, multi_turn: str = "concat",
                    device=None, dtype=None) -> Generation:
    """Episodes of `ref` for every item (n_per_item copies each, consecutive) on the configured backend.

    Sampling settings default to the config's (model.max_new_tokens, model.temperature, model.top_p); greedy
    ignores temperature and top-p. The one call every fixed-weight stage makes."""
    sampler, note, check = open_sampler(cfg, ref, device=device, dtype=dtype)
    params = SamplingParams.from_config(cfg, greedy=greedy, seed=seed, max_new_tokens=max_new_tokens,
                                        max_turns=max_turns, max_length=max_length, batch_size=batch_size,
                                        multi_turn=multi_turn)
    try:
        t0 = time.perf_counter()
        episodes = sampler.episodes(items, num_generations=n_per_item, params=params)
        seconds = time.perf_counter() - t0
    finally:
        sampler.close()
    if len(episodes) != len(items) * n_per_item:
        raise RuntimeError(f"{sampler.backend} returned {len(episodes)} episodes for {len(items)} items x {n_per_item}")
    log.info("generation: %d episodes of %s with %s in %.1f s", len(episodes), ref.name, sampler.backend, seconds)
    return Generation(episodes, sampler.backend, seconds, note, check)
