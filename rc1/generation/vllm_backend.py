"""The vLLM backend (CUDA only; the optional extra `rc1[vllm]`).

vLLM decodes each row's turn to its end-of-turn token or its token limit; rc1 then applies its own turn-end
rule (rc1.envs.rollout.StopRule) to the returned token ids, so a turn ends where the torch decoder would
have stopped it (at the newline after the first action line). Cutting a sample at a stopping point does
not change the distribution of the kept tokens, so this is the same sampler, only with some wasted tokens.
Each request carries a seed drawn from the stage's torch.Generator (reproducible runs). Log-probs are the
sampled tokens' (`logprobs=0`); the engine must be made with `logprobs_mode="processed_logprobs"` so they
are under the temperature/top-p distribution, as rc1's are (`open_vllm` does that).

`engine` is anything with vLLM's `LLM.generate(prompts, sampling_params, use_tqdm=...)`: the tests drive
this class with a fake engine on a CPU.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from rc1.generation.base import SamplingParams, decoder_episodes


def open_vllm(hf_dir, *, gpu_memory_utilization: float, seed: int = 0):
    """A vLLM engine over a plain HF directory (imported here: vLLM is an optional CUDA-only extra)."""
    from vllm import LLM

    return LLM(model=str(hf_dir), gpu_memory_utilization=gpu_memory_utilization, seed=seed,
               logprobs_mode="processed_logprobs", enable_sleep_mode=True)


class VllmSampler:
    backend = "vllm"

    def __init__(self, engine: Any, tokenizer, eos_ids: Sequence[int], *, params_cls: Callable | None = None):
        if params_cls is None:
            from vllm import SamplingParams as params_cls  # noqa: N813
        self.engine, self.tokenizer, self.eos_ids, self.params_cls = engine, tokenizer, list(eos_ids), params_cls

    def decode_batch(self, stop_rule, prompts: Sequence[Sequence[int]], limits: Sequence[int], stops: Sequence[bool],
                     *, greedy: bool, temperature: float, top_p: float, generator,
                     ) -> tuple[list[list[int]], list[list[float]], list[bool]]:
        import torch

        from rc1.envs.rollout import cut_turn

        requests, params = [], []
        for p, limit in zip(prompts, limits):
            seed = None if generator is None else int(torch.randint(0, 2**31 - 1, (1,), generator=generator))
            requests.append({"prompt_token_ids": list(p)})
            params.append(self.params_cls(n=1, temperature=0.0 if greedy else temperature,
                                          top_p=1.0 if greedy else top_p, max_tokens=int(limit), logprobs=0,
                                          seed=seed, stop_token_ids=self.eos_ids, detokenize=False))
        outputs = self.engine.generate(requests, params, use_tqdm=False)
        ids, lps, hit = [], [], []
        for out, stop, limit in zip(outputs, stops, limits):
            completion = out.outputs[0]
            toks = [int(t) for t in completion.token_ids]
            probs = [float(step[t].logprob) for step, t in zip(completion.logprobs or [], toks)]
            kept, limit_hit = cut_turn(stop_rule, toks, stop, limit)
            ids.append(kept)
            lps.append(probs[:len(kept)])
            hit.append(limit_hit or (len(kept) >= limit and kept[-1] not in self.eos_ids))
        return ids, lps, hit

    def episodes(self, items: Sequence[dict], *, num_generations: int, params: SamplingParams) -> list:
        return decoder_episodes(self, items, num_generations=num_generations, params=params)

    def close(self) -> None:
        sleep = getattr(self.engine, "sleep", None)
        if sleep is not None:  # free the GPU memory between phases (vLLM sleep mode), as TRL does
            sleep(level=1)
        self.engine = None
