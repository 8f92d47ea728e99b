"""The callback protocol the training recipe calls; `callbacks:` names are in rc1.config.registry.

Hooks receive the recipe (its `step`, `engine`, `strategy`, `ws`, `cfg`) and, after a step, the
metrics record of that step; a callback may add keys to it (before the logging callback writes it:
logging always runs last) or ask the recipe to stop (`recipe.request_stop(reason)`).
"""

from __future__ import annotations

from typing import Any, Protocol

from rc1.config import registry


class Callback(Protocol):
    def on_train_start(self, recipe: Any) -> None: ...

    def on_step_end(self, recipe: Any, record: dict) -> None: ...

    def on_train_end(self, recipe: Any) -> None: ...


class BaseCallback:
    def on_train_start(self, recipe) -> None:
        pass

    def on_step_end(self, recipe, record: dict) -> None:
        pass

    def on_train_end(self, recipe) -> None:
        pass


def build_callbacks(specs) -> list:
    """Instances for the config's `callbacks:` list. logging is always on: metrics.jsonl and the
    heartbeat are how the console and `rc1 status` see a run."""
    by_name = {s.name: s for s in specs}
    by_name.setdefault("logging", None)
    return [registry.load(registry.CALLBACKS[name])(by_name[name]) for name in registry.CALLBACK_ORDER
            if name in by_name]
