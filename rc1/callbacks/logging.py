"""Per-step metrics to reports/metrics.jsonl (with a heartbeat) and a line in logs/train.log."""

from __future__ import annotations

import logging
import time

from rc1.callbacks.base import BaseCallback
from rc1.engines.contract import Trainer
from rc1.runtime.errors import ConfigError
from rc1.runtime.metrics import MetricsWriter

log = logging.getLogger("rc1.train")

# Every metrics line carries these top-level keys (None when a strategy has no such quantity).
REQUIRED_KEYS = ("step", "loss", "kl", "ratio", "lr", "reward", "entropy", "completion_len", "clip_frac",
                 "mem_used_mb", "sec_per_step", "heartbeat")


class LoggingCallback(BaseCallback):
    def __init__(self, spec=None):
        self.writer = None

    def on_train_start(self, trainer: Trainer) -> None:
        if trainer.dist.is_main:  # one metrics.jsonl per run, with global figures: rank 0 writes it
            self.writer = MetricsWriter(trainer.ws.metrics_path)

    def on_step_end(self, trainer: Trainer, record: dict) -> None:
        if self.writer is None:
            return
        record["heartbeat"] = round(time.time(), 3)
        # one run per seed, one after the other in the same file: the console and the report tell them apart
        record.setdefault("seed_index", trainer.seed_index)
        for k in REQUIRED_KEYS:
            record.setdefault(k, None)
        self.writer.write(record)
        log.info("step %d loss=%s reward=%.4f kl=%s lr=%.3g %.2fs/step", record["step"], _f(record["loss"]),
                 record.get("reward") or 0.0, _f(record["kl"]), record.get("lr") or 0.0,
                 record.get("sec_per_step") or 0.0)


def _f(v) -> str:
    return "None" if v is None else f"{v:.5g}"


class TensorBoardCallback(BaseCallback):
    """Optional TensorBoard event files beside metrics.jsonl (reports/tensorboard/)."""

    def __init__(self, spec=None):
        try:
            from torch.utils.tensorboard import SummaryWriter  # noqa: F401
        except ImportError as exc:
            raise ConfigError(f"callbacks: tensorboard needs the `tensorboard` package ({exc})") from None
        self.tb = None

    def on_train_start(self, trainer: Trainer) -> None:
        from torch.utils.tensorboard import SummaryWriter

        if trainer.dist.is_main:
            self.tb = SummaryWriter(str(trainer.ws.reports / "tensorboard"))

    def on_step_end(self, trainer: Trainer, record: dict) -> None:
        if self.tb is None:
            return
        for k, v in record.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k not in ("step", "heartbeat", "time"):
                self.tb.add_scalar(k if "/" in k else f"train/{k}", v, record["step"])

    def on_train_end(self, trainer: Trainer) -> None:
        if self.tb is not None:
            self.tb.close()
