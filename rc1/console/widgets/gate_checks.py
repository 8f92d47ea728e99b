"""Rendering of gate reports (reports/gates/<gate>.json) and of what blocks the next transition."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from rc1.machine.table import STATES, TRANSITIONS, forward_from


def fmt_value(v) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if v is None:
        return "—"
    s = str(v)
    return s if len(s) <= 40 else s[:39] + "…"


def _evidence_text(result: dict) -> str:
    ev = result.get("evidence") or []
    if not ev:
        return "—"
    first = ev[0]
    more = f" +{len(ev) - 1}" if len(ev) > 1 else ""
    return f"{first.get('path')} {str(first.get('sha256', ''))[:10]}{more}"


def gate_table(name: str, report: dict, only_failing: bool = False) -> Table:
    passed = report.get("passed")
    verdict = Text("PASSED", style="bold green") if passed else Text("REFUSED", style="bold red")
    title = Text.assemble(f"{name} ", f"({report.get('from', '?')} → {report.get('to', '?')}) ", verdict,
                          f"  {report.get('time', '')}", (f"  profile {report['profile']}" if report.get("profile") else ""))
    table = Table(title=title, title_justify="left", expand=True, show_edge=False, pad_edge=False)
    table.add_column("", width=2, no_wrap=True)
    table.add_column("area", no_wrap=True)
    table.add_column("check", ratio=2)
    table.add_column("measured", justify="right", no_wrap=True)
    table.add_column("threshold", no_wrap=True)
    table.add_column("evidence (sha256)", ratio=2, no_wrap=True, overflow="ellipsis")
    for res in report.get("results", []):
        ev = _evidence_text(res)
        for c in res.get("checks", []):
            if only_failing and c.get("passed"):
                continue
            ok = c.get("passed")
            check = Text(c.get("name", "?"))
            if c.get("detail") and not ok:
                check.append(f" — {c['detail']}", style="dim")
            table.add_row(Text("✔", style="green") if ok else Text("✘", style="bold red"), res.get("gate", "?"),
                          check, fmt_value(c.get("measured")), str(c.get("threshold", "")), ev)
    return table


def gates_in_order(gates: dict[str, dict]) -> list[tuple[str, dict]]:
    order = [t["gate"] for t in TRANSITIONS]
    known = [(g, gates[g]) for g in order if g in gates]
    extra = [(g, r) for g, r in sorted(gates.items()) if g not in order]
    return known + extra


def all_gates(gates: dict[str, dict]):
    if not gates:
        return Text("No gate has run yet. Press a to run the next gate.", style="dim")
    return Group(*[gate_table(g, r) for g, r in gates_in_order(gates)])


def blockers(state: str, gates: dict[str, dict]) -> Text:
    """What stands between the current state and the next one."""
    nxt = forward_from(state) if state in STATES else None
    if nxt is None:
        return Text(f"{state}: final state, nothing left to pass.", style="green")
    gate = nxt["gate"]
    out = Text()
    out.append(f"next: {state} → {nxt['dest']} via gate {gate}\n", style="bold")
    report = gates.get(gate)
    if report is None:
        out.append(f"gate {gate}: not run yet — press a to run it", style="yellow")
        return out
    failing = [(r.get("gate", "?"), c) for r in report.get("results", []) for c in r.get("checks", []) if not c.get("passed")]
    if not failing:
        if not report.get("results"):
            out.append(f"gate {gate} returned no checks (refused)", style="red")
        else:
            out.append(f"gate {gate} passed its last run ({report.get('time', '')}); press a to advance", style="green")
        return out
    out.append(f"{len(failing)} failing check(s) of {gate} ({report.get('time', '')}):\n", style="red")
    for area, c in failing:
        out.append("✘ ", style="bold red")
        out.append(f"{area}/{c.get('name')}: {fmt_value(c.get('measured'))} (threshold {c.get('threshold')})")
        if c.get("detail"):
            out.append(f" {c['detail']}", style="dim")
        out.append("\n")
    out.rstrip()
    return out
