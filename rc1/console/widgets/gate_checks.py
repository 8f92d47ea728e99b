"""Rendering of gate reports (reports/gates/<gate>.json) and of what blocks the next transition.

A check shows its status, never just pass/fail: ✔ pass, ✘ fail, ? not measurable (red when the
profile blocks on it, yellow when it only warns: the laptop profile), – not applicable (never blocks)."""

from __future__ import annotations

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from rc1.runtime.fmt import shown
from rc1.state.table import STATES, TRANSITIONS, forward_from


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


def gate_table(name: str, report: dict, only_failing: bool = False) -> "GateTable":
    return GateTable(name, report, only_failing)


class GateTable:
    """One gate's checks as a table laid out for the width it is drawn at: the status glyph and the check
    name always show; the detail wraps under the name, long values are cut with …, and the evidence
    column (then the area column, folded into the name) is left out where it does not fit."""

    CHECK_MIN = 18   # narrowest check column (names wrap inside it, never vanish)
    EVIDENCE_AT = 130  # widths from which the evidence column is shown

    def __init__(self, name: str, report: dict, only_failing: bool = False):
        self.name, self.report, self.only_failing = name, report, only_failing

    def rows(self) -> list[tuple[Text, str, Text, str, str, str]]:
        out = []
        for res in self.report.get("results", []):
            ev = _evidence_text(res)
            for c in res.get("checks", []):
                st = check_status(c)
                if self.only_failing and not blocks(res, c) and st != "not measurable":
                    continue
                check = Text(c.get("name", "?"), style="bold" if blocks(res, c) else "")
                if st != "pass" and st != "fail":
                    check.append(f" [{st}]", style="yellow" if st == "not measurable" else "dim")
                if c.get("detail") and st != "pass":
                    check.append(f" — {c['detail']}", style="dim")
                out.append((mark(res, c), res.get("gate", "?"), check, shown(c.get("measured")),
                            str(c.get("threshold", "")), ev))
        return out

    def title(self) -> Text:
        report = self.report
        verdict = Text("PASSED", style="bold green") if report.get("passed") else Text("REFUSED", style="bold red")
        warned = warnings(report)
        if warned:
            verdict.append(f" ({len(warned)} not measurable: warned, this profile lets it through)", style="yellow")
        return Text.assemble(f"{self.name} ", f"({report.get('from', '?')} → {report.get('to', '?')}) ", verdict,
                             f"  {report.get('time', '')}",
                             (f"  profile {report['profile']}" if report.get("profile") else ""))

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(options.max_width, 40), options.max_width)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        rows = self.rows()
        longest = lambda i, cap: min(cap, max((len(r[i]) for r in rows), default=1))  # noqa: E731
        measured_w = max(len("measured"), longest(3, 12))
        threshold_w = max(len("threshold"), longest(4, 16))
        area_w = max(len("area"), longest(1, 16))
        evidence_w = max(len("evidence"), longest(5, 44))
        gap = 3  # cell padding on both sides and the divider between columns
        spare = width - (1 + measured_w + threshold_w + 3 * gap) - self.CHECK_MIN
        if spare < 0:  # very narrow: the value columns give way (cut with …) before the check name does
            measured_w = max(6, measured_w + spare // 2)
            threshold_w = max(6, threshold_w + spare - spare // 2)
        fixed = 1 + measured_w + threshold_w + 3 * gap
        show_evidence = width >= self.EVIDENCE_AT and width - fixed - area_w - evidence_w - 2 * gap >= 30
        show_area = width - fixed - area_w - gap - (evidence_w + gap if show_evidence else 0) >= self.CHECK_MIN + 6
        check_w = width - fixed - (area_w + gap if show_area else 0) - (evidence_w + gap if show_evidence else 0)
        check_w = max(8, check_w)  # below CHECK_MIN only where the value columns are already at their narrowest
        table = Table(title=self.title(), title_justify="left", show_edge=False, pad_edge=False, box=box.SIMPLE_HEAD,
                      collapse_padding=False)
        table.add_column("", width=1, no_wrap=True)
        if show_area:
            table.add_column("area", width=area_w, no_wrap=True, overflow="ellipsis")
        table.add_column("check", width=check_w, overflow="fold")
        table.add_column("measured", width=measured_w, justify="right", no_wrap=True, overflow="ellipsis")
        table.add_column("threshold", width=threshold_w, no_wrap=True, overflow="ellipsis")
        if show_evidence:
            table.add_column("evidence (sha256)", width=evidence_w, no_wrap=True, overflow="ellipsis")
        for glyph, area, check, measured, threshold, ev in rows:
            if not show_area:
                check = Text.assemble((f"{area}/", "dim"), check)
            cells = [glyph, *([area] if show_area else []), check, measured, threshold, *([ev] if show_evidence else [])]
            table.add_row(*cells)
        yield table


def gates_in_order(gates: dict[str, dict]) -> list[tuple[str, dict]]:
    order = [t["gate"] for t in TRANSITIONS]
    known = [(g, gates[g]) for g in order if g in gates]
    extra = [(g, r) for g, r in sorted(gates.items()) if g not in order]
    return known + extra


def all_gates(gates: dict[str, dict]):
    if not gates:
        return Text("No gate has run yet. P runs the pipeline (data, scorer, then the gates); a runs the next gate alone.",
                    style="dim")
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
        out.append(f"gate {gate}: not run yet — P runs the pipeline's stages up to it and past it, a runs the gate "
                   "alone", style="yellow")
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
        out.append(f"{area}/{c.get('name')}: {shown(c.get('measured'))} (threshold {c.get('threshold')})")
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
