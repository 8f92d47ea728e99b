"""The gated state machine as a one-line diagram (from rc1.state.table), current state highlighted.

Under each transition, its gate's last result: ✔ passed, ! passed with not-measurable checks the
profile only warns about (laptop), ✘ refused, · not run."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from rc1.console.widgets.gate_checks import warnings
from rc1.state.table import STATES, TRANSITIONS


def gate_mark(report: dict | None) -> tuple[str, str]:
    """(mark, style) of a gate's last result."""
    if report is None:
        return "·", "dim"
    if not report.get("passed"):
        return "✘", "red"
    return ("!", "yellow") if warnings(report) else ("✔", "green")


def diagram(state: str, gates: dict[str, dict], width: int = 200) -> Text:
    """`[idle]──▶[round1]──▶…`: passed states green, the current one reversed, the rest dim;
    below, the gate of each transition with its last result (see the module docstring). Narrower than
    the full drawing, the boxes and arrows shrink (`idle→round1→…`) so it stays on one line."""
    current = STATES.index(state) if state in STATES else -1
    full = sum(len(s) + 4 for s in STATES) + 3 * len(TRANSITIONS)
    compact = width < full
    arrow, left, right, pad = ("→", "", "", " ") if compact else ("──▶", "[", "]", " ")
    top, bottom = Text(), Text()
    for i, s in enumerate(STATES):
        style = "bold reverse" if i == current else ("green" if i < current else "dim")
        box = f"{pad}{s}{pad}" if not compact else (f" {s} " if i == current else s)
        top.append(left, style="dim")
        top.append(box, style=style)
        top.append(right, style="dim")
        bottom.append(" " * (len(box) + len(left) + len(right)))
        if i < len(TRANSITIONS):
            gate = TRANSITIONS[i]["gate"]
            mark, mstyle = gate_mark(gates.get(gate))
            top.append(arrow, style="dim")
            bottom.append(mark.center(len(arrow)), style=mstyle)
    legend = Text("gates in order: ", style="dim")
    for i, t in enumerate(TRANSITIONS):
        legend.append(f"{i + 1}.{t['gate']}", style=gate_mark(gates.get(t["gate"]))[1])
        legend.append("  ")
    for line in (top, bottom):
        line.no_wrap, line.overflow = True, "ellipsis"
    return Text("\n").join([top, bottom, legend])


class _Diagram:
    """The diagram drawn for the width it gets."""

    def __init__(self, state: str, gates: dict[str, dict]):
        self.state, self.gates = state, gates

    def __rich_console__(self, console, options):
        yield diagram(self.state, self.gates, options.max_width)


class StateDiagram(Static):
    def show(self, state: str, gates: dict[str, dict]) -> None:
        self.update(_Diagram(state, gates))
