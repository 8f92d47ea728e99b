"""Live metrics for the Training screen: bounded series fed by `MetricsTail`, downsampled for plots.

Runs on a worker thread. A 100k-line metrics.jsonl takes seconds to parse in full, so a large
file is first shown from an evenly spaced sample of its lines plus its exact tail (fast), while
the full scan runs in a child process (parsing in a thread would starve the UI of the GIL) and
then replaces the preview; from there on the file is tailed incrementally. Corrupt or partial
lines are skipped and counted by `MetricsTail`; the count is shown.
"""

from __future__ import annotations

import bisect
import fnmatch
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from rc1.runtime.metrics import MetricsTail

# (plot title, metric keys); a key with * is a pattern (fnmatch) over every key seen: "reward/*" is each
# reward/<dimension>, "curriculum/*/weight" each curriculum/<task>/L<level>/weight (the level mix).
PLOTS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("loss", ("loss",)),
    ("KL", ("kl",)),
    ("reward / success", ("reward", "success")),
    ("reward / dimension", ("reward/*",)),
    ("ratio / clip_frac", ("ratio", "clip_frac")),
    ("lr", ("lr",)),
    ("sec / step", ("sec_per_step",)),
    ("mem used MB", ("mem_used_mb",)),
    ("curriculum mix", ("curriculum/*/weight",)),
)
# Prefixes whose plain name is used when the plain key is absent (e.g. train/loss -> loss).
GROUP_PREFIXES = ("train/", "rollout/", "gate/", "perf/")
SERIES_CAP = 8192        # points kept per series; beyond it, every other point is dropped and the stride doubles
PLOT_POINTS = 64         # points per series handed to plotext (bucket means; a plot is ~25 cells x 2 sub-columns)
FULL_READ_BYTES = 2 << 20   # files up to this size are read in full before the first render
SAMPLE_LINES = 1200      # lines sampled from a larger file for the preview
TAIL_BYTES = 128 << 10   # exact tail read for the preview
SCAN_CHUNK = 4 << 20     # bytes parsed per loop iteration during the full scan
ALERTS_KEPT = 5          # latest trainer alerts (e.g. reward/success divergence) shown on the Training screen


class Series:
    """(x, y) points with a bounded length: uniform decimation keeps the whole history's shape."""

    __slots__ = ("xs", "ys", "stride", "_skip", "last")

    def __init__(self) -> None:
        self.xs: list[float] = []
        self.ys: list[float] = []
        self.stride = 1
        self._skip = 0
        self.last: tuple[float, float] | None = None

    def add(self, x: float, y: float) -> None:
        self.last = (x, y)
        self._skip += 1
        if self._skip < self.stride:
            return
        self._skip = 0
        self.xs.append(x)
        self.ys.append(y)
        if len(self.xs) >= SERIES_CAP:
            self.xs, self.ys = self.xs[::2], self.ys[::2]
            self.stride *= 2

    def rewind(self, x: float) -> None:
        """Forget the points at or after x: a run resumed from an earlier checkpoint redoes those steps."""
        keep = bisect.bisect_left(self.xs, x)
        del self.xs[keep:], self.ys[keep:]
        if self.last is not None and self.last[0] >= x:
            self.last = (self.xs[-1], self.ys[-1]) if self.xs else None

    def points(self, n: int = PLOT_POINTS) -> tuple[list[float], list[float]]:
        """At most n+1 points: bucket means over the kept points, plus the latest point."""
        xs, ys = self.xs, self.ys
        if self.last is not None and (not xs or xs[-1] != self.last[0]):
            xs, ys = xs + [self.last[0]], ys + [self.last[1]]
        if len(xs) <= n:
            return list(xs), list(ys)
        import numpy as np

        ax, ay = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
        edges = np.linspace(0, len(ax), n + 1).astype(int)
        bx = np.add.reduceat(ax, edges[:-1]) / np.diff(edges)
        by = np.add.reduceat(ay, edges[:-1]) / np.diff(edges)
        return bx.tolist() + [xs[-1]], by.tolist() + [ys[-1]]


def _number(v) -> float | None:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    v = float(v)
    return v if math.isfinite(v) else None


@dataclass
class MetricsStore:
    series: dict[str, Series] = field(default_factory=dict)
    records: int = 0
    last: dict = field(default_factory=dict)
    recent_sec_per_step: list[float] = field(default_factory=list)
    alerts: list[tuple[int, str]] = field(default_factory=list)   # (step, message) of the trainer's alerts
    seed_index: int | None = None   # the run the plots show: a config with N seeds trains them one after another

    def add(self, rec: dict) -> None:
        self.records += 1
        if rec.get("alert"):
            self.alerts.append((rec.get("step"), str(rec["alert"])))
            del self.alerts[:-ALERTS_KEPT]
        step = _number(rec.get("step", rec.get("train/step")))
        x = step if step is not None else float(self.records)
        self._follow_run(rec.get("seed_index"), x)
        flat = {}
        for k, v in rec.items():
            plain = next((k[len(p):] for p in GROUP_PREFIXES if k.startswith(p)), k)
            if plain not in flat or plain == k:
                flat[plain] = v
        for k, v in flat.items():
            y = _number(v)
            if y is None or k in ("step", "time", "heartbeat"):
                continue
            s = self.series.get(k)
            if s is None:
                s = self.series[k] = Series()
            s.add(x, y)
        self.last = {**self.last, **flat, "step": int(x)}
        sps = _number(flat.get("sec_per_step"))
        if sps is not None:
            self.recent_sec_per_step.append(sps)
            del self.recent_sec_per_step[:-20]

    def _follow_run(self, seed_index, x: float) -> None:
        """The plots show one run: the next seed's run starts them afresh (its steps restart at 1), and a run
        resumed from an earlier checkpoint replaces the steps it redoes (the x axis never runs backwards)."""
        if isinstance(seed_index, int) and seed_index != self.seed_index:
            if self.seed_index is not None:
                self.series.clear()
                self.recent_sec_per_step.clear()
            self.seed_index = seed_index
            return
        for s in self.series.values():
            if s.last is not None and s.last[0] > x:
                s.rewind(x)

    def add_all(self, recs: list[dict]) -> None:
        for r in recs:
            self.add(r)

    def plot_series(self) -> dict[str, list[tuple[str, list[float], list[float]]]]:
        out: dict[str, list] = {}
        for title, keys in PLOTS:
            names: list[str] = []
            for k in keys:
                if "*" in k:
                    names += sorted(n for n in self.series if fnmatch.fnmatchcase(n, k))
                elif k in self.series:
                    names.append(k)
            out[title] = [(n, *self.series[n].points()) for n in names]
        return out

    def sec_per_step(self) -> float | None:
        r = self.recent_sec_per_step
        return sum(r) / len(r) if r else None


@dataclass(frozen=True)
class MetricsSnapshot:
    """What the Training screen shows; built on the worker thread, immutable afterwards."""

    series: dict          # plot title -> [(name, xs, ys)]
    records: int          # records read (in the preview: sampled)
    bad_lines: int        # corrupt / partial lines skipped
    last: dict            # latest value of every key
    sec_per_step: float | None
    exact: bool           # False while a large file is shown from a sample
    file_exists: bool = True
    alerts: tuple = ()    # (step, message) of the latest trainer alerts


class MetricsFeed:
    """Owns the tail of reports/metrics.jsonl. Not thread-safe: one worker thread drives it."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.tail = MetricsTail(self.path)
        self.store = MetricsStore()
        self.preview_store: MetricsStore | None = None
        self.preview_bad = 0
        self._scan = None  # ChildCall of the full scan (large files only)

    def size(self) -> int:
        try:
            return self.path.stat().st_size
        except OSError:
            return 0

    @property
    def catching_up(self) -> bool:
        return self.preview_store is not None

    def start(self) -> MetricsSnapshot:
        """First view: the whole file if small, else a sample + exact tail (then scan in `step`)."""
        size = self.size()
        if size <= FULL_READ_BYTES:
            self.store.add_all(self.tail.poll())
            return self.snapshot()
        self.preview_store, self.preview_bad = self._sample(size)
        return self.snapshot()

    def step(self) -> bool:
        """Read what is new (or adopt the finished full scan); True if the view changed."""
        if self.preview_store is not None:
            from rc1.console.procs import ChildCall

            if self._scan is None:
                self._scan = ChildCall(scan_metrics, str(self.path), self.size(), SERIES_CAP, SCAN_CHUNK)
                return False
            if not self._scan.done():
                return False
            store, offset, partial, bad = self._scan.result()  # a failed scan raises here
            self.store, self._scan, self.preview_store = store, None, None
            self.tail = MetricsTail(self.path, offset=offset, bad_lines=bad, _partial=partial)
            return True
        recs = self.tail.poll(max_bytes=SCAN_CHUNK)
        self.store.add_all(recs)
        return bool(recs)

    def snapshot(self) -> MetricsSnapshot:
        exists = self.path.exists()
        if self.preview_store is not None:
            st = self.preview_store
            return MetricsSnapshot(st.plot_series(), st.records, self.preview_bad, dict(st.last),
                                   st.sec_per_step(), exact=False, file_exists=exists, alerts=tuple(st.alerts))
        st = self.store
        return MetricsSnapshot(st.plot_series(), st.records, self.tail.bad_lines, dict(st.last),
                               st.sec_per_step(), exact=True, file_exists=exists, alerts=tuple(st.alerts))

    def _sample(self, size: int) -> tuple[MetricsStore, int]:
        store, bad = MetricsStore(), 0
        tail_start = max(0, size - TAIL_BYTES)
        with open(self.path, "rb") as fh:
            step = max(1, tail_start // SAMPLE_LINES)
            next_free = 0  # first byte not yet sampled: never take a line twice
            for off in range(0, tail_start, step):
                off = max(off, next_free)
                if off >= tail_start:
                    break
                fh.seek(off)
                buf = fh.read(4096)
                if buf.count(b"\n") < 2:  # unusually long lines: read more
                    buf += fh.read(1 << 16)
                start = off
                if off and not (off == next_free and next_free):
                    nl = buf.find(b"\n")
                    if nl < 0:
                        continue
                    buf, start = buf[nl + 1:], off + nl + 1
                end = buf.find(b"\n")
                if end < 0 or start >= tail_start:
                    continue
                next_free = start + end + 1
                rec, ok = _parse(buf[:end])
                if rec is not None:
                    store.add(rec)
                bad += not ok
            fh.seek(tail_start)
            chunk = fh.read()
        lines = chunk.split(b"\n")
        if tail_start:
            lines = lines[1:]  # first line is cut by the seek
        for raw in lines[:-1]:  # the last piece is incomplete (or empty)
            rec, ok = _parse(raw)
            if rec is not None:
                store.add(rec)
            bad += not ok
        return store, bad


def scan_metrics(path: str, end: int, cap: int, chunk: int, progress=None) -> tuple[MetricsStore, int, bytes, int]:
    """Full scan up to at least byte `end` (in a child process): the store and the tail's state."""
    global SERIES_CAP
    SERIES_CAP = cap
    tail, store = MetricsTail(Path(path)), MetricsStore()
    while tail.offset < end:
        before = tail.offset
        store.add_all(tail.poll(max_bytes=chunk))
        if tail.offset == before:
            break
    return store, tail.offset, tail._partial, tail.bad_lines


def _parse(raw: bytes) -> tuple[dict | None, bool]:
    if not raw.strip():
        return None, True
    try:
        rec = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None, False
    return (rec, True) if isinstance(rec, dict) else (None, False)


def eta_seconds(step: int | None, max_steps: int | None, sec_per_step: float | None) -> float | None:
    if step is None or not max_steps or not sec_per_step:
        return None
    return max(0, max_steps - step) * sec_per_step


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    s = int(round(seconds))
    h, rem = divmod(s, 3600)
    m, sec = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{sec:02d}s" if m else f"{sec}s")
