"""Save a checkpoint every run.save_steps steps (the recipe also saves at the end and on SIGTERM).

With the TRL engine, TRL schedules the saves (same save_steps) and the TRL recipe publishes them. A
save that falls inside a multi-epoch accumulation window is taken when the window closes.
"""

from __future__ import annotations

from rc1.callbacks.base import BaseCallback


class CheckpointCallback(BaseCallback):
    def __init__(self, spec=None):
        self.due = False

    def on_step_end(self, recipe, record: dict) -> None:
        if not getattr(recipe, "saves_on_schedule", True) or not recipe.checkpoints:
            return  # the TRL recipe saves through TRL's own hook at the same steps
        self.due = self.due or recipe.crossed(recipe.cfg.run.save_steps)
        if self.due and recipe.can_checkpoint_now:
            path = recipe.save_checkpoint(reason="scheduled")
            record["checkpoint"] = recipe.ws.rel(path)
            self.due = False
