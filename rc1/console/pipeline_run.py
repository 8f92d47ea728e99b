"""The console's run of the pipeline: the stages of `rc1 pipeline` (rc1.pipeline.Pipeline), run the same way.

`run_pipeline` walks `Pipeline.stages()` as `rc1 pipeline` does: a stage whose `done()` holds is skipped,
the others run through `Pipeline.run_stage` (the stage's `rc1` command as a child process, its output in
logs/pipeline.log), and the timings are saved after each. It stops after the first stage it ran (`all_stages
False`: "run the next stage") or at the end. Cancelling is Ctrl-C for the pipeline: the child gets SIGINT
and is given time to stop cleanly (`Pipeline._stop_child`), so the next run resumes where this one stopped.

No UI here: progress goes to a callback and the result is a `RunOutcome` the console shows.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Callable

from rc1.runtime import layout
from rc1.runtime.errors import Rc1Error

DONE, COMPLETE, CANCELLED, REFUSED, FATAL, NOTHING = "done", "complete", "cancelled", "refused", "fatal", "nothing"
GATE_REFUSED_EXIT = 3  # `rc1 advance` exit code when a gate refuses (rc1.cli: 2 config, 3 refused, 1 crash)


@dataclass(frozen=True)
class StageProgress:
    """Where a run stands: the stage running, its place among the stages, and what is known of its progress."""

    stage: str
    index: int                      # 1-based position among all stages
    total: int
    started: float                  # time.monotonic() when the stage started
    completed: int | None = None    # steps done (training), when the stage reports them
    steps: int | None = None
    expected_s: float | None = None  # the stage's duration in the last run that finished it
    remaining_after_s: float | None = None  # previous durations of the stages after this one that still have to run
    skipped: tuple[str, ...] = ()   # stages skipped so far (done, evidence unchanged)
    names: tuple[str, ...] = ()     # every stage of the run, in order (the stage list when none was listed yet)

    def eta_s(self, now: float) -> float | None:
        """Seconds left in this stage: from the step rate when steps are known, else from its last duration."""
        elapsed = now - self.started
        if self.completed and self.steps:
            return max(0.0, elapsed / self.completed * (self.steps - self.completed))
        if self.expected_s is not None:
            return max(0.0, self.expected_s - elapsed)
        return None

    def fraction(self, now: float) -> float | None:
        if self.completed is not None and self.steps:
            return min(1.0, self.completed / self.steps)
        if self.expected_s:
            return min(0.99, (now - self.started) / self.expected_s)
        return None


@dataclass(frozen=True)
class RunOutcome:
    kind: str                       # DONE (next stage ran), COMPLETE, CANCELLED, REFUSED, FATAL, NOTHING (all done)
    stage: str | None
    title: str
    lines: list[str] = field(default_factory=list)
    ran: tuple[str, ...] = ()
    failpack: str | None = None
    gate: str | None = None         # the refusing gate (REFUSED)
    exit_code: int | None = None

    @property
    def ok(self) -> bool:
        return self.kind in (DONE, COMPLETE, NOTHING)


def previous_timings(ws) -> dict[str, float]:
    """Stage durations saved by earlier runs (reports/rc1/pipeline_timings.json), for the ETA."""
    try:
        doc = json.loads(ws.path(layout.PIPELINE_TIMINGS).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return {k: float(v) for k, v in doc.items() if isinstance(v, (int, float))} if isinstance(doc, dict) else {}


class _ProgressSink:
    """What `Pipeline.run_stage` reports training steps to (the interface of a rich Progress it uses)."""

    def __init__(self, base: StageProgress, report: Callable[[StageProgress], None]):
        self.base, self.report, self.last = base, report, None

    def update(self, task, completed: int | None = None, total: int | None = None) -> None:
        if (completed, total) != self.last:
            self.last = (completed, total)
            from dataclasses import replace

            self.report(replace(self.base, completed=completed, steps=total))


def run_pipeline(pipe, *, all_stages: bool, cancelled: Callable[[], bool],
                 report: Callable[[StageProgress], None]) -> RunOutcome:
    """Run the next stage that is not done (or all of them); see the module docstring."""
    from rc1.pipeline import StageFailed

    pipe.warm_stages = all_stages  # one stage: a warm process's imports would only compete with it
    stages = pipe.stages()
    timings = previous_timings(pipe.ws)
    skipped: list[str] = []
    ran: list[str] = []
    for i, stage in enumerate(stages):
        if cancelled():
            return RunOutcome(CANCELLED, None, "pipeline cancelled", ["cancelled before the next stage started"],
                              tuple(ran))
        if stage.done():
            skipped.append(stage.name)
            continue
        later = [timings.get(s.name) for s in stages[i + 1:]]
        base = StageProgress(stage.name, i + 1, len(stages), time.monotonic(), expected_s=timings.get(stage.name),
                             remaining_after_s=sum(t for t in later if t is not None) if all_stages else 0.0,
                             skipped=tuple(skipped), names=tuple(s.name for s in stages))
        report(base)
        try:
            pipe.run_stage(stage, _ProgressSink(base, report), None, cancelled=cancelled)
        except KeyboardInterrupt:
            return RunOutcome(CANCELLED, stage.name, f"{stage.name}: cancelled",
                              [f"{stage.name} stopped cleanly (SIGINT); run again to resume where it stopped"],
                              tuple(ran))
        except StageFailed as exc:
            return _failed(pipe, stage, exc, tuple(ran))
        pipe.save_timings()
        ran.append(stage.name)
        if not all_stages:
            return RunOutcome(DONE, stage.name, f"{stage.name}: done ({pipe.timings[stage.name]:.0f} s)",
                              [f"{stage.name} finished in {pipe.timings[stage.name]:.1f} s",
                               *([f"next: {_next_name(stages, i)}"] if _next_name(stages, i) else [])], tuple(ran))
    if not ran:
        return RunOutcome(NOTHING, None, "pipeline: nothing to run", ["every stage is done with unchanged evidence"])
    pipe.timings.setdefault("report", 0.0)
    return RunOutcome(COMPLETE, ran[-1], "pipeline complete",
                      [f"ran {len(ran)} stage(s); report: reports/rc1/rc1_report.md"], tuple(ran))


def _next_name(stages, i: int) -> str | None:
    return stages[i + 1].name if i + 1 < len(stages) else None


def _failed(pipe, stage, exc, ran: tuple[str, ...]) -> RunOutcome:
    if exc.exit_code == GATE_REFUSED_EXIT:
        gate, lines = refused_gate_lines(pipe.ws)
        return RunOutcome(REFUSED, stage.name, f"gate {gate or '?'} refused", lines, ran, gate=gate, exit_code=3)
    failpack = exc.message.split("FAIL pack: ", 1)[1] if "FAIL pack: " in exc.message else None
    lines = [f"FATAL: {exc.message}", *([f"FAIL pack: {failpack}"] if failpack else []),
             "press f to make another FAIL pack; the last lines of the stage:", *exc.lines[-15:]]
    return RunOutcome(FATAL, stage.name, f"FATAL: {stage.name} failed (exit {exc.exit_code})", lines, ran,
                      failpack=failpack, exit_code=exc.exit_code)


def refused_gate_lines(ws) -> tuple[str | None, list[str]]:
    """(gate, lines) for the gate that holds the machine: each blocking check with its measured value against
    its threshold, and the fix its detail names (else where to look)."""
    from rc1.machine.service import current_state, last_gate_reports
    from rc1.state.table import forward_from

    try:
        state = current_state(ws)
        nxt = forward_from(state)
        reports = last_gate_reports(ws)
    except Rc1Error as exc:
        return None, [exc.message]
    if nxt is None:
        return None, [f"state {state} is final"]
    gate = nxt["gate"]
    report = reports.get(gate)
    if report is None:
        return gate, [f"state stays {state}; gate {gate} wrote no report"]
    from rc1.console.widgets.gate_checks import blocks, check_status
    from rc1.runtime.fmt import shown

    lines = [f"state stays {state}: gate {gate} refused"]
    for res in report.get("results", []):
        for c in res.get("checks", []):
            if not blocks(res, c):
                continue
            st = check_status(c)
            lines.append(f"✘ {res.get('gate', '?')}/{c.get('name')}: measured {shown(c.get('measured'))}, "
                         f"threshold {c.get('threshold')}" + ("" if st == "fail" else f" [{st}]"))
            detail = str(c.get("detail") or "")
            if "fix:" in detail:
                lines.append(f"   fix: {detail.split('fix:', 1)[1].strip()}")
            elif detail:
                lines.append(f"   {detail}")
        for note in res.get("notes") or []:
            lines.append(f"   note: {note}")
    lines.append(f"the full report: reports/gates/{gate}.json (Overview, key 1)")
    return gate, lines
