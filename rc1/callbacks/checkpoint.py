"""Save a checkpoint every run.save_steps steps (the recipe also saves at the end and on SIGTERM).

With the TRL engine, TRL schedules the saves (same save_steps) and the TRL recipe publishes them. A
save that falls inside a multi-epoch accumulation window is taken when the window closes.
"""

from __future__ import annotations

from rc1.callbacks.base import BaseCallback
from rc1.engines.contract import Trainer


class CheckpointCallback(BaseCallback):
    def __init__(self, spec=None):
        self.due = False

    def on_step_end(self, trainer: Trainer, record: dict) -> None:
        if not trainer.saves_on_schedule or not trainer.checkpoints:
            return  # the TRL recipe saves through TRL's own hook at the same steps
        self.due = self.due or trainer.crossed(trainer.cfg.run.save_steps)
        if self.due and trainer.can_checkpoint_now:
            path = trainer.save_checkpoint(reason="scheduled")
            record["checkpoint"] = trainer.ws.rel(path)
            self.due = False
