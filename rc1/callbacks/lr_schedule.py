"""LR schedule and gradient clipping as observable callbacks.

The engine owns the scheduler (warmup + constant/linear/cosine from cfg.engine, stepped at each
optimizer update) and the clipping (cfg.engine.max_grad_norm). These callbacks make them visible:
the schedule is logged at start and the LR is checked every step; clipping reports how often the
norm was clipped and stops the run loudly on a non-finite gradient norm.
"""

from __future__ import annotations

import logging
import math

from rc1.callbacks.base import BaseCallback
from rc1.engines.contract import Trainer

log = logging.getLogger("rc1.train")


class LRScheduleCallback(BaseCallback):
    def __init__(self, spec=None):
        pass

    def on_train_start(self, trainer: Trainer) -> None:
        e, r = trainer.cfg.engine, trainer.cfg.run
        updates = math.ceil(trainer.cfg.schedule_steps / r.gradient_accumulation)
        log.info("lr schedule: %s, base lr %g, warmup %d of %d optimizer updates", e.lr_schedule, e.lr,
                 e.warmup_steps, updates)
        if e.warmup_steps >= updates:
            log.warning("lr warmup (%d updates) is not shorter than the run (%d updates)", e.warmup_steps, updates)

    def on_step_end(self, trainer: Trainer, record: dict) -> None:
        lr = record.get("lr")
        if lr is not None and (not math.isfinite(lr) or lr < 0):
            raise RuntimeError(f"learning rate became invalid at step {record['step']}: {lr}")


class GradClipCallback(BaseCallback):
    def __init__(self, spec=None):
        self.updates = 0
        self.clipped = 0

    def on_step_end(self, trainer: Trainer, record: dict) -> None:
        norm = record.get("grad_norm")
        if norm is None or "optimizer_updates" not in record:
            return
        if not math.isfinite(norm) and not trainer.engine.skips_nonfinite_steps:
            raise RuntimeError(f"non-finite gradient norm at step {record['step']}: {norm}")
        self.updates += 1
        self.clipped += norm > trainer.cfg.engine.max_grad_norm
        record["grad_clipped_frac"] = self.clipped / self.updates
