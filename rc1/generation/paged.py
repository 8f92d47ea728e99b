"""Training rollouts through transformers' continuous batching (`generation.rollout_backend: paged`).

`model.generate_batch(prompts, generation_config=, continuous_batching_config=)` decodes every row in one
packed sequence over a paged KV cache (no padding; rows leave and the next admitted as they finish; flash
attention and CUDA graphs where the GPU has them). It runs in its own thread, which torch's autocast does
not reach (autocast is thread-local): the engine hands it a model already in the dtype it should sample in.

Same contract as rc1's decoder (rc1.envs.rollout.decode_batch): token ids in, token ids out, each with its
log-probability under the distribution it was drawn from (`return_logprobs`: log softmax of the processed
logits: temperature, then top-p, whose rule -- keep a token while the mass before it is < top_p -- is
rc1.envs.sampling's; plain softmax when greedy). generate_batch takes one `max_new_tokens` and stops only at
end-of-turn ids, so each row is then cut by rc1's StopRule at its own limit and at its first action line, as
the vLLM backend does: cutting a sample where the turn ends does not change the kept tokens' distribution.

Seeding: each call draws a seed from the rollout's torch.Generator. continuous batching samples with
torch.multinomial on torch's global RNG (seeded from ContinuousBatchingConfig.seed), so the call runs inside
torch.random.fork_rng: the trainer's RNG state is left as it was. A run is reproducible only as far as the
scheduler is: which rows share a forward can depend on when its thread picks up the queued requests.

The cache is sized for the call (each row's prompt + max_new_tokens, in pages), never from free memory: on a
CPU transformers sizes it from system RAM (32 s for a two-prompt call on the dev machine, against 0.9 s
sized), and on a GPU it would take 90% of what the trainer left free.
"""

from __future__ import annotations

import gc
from math import ceil
from typing import Sequence

from rc1.generation.base import SamplingParams, decoder_episodes

PAGE_SIZE = 256             # tokens per cache page: transformers' default
MAX_BATCH_TOKENS = 8192     # tokens of one forward at most: transformers' default


def available() -> str | None:
    """None when this transformers has continuous batching (`generate_batch`), else why not."""
    try:
        from transformers import ContinuousBatchingConfig  # noqa: F401
        from transformers.generation.continuous_batching import ContinuousMixin
    except ImportError as exc:
        return f"this transformers has no continuous batching ({exc})"
    if not hasattr(ContinuousMixin, "generate_batch"):
        return "this transformers has no generate_batch"
    return None


class PagedSampler:
    """One model (a transformers causal LM, a PEFT wrapper included) sampled with generate_batch."""

    backend = "paged"

    def __init__(self, model, tokenizer, eos_ids: Sequence[int]):
        self.model, self.tokenizer, self.eos_ids = model, tokenizer, list(eos_ids)
        self.calls, self.tokens = 0, 0   # generate_batch calls and the tokens they generated (cut ones included)

    def decode_batch(self, stop_rule, prompts: Sequence[Sequence[int]], limits: Sequence[int], stops: Sequence[bool],
                     *, greedy: bool, temperature: float, top_p: float, generator,
                     ) -> tuple[list[list[int]], list[list[float]], list[bool]]:
        import torch
        from transformers import ContinuousBatchingConfig, GenerationConfig

        from rc1.envs.rollout import cut_turn

        new = max(limits)
        sampling = {} if greedy else {"temperature": float(temperature), "top_p": float(top_p)}
        gen_cfg = GenerationConfig(do_sample=not greedy, max_new_tokens=new, eos_token_id=self.eos_ids,
                                   pad_token_id=self.tokenizer.pad_token_id, top_k=None, **sampling)
        seed = 0 if generator is None else int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
        pages = sum(ceil((len(p) + new) / PAGE_SIZE) for p in prompts)
        cb_cfg = ContinuousBatchingConfig(return_logprobs=True, seed=seed, page_size=PAGE_SIZE, num_blocks=pages + 1,
                                          max_batch_tokens=min(MAX_BATCH_TOKENS, sum(len(p) for p in prompts)),
                                          max_requests_per_batch=len(prompts), per_request_processors=True)
        device = next(self.model.parameters()).device
        # generate_batch ends with two gc.collect() calls, which walk the trainer's whole heap (0.42 of a 0.54 s
        # call on the tiny model in a test process): frozen, the objects made before the call are skipped
        gc.freeze()
        try:
            with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
                outputs = self.model.generate_batch([list(p) for p in prompts], generation_config=gen_cfg,
                                                    continuous_batching_config=cb_cfg, progress_bar=False)
        finally:
            gc.unfreeze()
        results = list(outputs.values())  # in the order of `prompts`
        failed = [r.error for r in results if r.error is not None]
        if len(results) != len(prompts) or failed:
            raise RuntimeError(f"generate_batch returned {len(results) - len(failed)} of {len(prompts)} rows"
                               + (f": {failed[0]}" if failed else ""))
        self.calls += 1
        ids, lps, hit = [], [], []
        for out, stop, limit in zip(results, stops, limits):
            self.tokens += len(out.generated_tokens)
            kept, limit_hit = cut_turn(stop_rule, out.generated_tokens, stop, limit)
            if len(out.logprobs) < len(kept):
                raise RuntimeError(f"generate_batch returned {len(out.logprobs)} log-probs for {len(kept)} tokens")
            ids.append(kept)
            lps.append([float(x) for x in out.logprobs[:len(kept)]])
            hit.append(limit_hit)
        return ids, lps, hit

    def episodes(self, items: Sequence[dict], *, num_generations: int, params: SamplingParams) -> list:
        import torch

        with torch.no_grad():
            return decoder_episodes(self, items, num_generations=num_generations, params=params)

    def close(self) -> None:
        self.model = None
