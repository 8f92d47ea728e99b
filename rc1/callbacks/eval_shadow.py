"""Every run.eval_steps: greedy rollouts on a fixed eval subset, scored by the RewardModel.

The subset is the first `eval_items` (default 16) items of data.shadow_path, else data.eval_path:
the same items at every eval, so the curve compares like with like. Results go into the step's
metrics (eval/success, eval/reward, ...) and reports/eval_shadow.jsonl.
"""

from __future__ import annotations

import json
import logging

from rc1.callbacks.base import BaseCallback
from rc1.runtime.atomic import append_line

log = logging.getLogger("rc1.train")
DEFAULT_EVAL_ITEMS = 16
EVAL_SEED = 1234


class EvalShadowCallback(BaseCallback):
    def __init__(self, spec=None):
        self.n = spec.eval_items if spec and spec.eval_items else DEFAULT_EVAL_ITEMS
        self.items: list[dict] = []
        self.source = None

    def on_train_start(self, recipe) -> None:
        from rc1.training.sampler import read_items

        for rel in (recipe.cfg.data.shadow_path, recipe.cfg.data.eval_path):
            p = recipe.ws.path(rel)
            if p.exists():
                self.items, self.source = read_items(p)[: self.n], rel
                break
        if not self.items:
            log.warning("eval_shadow: neither %s nor %s exists; no evals this run", recipe.cfg.data.shadow_path,
                        recipe.cfg.data.eval_path)

    def on_step_end(self, recipe, record: dict) -> None:
        if not self.items or not recipe.crossed(recipe.cfg.run.eval_steps):
            return
        metrics = recipe.evaluate(self.items, seed=EVAL_SEED, max_new_tokens=recipe.cfg.eval.max_new_tokens)
        record.update(metrics)
        if recipe.dist.is_main:  # every rank evaluates its share; rank 0 writes
            append_line(recipe.ws.reports / "eval_shadow.jsonl",
                        json.dumps({"step": recipe.step, "source": self.source, **metrics}))
