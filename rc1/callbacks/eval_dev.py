"""Every run.eval_steps: greedy rollouts on a fixed, stratified subset of the DEV split, scored by the RewardModel.

The dev split is data.eval_path (eval_min): `eval_items` items (default 16) stratified over task and
bucket, the same items at every eval so the curve compares like with like. It is what chooses the
model during training (early stop reads its eval/<metric>); the held-out shadow set is never read
for that (rc1.eval.splits refuses a dev file that is or overlaps the held-out set). Results go into
the step's metrics (eval/success, eval/reward, ...) and reports/eval_dev.jsonl. With a live judge the
episodes are graded in one concurrent batch; a judge fault there keeps the trained step: the run
checkpoints, stops with the fault's reason (end record) and raises it.
"""

from __future__ import annotations

import json
import logging

from rc1.callbacks.base import BaseCallback
from rc1.engines.contract import Trainer
from rc1.judge.live import JudgeFault
from rc1.runtime.atomic import append_line

log = logging.getLogger("rc1.train")
DEFAULT_EVAL_ITEMS = 16
EVAL_SEED = 1234
LOG_FILE = "eval_dev.jsonl"


class EvalDevCallback(BaseCallback):
    def __init__(self, spec=None):
        self.n = spec.eval_items if spec and spec.eval_items else DEFAULT_EVAL_ITEMS
        self.items: list[dict] = []
        self.source: dict | None = None

    def on_train_start(self, trainer: Trainer) -> None:
        from rc1.eval.splits import dev_set

        dev = dev_set(trainer.ws, trainer.cfg, self.n)
        if dev is None:
            log.warning("eval_dev: the dev split %s does not exist; no dev evals this run (the held-out set is "
                        "never used instead)", trainer.cfg.data.eval_path)
            return
        self.items = dev.items
        self.source = {"split": "dev", "path": dev.path, "sha256": dev.sha256, "n": len(dev.items)}
        log.info("eval_dev: %d items of %s (stratified) every %d steps", len(self.items), dev.path,
                 trainer.cfg.run.eval_steps)

    def on_step_end(self, trainer: Trainer, record: dict) -> None:
        if not self.items or not trainer.crossed(trainer.cfg.run.eval_steps):
            return
        try:
            metrics = trainer.evaluate(self.items, seed=EVAL_SEED, max_new_tokens=trainer.cfg.eval.max_new_tokens)
        except JudgeFault as exc:  # the step trained; its dev eval has no grade: keep the step, checkpoint, stop
            if trainer.dist.distributed:  # one rank's fault: the other ranks wait in the eval's gather
                raise
            record["eval/error"] = exc.reason
            trainer.stop_after_fault(exc, f"training stopped ({exc.reason}) after step {trainer.step} with its "
                                         "checkpoint; its dev eval was not taken, and `rc1 resume` continues "
                                         "with the next step")
            return
        record.update(metrics)
        if trainer.dist.is_main:  # every rank evaluates its share; rank 0 writes
            append_line(trainer.ws.reports / LOG_FILE,
                        json.dumps({"step": trainer.step, "source": self.source, **metrics}))
