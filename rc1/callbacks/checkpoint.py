"""Save a checkpoint every run.save_steps steps (the recipe also saves at the end and on SIGTERM).

With the TRL engine, TRL schedules the saves (same save_steps) and the engine publishes them.
"""

from __future__ import annotations

from rc1.callbacks.base import BaseCallback


class CheckpointCallback(BaseCallback):
    def __init__(self, spec=None):
        pass

    def on_step_end(self, recipe, record: dict) -> None:
        if getattr(recipe.engine, "owns_checkpoints", False) or not recipe.checkpoints:
            return  # the TRL engine saves through TRL's own hook at the same steps
        if recipe.step % recipe.cfg.run.save_steps == 0:
            path = recipe.save_checkpoint(reason="scheduled")
            record["checkpoint"] = recipe.ws.rel(path)
