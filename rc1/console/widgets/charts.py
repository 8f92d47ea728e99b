"""Interval charts drawn as Rich text at the width they are given: a labelled row per estimate, its 95 % CI
as a bar, the point as ●, a shaded target band and an axis with tick labels. Used for the difficulty fit
(task x level pass rate against the band) and the held-out gain per task (trained - base, pp).

Rich text rather than plotext: these are small, fixed data read from a report, drawn on the UI thread
(plotext keeps one global figure, owned by the live-data worker), and they must keep their axis and
labels at 80 columns as at 250.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.text import Text

MIN_TRACK = 12  # the narrowest bar track still worth drawing


@dataclass(frozen=True)
class Row:
    label: str
    value: float | None
    lo: float | None = None
    hi: float | None = None
    note: str = ""          # right of the bar (n, successes, chosen/dropped)
    style: str = "cyan"     # the point's and CI's colour


class IntervalChart:
    """Rows of point + CI on one axis [lo, hi]; `band` shaded on every row; `zero` marks a reference value."""

    def __init__(self, rows: list[Row], lo: float, hi: float, *, band: tuple[float, float] | None = None,
                 zero: float | None = None, unit: str = "", ticks: int = 5, title: str = "",
                 label_width: int | None = None, note_width: int | None = None):
        """`label_width` / `note_width`: shared by charts drawn one under another, so their axes line up."""
        self.rows, self.lo, self.hi, self.label_width, self.note_width = rows, lo, hi, label_width, note_width
        self.band, self.zero, self.unit, self.ticks, self.title = band, zero, unit, ticks, title

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(options.max_width, 40), options.max_width)

    def _col(self, x: float, track: int) -> int:
        f = (x - self.lo) / (self.hi - self.lo) if self.hi > self.lo else 0.0
        return max(0, min(track - 1, round(f * (track - 1))))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        longest = self.label_width or max((len(r.label) for r in self.rows), default=4)
        label_w = min(longest, max(6, width // 4))
        note_w = min(self.note_width or max((len(r.note) for r in self.rows), default=0), max(0, width // 3))
        track = width - label_w - note_w - 3
        if track < MIN_TRACK:  # too narrow for a bar: the numbers alone
            note_w, track = 0, width - label_w - 3
        if self.title:
            yield Text(self.title, style="bold")
        for r in self.rows:
            line = Text(r.label[:label_w].ljust(label_w), style="bold", no_wrap=True, overflow="ellipsis")
            line.append(" │")
            line.append_text(self._bar(r, track))
            if note_w:
                line.append(" " + r.note[:note_w], style="dim")
            yield line
        yield self._axis(label_w, track)

    def _bar(self, r: Row, track: int) -> Text:
        cells = [" "] * track
        styles = [""] * track
        if self.band is not None:
            for c in range(self._col(self.band[0], track), self._col(self.band[1], track) + 1):
                cells[c], styles[c] = "░", "green"
        if self.zero is not None:
            c = self._col(self.zero, track)
            cells[c], styles[c] = "┊", "dim"
        if r.lo is not None and r.hi is not None:
            for c in range(self._col(r.lo, track), self._col(r.hi, track) + 1):
                cells[c], styles[c] = "━", r.style
        if r.value is not None:
            c = self._col(r.value, track)
            cells[c], styles[c] = "●", f"bold {r.style}"
        out = Text(no_wrap=True)
        for ch, st in zip(cells, styles):
            out.append(ch, style=st)
        return out

    def _axis(self, label_w: int, track: int) -> Text:
        line = [" "] * track
        labels = [" "] * (track + 8)
        n = max(2, min(self.ticks, track // 8 + 1))
        ticks = [self.lo + (self.hi - self.lo) * i / (n - 1) for i in range(n)]
        if self.zero is not None and self.zero not in ticks:  # the reference value is always labelled
            ticks.insert(1, self.zero)
        for x in ticks:
            c = self._col(x, track)
            line[c] = "┴" if 0 < c < track - 1 else ("└" if c == 0 else "┘")
            tick = f"{x:g}{self.unit}"
            start = max(0, min(c - len(tick) // 2, track - len(tick)))
            if all(ch == " " for ch in labels[max(0, start - 1):start + len(tick) + 1]):
                labels[start:start + len(tick)] = tick
        pad = " " * (label_w + 2)
        for c in range(track):
            if line[c] == " ":
                line[c] = "─"
        return Text(pad + "".join(line) + "\n" + pad + "".join(labels[:track]).rstrip(), style="dim", no_wrap=True)


def _ci(v) -> tuple[float | None, float | None]:
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, (int, float)) for x in v):
        return float(v[0]), float(v[1])
    return None, None


def _fit_note(level: dict) -> str:
    rate = level.get("pass_rate")
    if not isinstance(rate, (int, float)):
        return "—"
    return f"{rate:.2f} {level.get('successes', '?')}/{level.get('n', '?')}"


def difficulty_fit_chart(doc: dict) -> RenderableType:
    """reports/difficulty_fit.json: per task, each level's base pass rate with its CI against the band."""
    band = _ci(doc.get("band"))
    tasks = doc.get("tasks") or {}
    if not isinstance(tasks, dict) or not tasks:
        return Text("the difficulty fit lists no tasks", style="yellow")
    parts: list[RenderableType] = []
    label_width = max((len(f"L{lv.get('level')} {lv.get('name', '')}") + 2 for t in tasks.values()
                       for lv in t.get("levels") or []), default=4)
    note_width = max((len(_fit_note(lv)) for t in tasks.values() for lv in t.get("levels") or []), default=0)
    if band[0] is not None:
        parts.append(Text.assemble(("target band ", "bold"), (f"{band[0]:g}–{band[1]:g}", "green"),
                                   (" base pass rate (░); ● pass rate, ━ its 95 % CI; ✔ chosen level", "dim")))
    for task, t in tasks.items():
        levels = t.get("levels") or []
        rows = []
        for lv in levels:
            lo, hi = _ci(lv.get("ci"))
            rate = lv.get("pass_rate")
            chosen = bool(lv.get("chosen"))
            name = f"L{lv.get('level')} {lv.get('name', '')}".rstrip()
            note = _fit_note(lv)
            rows.append(Row(("✔ " if chosen else "  ") + name, rate if isinstance(rate, (int, float)) else None,
                            lo, hi, note, style="green" if chosen else "cyan"))
        dropped = t.get("dropped")
        head = Text(task, style="bold underline")
        if dropped:
            head.append("  dropped", style="bold red")
        if t.get("reason"):
            head.append(f"  {t['reason']}", style="red" if dropped else "dim")
        parts.append(head)
        if rows:
            parts.append(IntervalChart(rows, 0.0, 1.0, band=band if band[0] is not None else None,
                                       label_width=label_width, note_width=note_width))
    return Group(*parts)


def heldout_gain_chart(report: dict) -> RenderableType | None:
    """An eval report (reports/eval_*.json): held-out success gain (trained - base, pp) per task with its
    paired-bootstrap 95 % CI, one chart per evaluated run; None when the report has no trained run."""
    set_name = report.get("heldout_set") or "heldout"
    charts: list[RenderableType] = []
    for run in report.get("runs") or []:
        delta = ((run.get("results") or {}).get(set_name) or {}).get("delta") or {}
        by_task = dict(delta.get("by_task") or {})
        if delta.get("success"):
            by_task["all tasks"] = delta["success"]
        rows = []
        for task, d in by_task.items():
            lo, hi = _ci(d.get("ci95_pp"))
            v = d.get("delta_pp")
            if not isinstance(v, (int, float)):
                continue
            style = "green" if lo is not None and lo > 0 else ("red" if hi is not None and hi < 0 else "yellow")
            rows.append(Row(task, float(v), lo, hi, f"{v:+.1f} pp n={d.get('n', '?')}", style=style))
        if not rows:
            continue
        span = max(5.0, *(abs(x) for r in rows for x in (r.value, r.lo, r.hi) if x is not None))
        span = float(-(-span // 5) * 5)  # round up to a multiple of 5 pp
        seed = run.get("seed")
        charts.append(IntervalChart(rows, -span, span, zero=0.0, unit="", title=(
            "held-out gain, trained − base (pp), 95 % CI" + (f" — seed {seed}" if seed is not None else ""))))
    return Group(*charts) if charts else None
