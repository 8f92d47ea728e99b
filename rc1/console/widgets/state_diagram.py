"""The gated state machine as a one-line diagram (from rc1.machine.table), current state highlighted."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from rc1.machine.table import STATES, TRANSITIONS


def diagram(state: str, gates: dict[str, dict]) -> Text:
    """`[idle]──▶[round1]──▶…`: passed states green, the current one reversed, the rest dim;
    below, the gate of each transition with its last result (✔ passed, ✘ refused, · not run)."""
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
            report = gates.get(gate)
            mark, mstyle = ("·", "dim") if report is None else (("✔", "green") if report.get("passed") else ("✘", "red"))
            top.append("──▶", style="dim")
            bottom.append(mark.center(3), style=mstyle)
    legend = Text("gates in order: ", style="dim")
    for i, t in enumerate(TRANSITIONS):
        report = gates.get(t["gate"])
        style = "dim" if report is None else ("green" if report.get("passed") else "red")
        legend.append(f"{i + 1}.{t['gate']}", style=style)
        legend.append("  ")
    return Text("\n").join([top, bottom, legend])


class StateDiagram(Static):
    def show(self, state: str, gates: dict[str, dict]) -> None:
        self.update(diagram(state, gates))
