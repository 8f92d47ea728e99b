"""The Strategy protocol (SPEC §6) and the registry mapping `strategy.name` to a class (lazy imports).

A strategy turns a batch of prompts into something the engine can take a gradient step on:
`on_batch(batch)` rolls out episodes through its engine, scores them with the rc1 RewardModel,
computes advantages / pairs / targets, and leaves `batch["tensors"]` and `batch["loss_fn"]` for
`engine.train_step(batch)`. It returns the rollout metrics (reward, reward/<dim>, completion_len...).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from rc1.engines.base import Engine, _load
from rc1.runtime.errors import ConfigError


@runtime_checkable
class Strategy(Protocol):
    def attach_engine(self, engine: Engine) -> None: ...

    def on_batch(self, batch: dict[str, Any]) -> dict[str, float]: ...


STRATEGIES: dict[str, str] = {
    "grpo": "rc1.strategies.grpo:GRPOStrategy",
    "rloo": "rc1.strategies.rloo:RLOOStrategy",
    "ppo": "rc1.strategies.ppo:PPOStrategy",
    "dpo": "rc1.strategies.dpo:DPOStrategy",
    "sft": "rc1.strategies.sft:SFTStrategy",
}


def strategy_class(name: str):
    if name not in STRATEGIES:
        raise ConfigError(f"strategy.name: unknown strategy {name!r}; known: {sorted(STRATEGIES)}")
    return _load(STRATEGIES[name])
