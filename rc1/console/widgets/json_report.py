"""Generic rendering of a JSON report, so fields added later still show.

- scalars at one level -> a key/value table (nested scalar dicts flattened to dotted keys);
- {"bins"/"edges": [...], "counts": [...]}, and {label: number, ...} under a histogram-like key
  (hist, count, dist, mix, share, bucket, freq) -> horizontal bars;
- {row: {col: number}} -> a 2-D table (e.g. per-task bucket shares);
- a list of dicts -> a table with the union of their keys; a list of numbers -> n/min/mean/max.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from rc1.runtime.fmt import shown

MAX_ROWS = 40
BAR_WIDTH = 30


def _is_num(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, int, float, bool))


def fmt(v: Any) -> str:
    return shown(v, width=80)


HIST_WORDS = ("hist", "count", "dist", "mix", "share", "bucket", "freq")


def _hist_like(key: str) -> bool:
    return any(w in key.lower() for w in HIST_WORDS)


def _flatten_scalars(d: dict, prefix: str = "", hint: bool = False) -> tuple[list[tuple[str, Any]], list[tuple[str, Any]]]:
    """(dotted scalar items, (dotted key, value) of everything that needs its own section)."""
    scalars, rest = [], []
    for k, v in d.items():
        key = f"{prefix}{k}"
        if _is_scalar(v):
            scalars.append((key, v))
        elif (isinstance(v, dict) and v and all(_is_scalar(x) for x in v.values())
              and not _histogram(v, hint or _hist_like(str(k)))):
            scalars += [(f"{key}.{k2}", v2) for k2, v2 in v.items()]
        else:
            rest.append((key, v))
    return scalars, rest


def _histogram(v: Any, hint: bool = False) -> list[tuple[str, float]] | None:
    if isinstance(v, dict):
        counts = v.get("counts")
        edges = v.get("edges", v.get("bins"))
        if isinstance(counts, list) and isinstance(edges, list) and counts and all(_is_num(c) for c in counts):
            labels = []
            for i in range(len(counts)):
                if len(edges) == len(counts) + 1 and all(_is_num(e) for e in edges):
                    labels.append(f"{edges[i]:.3g}–{edges[i + 1]:.3g}")
                else:
                    labels.append(fmt(edges[i]) if i < len(edges) else str(i))
            return list(zip(labels, [float(c) for c in counts]))
        if hint and len(v) >= 2 and all(_is_num(x) for x in v.values()) and len(v) <= MAX_ROWS:
            return [(str(k), float(x)) for k, x in v.items()]
    return None


def bars(items: list[tuple[str, float]]) -> Table:
    top = max((abs(x) for _, x in items), default=0) or 1
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(no_wrap=True)
    t.add_column(justify="right", no_wrap=True)
    t.add_column(no_wrap=True)
    for label, x in items:
        n = int(round(BAR_WIDTH * abs(x) / top))
        t.add_row(label, fmt(x), Text("█" * n + ("▏" if n == 0 and x else ""), style="cyan"))
    return t


def kv_table(items: list[tuple[str, Any]]) -> Table:
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_column(style="bold", no_wrap=True)
    t.add_column()
    for k, v in items:
        style = "green" if v is True else ("red" if v is False else "")
        t.add_row(k, Text(fmt(v), style=style))
    return t


def _matrix(v: Any) -> Table | None:
    if not (isinstance(v, dict) and v and all(isinstance(x, dict) and x for x in v.values())):
        return None
    if not all(_is_scalar(y) for x in v.values() for y in x.values()):
        return None
    cols: list[str] = []
    for x in v.values():
        cols += [c for c in x if c not in cols]
    if len(cols) > 12:
        return None
    t = Table(expand=False, pad_edge=False)
    t.add_column("")
    for c in cols:
        t.add_column(str(c), justify="right")
    for r, x in list(v.items())[:MAX_ROWS]:
        t.add_row(str(r), *[fmt(x.get(c)) for c in cols])
    return t


def _list(v: list) -> RenderableType:
    if not v:
        return Text("(empty)", style="dim")
    if all(_is_num(x) for x in v):
        nums = [float(x) for x in v]
        return Text(f"n={len(nums)}  min={fmt(min(nums))}  mean={fmt(sum(nums) / len(nums))}  max={fmt(max(nums))}")
    if all(isinstance(x, dict) for x in v):
        cols: list[str] = []
        for x in v:
            cols += [c for c in x if c not in cols and _is_scalar(x[c])]
        return RecordsTable(v, cols)
    lines = [f"• {fmt(x)}" for x in v[:MAX_ROWS]] + ([f"… {len(v) - MAX_ROWS} more"] if len(v) > MAX_ROWS else [])
    return Text("\n".join(lines))


class RecordsTable:
    """A list of records as a table with as many of its columns as fit the width it is drawn at (at least
    COL_MIN cells each, so none collapses); the columns left out are named below it."""

    COL_MIN = 10

    def __init__(self, records: list[dict], cols: list[str]):
        self.records, self.cols = records, cols

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(options.max_width, 20), options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        fit = max(1, (options.max_width + 3) // (self.COL_MIN + 3))
        cols, left_out = self.cols[:fit], self.cols[fit:]
        t = Table(pad_edge=False)
        for c in cols:
            t.add_column(str(c), overflow="fold", min_width=min(self.COL_MIN, max(len(str(c)), 4)))
        for x in self.records[:MAX_ROWS]:
            t.add_row(*[fmt(x.get(c)) for c in cols])
        yield t
        if len(self.records) > MAX_ROWS:
            yield Text(f"… {len(self.records) - MAX_ROWS} more rows", style="dim")
        if left_out:
            yield Text(f"columns left out at this width: {', '.join(left_out)}", style="dim")


def render_section(title: str, v: Any, depth: int = 0, hint: bool = False) -> list[RenderableType]:
    head = Text(title, style="bold underline" if depth == 0 else "bold")
    hint = hint or _hist_like(title.rsplit(".", 1)[-1])
    hist = _histogram(v, hint)
    if hist is not None:
        return [head, bars(hist)]
    if isinstance(v, list):
        return [head, _list(v)]
    matrix = _matrix(v)
    if matrix is not None:
        return [head, matrix]
    if isinstance(v, dict):
        return [head, *render_doc(v, depth + 1, hint)]
    return [head, Text(fmt(v))]


def render_doc(doc: Any, depth: int = 0, hint: bool = False) -> list[RenderableType]:
    if not isinstance(doc, dict):
        return render_section("value", doc, depth)
    scalars, rest = _flatten_scalars(doc, hint=hint)
    out: list[RenderableType] = []
    if scalars:
        out.append(kv_table(scalars))
    for key, v in rest:
        if depth > 3:
            out.append(Text(f"{key}: {fmt(v)}"))
            continue
        out += render_section(key, v, depth, hint)
    return out
