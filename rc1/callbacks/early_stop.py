"""Stop when the dev split's eval metric (from eval_dev) has not improved by min_delta for `patience` evals.

It reads eval/<eval.metric> from the step's metrics, which only the eval_dev callback writes, on the
dev split (never the held-out set). The training-time dev eval measures success (and reward), so
eval.metric must name success; a config where early stop could never fire (no eval_dev callback, no
dev split, a metric the dev eval does not measure) is refused at train start.
"""

from __future__ import annotations

import logging

from rc1.callbacks.base import BaseCallback
from rc1.engines.contract import Trainer
from rc1.runtime.errors import ConfigError

log = logging.getLogger("rc1.train")
MEASURED = ("success",)  # what the engines' eval_step reports as eval/<name>


class EarlyStopCallback(BaseCallback):
    def __init__(self, spec=None):
        self.patience = (spec.patience if spec and spec.patience else 3)
        self.min_delta = (spec.min_delta if spec and spec.min_delta is not None else 0.0)
        self.best = None
        self.bad = 0
        self.key = "eval/success"

    def on_train_start(self, trainer: Trainer) -> None:
        from rc1.callbacks.eval_dev import EvalDevCallback
        from rc1.eval.metrics import METRIC_ALIASES

        metric = METRIC_ALIASES.get(trainer.cfg.eval.metric, trainer.cfg.eval.metric)
        if metric not in MEASURED:
            raise ConfigError(f"callbacks: early_stop stops on the dev eval's {', '.join(MEASURED)}; eval.metric "
                              f"{trainer.cfg.eval.metric!r} is not measured during training: set eval.metric: success "
                              "or drop early_stop")
        dev = [cb for cb in trainer.callbacks if isinstance(cb, EvalDevCallback)]
        if not dev:
            raise ConfigError("callbacks: early_stop needs eval_dev (it stops on the dev split's eval metric)")
        if not dev[0].items:
            raise ConfigError(f"callbacks: early_stop needs a dev split, and {trainer.cfg.data.eval_path} does not "
                              "exist (run `rc1 data make-min`)")
        self.key = f"eval/{metric}"

    def on_step_end(self, trainer: Trainer, record: dict) -> None:
        if self.key not in record:
            return
        value = record[self.key]
        if self.best is None or value > self.best + self.min_delta:
            self.best, self.bad = value, 0
            return
        self.bad += 1
        if self.bad >= self.patience:
            log.warning("early stop: dev %s has not improved on %.4f for %d evals", self.key, self.best, self.bad)
            trainer.request_stop("early_stop")

    def state_dict(self) -> dict:
        return {"best": self.best, "bad": self.bad}

    def load_state_dict(self, state: dict) -> None:
        self.best, self.bad = state.get("best"), int(state.get("bad", 0))
