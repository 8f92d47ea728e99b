"""Rendering of gate reports (reports/gates/<gate>.json) and of what blocks the next transition.

A check shows its status, never just pass/fail: ✔ pass, ✘ fail, ? not measurable (red when the
profile blocks on it, yellow when it only warns: the laptop profile), – not applicable (never blocks)."""

from __future__ import annotations

from rich.console import Group
from rich.table import Table
from rich.text import Text

from rc1.state.table import STATES, TRANSITIONS, forward_from


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


def check_status(c: dict) -> str:
    """A saved check's status (reports written before statuses existed: from `passed`)."""
    return c.get("status") or ("pass" if c.get("passed") else "fail")


def blocks(result: dict, c: dict) -> bool:
    """Does this check hold the gate back under its result's `not_measurable` policy?"""
    st = check_status(c)
    return st == "fail" or (st == "not measurable" and result.get("not_measurable", "block") == "block")


def mark(result: dict, c: dict) -> Text:
    st = check_status(c)
    if st == "pass":
        return Text("✔", style="green")
    if st == "not applicable":
        return Text("–", style="dim")
    if st == "not measurable":
        return Text("?", style="bold red" if blocks(result, c) else "bold yellow")
    return Text("✘", style="bold red")


def warnings(report: dict) -> list[tuple[str, dict]]:
    """(area, check) of every not-measurable check the profile let through."""
    return [(r.get("gate", "?"), c) for r in report.get("results", []) for c in r.get("checks", [])
            if check_status(c) == "not measurable" and not blocks(r, c)]


def gate_table(name: str, report: dict, only_failing: bool = False) -> Table:
    passed = report.get("passed")
    verdict = Text("PASSED", style="bold green") if passed else Text("REFUSED", style="bold red")
    warned = warnings(report)
    if warned:
        verdict.append(f" ({len(warned)} not measurable: warned, this profile lets it through)", style="yellow")
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
            st = check_status(c)
            if only_failing and not blocks(res, c) and st != "not measurable":
                continue
            check = Text(c.get("name", "?"))
            if st != "pass" and st != "fail":
                check.append(f" [{st}]", style="yellow" if st == "not measurable" else "dim")
            if c.get("detail") and st != "pass":
                check.append(f" — {c['detail']}", style="dim")
            table.add_row(mark(res, c), res.get("gate", "?"), check, fmt_value(c.get("measured")),
                          str(c.get("threshold", "")), ev)
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
    failing = [(r.get("gate", "?"), c) for r in report.get("results", []) for c in r.get("checks", []) if blocks(r, c)]
    warned = warnings(report)
    if not failing:
        if not report.get("results"):
            out.append(f"gate {gate} returned no checks (refused)", style="red")
        else:
            out.append(f"gate {gate} passed its last run ({report.get('time', '')}); press a to advance", style="green")
        _append_warnings(out, warned)
        return out
    out.append(f"{len(failing)} failing check(s) of {gate} ({report.get('time', '')}):\n", style="red")
    for area, c in failing:
        st = check_status(c)
        out.append("✘ " if st == "fail" else "? ", style="bold red")
        out.append(f"{area}/{c.get('name')}: {fmt_value(c.get('measured'))} (threshold {c.get('threshold')})")
        if st != "fail":
            out.append(f" [{st}: this profile blocks on it]", style="red")
        if c.get("detail"):
            out.append(f" {c['detail']}", style="dim")
        out.append("\n")
    _append_warnings(out, warned)
    out.rstrip()
    return out


def _append_warnings(out: Text, warned: list[tuple[str, dict]]) -> None:
    for area, c in warned:
        out.append("\n? ", style="bold yellow")
        out.append(f"{area}/{c.get('name')}: not measurable, warned (this profile lets it through; production "
                   f"blocks)", style="yellow")
        if c.get("detail"):
            out.append(f" {c['detail']}", style="dim")
