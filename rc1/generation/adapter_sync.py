"""Training rollouts of a LoRA policy through llama.cpp, the adapter swapped on a base loaded once.

`generation.rollout_backend: llamacpp` (engine pure_pt, finetune.method lora, one process): the base model's
GGUF (rc1.generation.serve.served_gguf, `generation.gguf_dtype`) is loaded into llama.cpp once. Before each
rollout the policy's LoRA tensors are written straight from PEFT into an adapter GGUF
(rc1.models.export.write_lora_gguf: no merge, no HF save, no base conversion) and put on the loaded base
(LlamaCppSampler.set_lora: llama_adapter_lora_init + llama_set_adapters_lora; the old adapter freed, the KV
cache cleared). The time it takes is the step's `time/sync_s`.

Token-in/token-out: the episodes come from rc1's episode loop and sampling code (rc1.generation.llamacpp), with
each token's log-probability under llama.cpp's distribution; the trainer scores the same tokens under the
torch policy, and the truncated importance-sampling correction (strategy.importance_sampling_cap) covers the
difference, which `sampler_mismatch_kl` logs each step.

Before the first rollout the sampler is checked against the torch policy (rc1.generation.verify: greedy
tokens and log-probs on fixed prompts, the adapter on). A sampler that fails the check is not used: the
engine samples with torch and logs one line saying why.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import weakref
from pathlib import Path
from typing import Sequence

from rc1.generation.base import SamplingParams, tag_backend

log = logging.getLogger("rc1.generation")


class AdapterSyncSampler:
    backend = "llamacpp"

    def __init__(self, cfg, policy_model, tokenizer, *, threads: int | None = None):
        from rc1.envs.rollout import eos_ids
        from rc1.generation.llamacpp import LlamaCppSampler
        from rc1.generation.serve import base_ref, served_gguf

        self.gguf = served_gguf(base_ref(cfg), cfg.generation.gguf_dtype)
        self.tokenizer = tokenizer
        self.eos = eos_ids(policy_model, tokenizer)
        self.sampler = LlamaCppSampler(self.gguf, tokenizer, self.eos, threads=threads,
                                       max_rows=cfg.generation.max_rows)
        self.dir = Path(tempfile.mkdtemp(prefix="rc1-adapter-"))
        weakref.finalize(self, shutil.rmtree, str(self.dir), True)
        self.syncs = 0

    def sync(self, policy_model) -> float:
        """Write the policy's adapter and put it on the loaded base; the seconds it took."""
        from rc1.models.export import write_lora_gguf

        t0 = time.perf_counter()
        path = write_lora_gguf(policy_model, self.dir / f"adapter_{self.syncs % 2}.gguf")
        self.sampler.set_lora(path)
        self.syncs += 1
        return time.perf_counter() - t0

    def check(self, policy_model):
        """rc1.generation.verify's agreement of this sampler (adapter synced) with the torch policy."""
        from rc1.envs.env import ChatFormat
        from rc1.generation.verify import compare_decoders

        self.sync(policy_model)
        return compare_decoders(ChatFormat(self.tokenizer, self.eos), policy_model, self.sampler)

    def episodes(self, items: Sequence[dict], *, num_generations: int, params: SamplingParams) -> list:
        return tag_backend(self.sampler.episodes(items, num_generations=num_generations, params=params), self.backend)

    def close(self) -> None:
        self.sampler.close()
        shutil.rmtree(self.dir, ignore_errors=True)
