"""The torch backend: rc1's own KV-cache decoder (rc1.envs.rollout) over a transformers model."""

from __future__ import annotations

from typing import Sequence

from rc1.generation.base import SamplingParams, tag_backend


class TorchSampler:
    """Samples from a loaded transformers model (any device, any dtype) with rc1.envs.rollout.generate_episodes."""

    backend = "torch"

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer

    def episodes(self, items: Sequence[dict], *, num_generations: int, params: SamplingParams) -> list:
        import torch

        from rc1.envs.rollout import generate_episodes

        with torch.no_grad():
            eps = generate_episodes(self.model, self.tokenizer, list(items), num_generations=num_generations,
                                    max_turns=params.max_turns, max_new_tokens=params.max_new_tokens,
                                    temperature=params.temperature, top_p=params.top_p, greedy=params.greedy,
                                    seed=params.seed, batch_size=params.batch_size, max_length=params.max_length,
                                    stop_at_action=params.stop_at_action, multi_turn=params.multi_turn)
        return tag_backend(eps, self.backend)

    def close(self) -> None:
        self.model = None
