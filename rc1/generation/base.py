"""The sampling contract: what a stage asks for (`SamplingParams`) and what every backend provides (`Sampler`).

A backend turns token ids into token ids: it decodes one model turn for a batch of prompts and returns the
generated ids exactly as sampled, each with its log-probability under the distribution it was drawn from
(rc1.envs.sampling: softmax(logits / temperature) over the top-p nucleus; plain softmax when greedy). The
episode loop around it (rc1.envs.rollout.run_episodes, with rc1.envs.env.EpisodeState) is the same for every
backend, so the episodes are the same in form whichever backend made them; each Episode names its backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence, runtime_checkable

# The one table of sampling backends: what generation.backend may name besides `auto`, and the package each
# needs installed (rc1.generation.installed; the schema's generation.backend lists these names, a test holds them equal).
BACKENDS = {"torch": "torch", "llamacpp": "llama_cpp", "vllm": "vllm"}


@dataclass(frozen=True)
class SamplingParams:
    """How to sample one stage's episodes. `max_turns` None: the item's own limit; `max_length` None: no cap."""

    greedy: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    max_new_tokens: int = 64
    max_turns: int | None = None
    max_length: int | None = None
    seed: int | None = None
    batch_size: int = 8
    stop_at_action: bool = True
    multi_turn: str = "concat"

    @classmethod
    def from_config(cls, cfg, *, greedy: bool, seed: int | None = None, max_new_tokens: int | None = None,
                    max_turns: int | None = None, max_length: int | None = None, batch_size: int = 8,
                    multi_turn: str = "concat") -> "SamplingParams":
        """The config's sampling distribution (model.temperature, model.top_p, model.max_new_tokens) for one
        stage: training rollouts, the dev eval during training and every fixed-weight stage build theirs here."""
        return cls(greedy=greedy, temperature=cfg.model.temperature, top_p=cfg.model.top_p,
                   max_new_tokens=max_new_tokens or cfg.model.max_new_tokens, max_turns=max_turns,
                   max_length=max_length, seed=seed, batch_size=batch_size, multi_turn=multi_turn)

    @classmethod
    def training(cls, cfg, *, seed: int, rows: int, greedy: bool = False,
                 max_new_tokens: int | None = None) -> "SamplingParams":
        """The training rollout's settings for `rows` episodes: what engine pure_pt samples with, and what the
        stages that measure the base policy "exactly as training will sample it" (the difficulty fit, the
        learning signal) sample with. One constructor, so those stages cannot drift from training."""
        return cls.from_config(cfg, greedy=greedy, seed=seed, max_new_tokens=max_new_tokens,
                               max_turns=cfg.strategy.max_turns, max_length=cfg.data.max_length,
                               batch_size=max(1, rows), multi_turn=cfg.strategy.multi_turn)

    def describe(self) -> dict:
        return {"greedy": self.greedy, "temperature": None if self.greedy else self.temperature,
                "top_p": None if self.greedy else self.top_p, "max_new_tokens": self.max_new_tokens,
                "max_turns": self.max_turns, "max_length": self.max_length, "seed": self.seed}


@runtime_checkable
class Sampler(Protocol):
    """One loaded model behind one backend. `backend`: "torch" | "llamacpp" | "vllm"."""

    backend: str

    def episodes(self, items: Sequence[dict], *, num_generations: int, params: SamplingParams) -> list:
        """Roll out every item `num_generations` times (copies consecutive); rc1.envs.episode.Episode each,
        with `backend` set."""
        ...

    def close(self) -> None:
        """Free the model (and its context)."""
        ...


def tag_backend(episodes: list, backend: str) -> list:
    for ep in episodes:
        ep.backend = backend
    return episodes


def decoder_episodes(sampler, items: Sequence[dict], *, num_generations: int, params: SamplingParams,
                     max_rows: int | None = None) -> list:
    """`Sampler.episodes` of a backend that decodes a batch of token-id prompts itself (llama.cpp, vLLM):
    `sampler.decode_batch(stop_rule, prompts, limits, stops, greedy=, temperature=, top_p=, generator=)` with
    `sampler.tokenizer`, `sampler.eos_ids`, `sampler.backend`; a seeded CPU torch.Generator when sampling.
    `max_rows`: the most rows the backend decodes at once (caps params.batch_size)."""
    import torch

    from rc1.envs.env import ChatFormat
    from rc1.envs.rollout import StopRule, check_sampling, run_episodes

    check_sampling(num_generations=num_generations, batch_size=params.batch_size,
                   max_new_tokens=params.max_new_tokens, greedy=params.greedy, temperature=params.temperature)
    fmt = ChatFormat(sampler.tokenizer, sampler.eos_ids)
    rule = StopRule(fmt)
    generator = None
    if params.seed is not None and not params.greedy:
        generator = torch.Generator().manual_seed(int(params.seed))

    def decode(prompts, limits, stops):
        return sampler.decode_batch(rule, prompts, limits, stops, greedy=params.greedy,
                                    temperature=params.temperature, top_p=params.top_p, generator=generator)

    batch_size = params.batch_size if max_rows is None else min(params.batch_size, max_rows)
    eps = run_episodes(fmt, list(items), decode, num_generations=num_generations, max_turns=params.max_turns,
                       max_new_tokens=params.max_new_tokens, batch_size=batch_size, max_length=params.max_length,
                       stop_at_action=params.stop_at_action, multi_turn=params.multi_turn)
    return tag_backend(eps, sampler.backend)
