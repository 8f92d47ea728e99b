"""The callback protocol the training recipe calls, and the registry of `callbacks:` names.

Hooks receive the recipe (its `step`, `engine`, `strategy`, `ws`, `cfg`) and, after a step, the
metrics record of that step; a callback may add keys to it (before the logging callback writes it:
logging always runs last) or ask the recipe to stop (`recipe.request_stop(reason)`).
"""

from __future__ import annotations

import importlib
from typing import Any, Protocol


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


CALLBACKS: dict[str, str] = {
    "lr_schedule": "rc1.callbacks.lr_schedule:LRScheduleCallback",
    "grad_clip": "rc1.callbacks.lr_schedule:GradClipCallback",
    "eval_shadow": "rc1.callbacks.eval_shadow:EvalShadowCallback",
    "early_stop": "rc1.callbacks.early_stop:EarlyStopCallback",
    "checkpoint": "rc1.callbacks.checkpoint:CheckpointCallback",
    "tensorboard": "rc1.callbacks.logging:TensorBoardCallback",
    "logging": "rc1.callbacks.logging:LoggingCallback",
}
# Hooks run in this order: metrics are complete (eval, lr) before the checkpoint and the log line.
ORDER = ("lr_schedule", "grad_clip", "eval_shadow", "early_stop", "checkpoint", "tensorboard", "logging")


def build_callbacks(specs) -> list:
    """Instances for the config's `callbacks:` list. logging is always on: metrics.jsonl and the
    heartbeat are how the console and `rc1 status` see a run."""
    by_name = {s.name: s for s in specs}
    by_name.setdefault("logging", None)
    out = []
    for name in ORDER:
        if name in by_name:
            module, _, cls = CALLBACKS[name].partition(":")
            out.append(getattr(importlib.import_module(module), cls)(by_name[name]))
    return out
