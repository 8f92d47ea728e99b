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


def diagram(state: str, gates: dict[str, dict]) -> Text:
    """`[idle]──▶[round1]──▶…`: passed states green, the current one reversed, the rest dim;
    below, the gate of each transition with its last result (see the module docstring)."""
    current = STATES.index(state) if state in STATES else -1
    top, bottom = Text(), Text()
    for i, s in enumerate(STATES):
        style = "bold reverse" if i == current else ("green" if i < current else "dim")
        box = f" {s} "
        top.append("[", style="dim")
        top.append(box, style=style)
        top.append("]", style="dim")
        bottom.append(" " * (len(box) + 2))
        if i < len(TRANSITIONS):
            gate = TRANSITIONS[i]["gate"]
            mark, mstyle = gate_mark(gates.get(gate))
            top.append("──▶", style="dim")
            bottom.append(mark.center(3), style=mstyle)
    legend = Text("gates in order: ", style="dim")
    for i, t in enumerate(TRANSITIONS):
        legend.append(f"{i + 1}.{t['gate']}", style=gate_mark(gates.get(t["gate"]))[1])
        legend.append("  ")
    return Text("\n").join([top, bottom, legend])


class StateDiagram(Static):
    def show(self, state: str, gates: dict[str, dict]) -> None:
        self.update(diagram(state, gates))
