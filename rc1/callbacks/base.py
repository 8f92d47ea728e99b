"""Callbacks the training recipe calls; `callbacks:` names are in rc1.config.registry.

The protocol (`Callback`) and what a hook may read and call on the recipe (`Trainer`: its step, cfg, ws,
engine, ...) are in rc1.engines.contract. After a step a hook receives the metrics record of that step; a
callback may add keys to it (before the logging callback writes it: logging always runs last) or ask the
recipe to stop (`trainer.request_stop(reason)`).
"""

from __future__ import annotations

from typing import Any

from rc1.config import registry
from rc1.engines.contract import Callback, Trainer


class BaseCallback:
    """No-op hooks and no state: a callback overrides the hooks it needs, and `state_dict` / `load_state_dict`
    when it has something a resumed run must get back."""

    def on_train_start(self, trainer: Trainer) -> None:
        pass

    def on_step_end(self, trainer: Trainer, record: dict) -> None:
        pass

    def on_train_end(self, trainer: Trainer) -> None:
        pass

    def state_dict(self) -> dict[str, Any] | None:
        return None  # nothing to checkpoint

    def load_state_dict(self, state: dict[str, Any]) -> None:
        pass


def build_callbacks(specs) -> list[Callback]:
    """Instances for the config's `callbacks:` list. logging is always on: metrics.jsonl and the
    heartbeat are how the console and `rc1 status` see a run."""
    by_name = {s.name: s for s in specs}
    by_name.setdefault("logging", None)
    return [registry.load(registry.CALLBACKS[name])(by_name[name]) for name in registry.CALLBACK_ORDER
            if name in by_name]
