"""The engine registry: `engine.name` -> the Engine class, imported lazily (names and the engine x
strategy table live in rc1.config.registry; the protocols in rc1.engines.contract).

An engine owns the model, the optimizer and everything that differs between training back-ends
(pure PyTorch, TRL). A strategy (rc1.strategies) owns the RL algorithm. A recipe (rc1.training)
drives them.
"""

from __future__ import annotations

from rc1.config import registry
from rc1.engines.contract import Engine  # noqa: F401  (re-exported: the protocol an engine implements)
from rc1.runtime.errors import ConfigError


def engine_class(name: str):
    if name not in registry.ENGINES:
        raise ConfigError(f"engine.name: unknown engine {name!r}; known: {sorted(registry.ENGINES)}")
    return registry.load(registry.ENGINES[name].cls)
