"""reports/metrics.jsonl: one JSON object per line, appended and flushed per step.

Readers tolerate a partially written last line and corrupt lines: they are skipped and counted.
"""

from __future__ import annotations

import json
import math
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def _clean(v: Any) -> Any:
    if hasattr(v, "item"):
        v = v.item()
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return None
    return v


class MetricsWriter:
    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, record: dict) -> dict:
        rec = {"time": round(time.time(), 3), **{k: _clean(v) for k, v in record.items()}}
        line = json.dumps(rec, ensure_ascii=False, default=str) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line.encode("utf-8"))
        finally:
            os.close(fd)
        return rec


@dataclass
class MetricsTail:
    """Incremental reader: call `poll()` to get records appended since the last call."""

    path: Path
    offset: int = 0
    bad_lines: int = 0
    _partial: bytes = field(default=b"", repr=False)

    def poll(self, max_bytes: int | None = None) -> list[dict]:
        if not self.path.exists():
            return []
        size = self.path.stat().st_size
        if size < self.offset:  # truncated / replaced: start over
            self.offset, self._partial = 0, b""
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read(max_bytes) if max_bytes else fh.read()
        self.offset += len(chunk)
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()  # incomplete last line (or b"")
        out = []
        for raw in lines:
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                self.bad_lines += 1
                continue
            if isinstance(rec, dict):
                out.append(rec)
            else:
                self.bad_lines += 1
        return out


def read_metrics(path: str | os.PathLike) -> tuple[list[dict], int]:
    """All complete records and the number of corrupt lines skipped."""
    tail = MetricsTail(Path(path))
    recs = tail.poll()
    return recs, tail.bad_lines


def last_metrics(path: str | os.PathLike, n: int = 20) -> list[dict]:
    p = Path(path)
    if not p.exists():
        return []
    size = p.stat().st_size
    with open(p, "rb") as fh:
        fh.seek(max(0, size - 64 * 1024 * max(1, n // 20)))
        chunk = fh.read()
    out = []
    for raw in chunk.split(b"\n")[-(n + 1):]:
        try:
            rec = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out[-n:]
