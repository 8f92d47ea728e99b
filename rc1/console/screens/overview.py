"""Overview: the state machine, every gate's checks, what blocks the next transition, audit, ops."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Static

from rc1.console.screens.base import WorkspaceScreen
from rc1.console.view import WorkspaceView
from rc1.console.widgets.gate_checks import all_gates, blockers
from rc1.console.widgets.state_diagram import StateDiagram
from rc1.runtime.fmt import shown

CACHE_ALERT = 0.95


def ops_text(view: WorkspaceView) -> Text:
    ops = view.ops
    out = Text()
    if not view.present.get("judge_stats"):
        out.append("judge: not produced yet (reports/judge_stats.json)\n", style="dim")
    else:
        rate = ops.get("judge_cache_hit_rate")
        out.append("judge cache hit rate: ")
        alert = isinstance(rate, (int, float)) and rate >= CACHE_ALERT
        out.append(shown(rate), style="bold red" if alert else "")
        out.append(f"  ⚠ ≥ {CACHE_ALERT}: scores are mostly cached, not live\n" if alert else "\n", style="red")
        out.append(f"judge 429 rate: {shown(ops.get('judge_429_rate'))}\n")
        out.append(f"judge latency avg (s): {shown(ops.get('judge_latency_avg_s'))}\n")
    if view.checkpoints_unavailable:
        out.append(f"checkpoints: {view.checkpoints_unavailable}\n", style="dim")
    elif not ops.get("checkpoints_written"):
        out.append("checkpoints: none written yet\n", style="dim")
    else:
        v, w = ops.get("checkpoints_verified", 0), ops.get("checkpoints_written", 0)
        out.append(f"checkpoints verified/written: {v}/{w}\n", style="" if v == w else "yellow")
    fp = ops.get("fingerprints") or {}
    if not view.present.get("artifacts"):
        out.append("fingerprints: not produced yet (reports/rc1/artifacts.jsonl)", style="dim")
    else:
        cov = fp.get("coverage")
        out.append(f"fingerprint coverage: {fp.get('with_sha256', 0)}/{fp.get('artifacts', 0)} artifacts"
                   + (f" ({cov:.0%})" if isinstance(cov, float) else ""),
                   style="" if cov == 1.0 else "yellow")
    return out


def audit_table(entries: list[dict]) -> Table | Text:
    """Latest transitions first: the time never wraps, the move (and its gate) wraps under it when narrow."""
    if not entries:
        return Text("no transitions yet (reports/state/audit.jsonl)", style="dim")
    t = Table(box=None, pad_edge=False, expand=True, show_header=True)
    t.add_column("time", width=11, no_wrap=True)
    t.add_column("move (gate)", min_width=12, overflow="fold")
    for e in reversed(entries):
        ok = e.get("passed")
        move = Text(f"{e.get('from')}→{e.get('to')}", style="green" if ok else "red")
        gate = e.get("gate") or e.get("trigger")
        if gate:
            move.append(f" ({gate})", style="dim")
        when = str(e.get("time", ""))[5:16].replace("T", " ")
        t.add_row(when, move)
    return t


class OverviewScreen(WorkspaceScreen):
    BORDER_TITLES = {"#blockers": "blocks the next transition", "#ops": "operations", "#audit": "audit (latest first)"}

    def body(self) -> ComposeResult:
        yield StateDiagram(id="diagram")
        with Horizontal(id="overview-body"):
            with VerticalScroll(id="gates") as gates:
                gates.border_title = "gate checks (reports/gates)"
                yield Static(id="gates-body")
            with Vertical(id="side"):
                yield Static(id="blockers")
                yield Static(id="ops")
                yield Static(id="audit")

    def show_view(self, view: WorkspaceView | None) -> None:
        if view is None:
            self.query_one("#gates-body", Static).update(Text("loading…", style="dim"))
            return
        self.sub_title = f"overview · state {view.state}"
        self.query_one(StateDiagram).show(view.state, view.gates)
        self.query_one("#gates-body", Static).update(all_gates(view.gates))
        self.query_one("#blockers", Static).update(blockers(view.state, view.gates))
        self.query_one("#ops", Static).update(ops_text(view))
        self.query_one("#audit", Static).update(audit_table(view.audit))
