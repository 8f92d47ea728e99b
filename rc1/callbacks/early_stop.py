"""Stop when the eval metric (from eval_shadow) has not improved by min_delta for `patience` evals."""

from __future__ import annotations

import logging

from rc1.callbacks.base import BaseCallback

log = logging.getLogger("rc1.train")


class EarlyStopCallback(BaseCallback):
    def __init__(self, spec=None):
        self.patience = (spec.patience if spec and spec.patience else 3)
        self.min_delta = (spec.min_delta if spec and spec.min_delta is not None else 0.0)
        self.best = None
        self.bad = 0

    def on_step_end(self, recipe, record: dict) -> None:
        key = f"eval/{recipe.cfg.eval.metric}"
        if key not in record:
            return
        value = record[key]
        if self.best is None or value > self.best + self.min_delta:
            self.best, self.bad = value, 0
            return
        self.bad += 1
        if self.bad >= self.patience:
            log.warning("early stop: %s has not improved on %.4f for %d evals", key, self.best, self.bad)
            recipe.request_stop("early_stop")

    def state_dict(self) -> dict:
        return {"best": self.best, "bad": self.bad}

    def load_state_dict(self, state: dict) -> None:
        self.best, self.bad = state.get("best"), int(state.get("bad", 0))
