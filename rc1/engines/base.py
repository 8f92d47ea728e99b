"""The Engine protocol (SPEC §6) and the registry that maps `engine.name` to a class, imported lazily.

An engine owns the model, the optimizer and everything that differs between training back-ends
(pure PyTorch, TRL). A strategy (rc1.strategies) owns the RL algorithm. The recipe
(rc1.engines.recipe.TrainingRecipe) drives them: `engine.setup(cfg)`, then per step
`batch -> strategy.on_batch(batch) -> engine.train_step(batch)`.
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol, runtime_checkable

from rc1.runtime.errors import ConfigError


@runtime_checkable
class Engine(Protocol):
    def setup(self, cfg: Any) -> None: ...

    def train_step(self, batch: dict[str, Any]) -> dict[str, float]: ...

    def eval_step(self, batch: dict[str, Any]) -> dict[str, float]: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


# engine.name -> "module:Class"
ENGINES: dict[str, str] = {
    "pure_pt": "rc1.engines.pure_pt:PurePTEngine",
    "trl": "rc1.engines.trl_engine:TRLEngine",
}


def _load(spec: str):
    module, _, cls = spec.partition(":")
    return getattr(importlib.import_module(module), cls)


def engine_class(name: str):
    if name not in ENGINES:
        raise ConfigError(f"engine.name: unknown engine {name!r}; known: {sorted(ENGINES)}")
    return _load(ENGINES[name])
