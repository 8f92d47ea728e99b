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

BACKENDS = ("torch", "llamacpp", "vllm")   # what generation.backend may name besides `auto`


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
