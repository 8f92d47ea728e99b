"""Where a training step's time goes: named wall-clock spans, logged as `time/<name>_s` metrics.

    spans = Spans()
    with spans("generate"):          # a block
        ...
    spans.restart()                  # or laps: each lap() adds the time since the previous one
    ...; spans.lap("rollout")
    ...; spans.lap("plan")
    record.update(spans.drain())     # {"time/generate_s": 1.2, "time/rollout_s": 1.5, ...}; totals restart at 0

Spans of one name add up until drained (a step that redraws a group generates twice). Wall time
(perf_counter): on a shared CPU it includes the time the neighbours took.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Iterator


class Spans:
    def __init__(self) -> None:
        self.totals: dict[str, float] = {}
        self._last = time.perf_counter()

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - t0)

    def add(self, name: str, seconds: float) -> None:
        self.totals[name] = self.totals.get(name, 0.0) + seconds

    def restart(self) -> None:
        self._last = time.perf_counter()

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.add(name, now - self._last)
        self._last = now

    def drain(self) -> dict[str, float]:
        out = {f"time/{k}_s": v for k, v in self.totals.items()}
        self.totals = {}
        return out
