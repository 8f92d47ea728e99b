"""Running the pipeline from the console: the real Pipeline.run_stage over stages that are small scripts
(tests/helpers/console.py), so the next-stage / all-stages walk, the clean cancel (SIGINT, then a resume),
a refused gate and a failing stage are each what the operator would see."""

from __future__ import annotations

import json
import threading
import time

import pytest
from tests.helpers.console import (TRAIN_STEP_S_ENV, FakeTrainerStatus, PipelineBackend, route_scripts,
                                   scripted_pipeline)

from rc1.console.app import make_app
from rc1.console.pipeline_run import CANCELLED, COMPLETE, DONE, FATAL, NOTHING, REFUSED, run_pipeline
from rc1.runtime import layout

PLAN = [("data: a", "ok"), ("data: b", "ok"), ("train", "train")]


@pytest.fixture
def scripted(console_ws, monkeypatch):
    route_scripts(monkeypatch)
    return console_ws


def _run(pipe, all_stages: bool, cancelled=lambda: False):
    seen = []
    return run_pipeline(pipe, all_stages=all_stages, cancelled=cancelled, report=seen.append), seen


def test_next_stage_then_the_rest_then_nothing(scripted):
    ws = scripted
    out, seen = _run(scripted_pipeline(ws, PLAN[:2]), all_stages=False)
    assert out.kind == DONE and out.ran == ("data: a",) and "next: data: b" in out.lines
    assert [(p.stage, p.index, p.total) for p in seen] == [("data: a", 1, 2)]
    out, seen = _run(scripted_pipeline(ws, PLAN[:2]), all_stages=True)
    assert out.kind == COMPLETE and out.ran == ("data: b",) and seen[0].skipped == ("data: a",)
    out, _ = _run(scripted_pipeline(ws, PLAN[:2]), all_stages=True)
    assert out.kind == NOTHING and out.ok
    timings = json.loads(ws.path(layout.PIPELINE_TIMINGS).read_text())
    assert set(timings) >= {"data: a", "data: b"}  # what the next run's ETA reads
    log = ws.path("logs/pipeline.log").read_text()
    assert "data: a: rc1 __script__ ok" in log and "working" in log


def test_cancel_stops_the_stage_cleanly_and_the_next_run_resumes(scripted, monkeypatch):
    ws = scripted
    cancel = threading.Event()
    steps = []

    def report(p):
        if p.completed is not None:
            steps.append(p.completed)
            if p.completed >= 20:
                cancel.set()

    pipe = scripted_pipeline(ws, PLAN)
    out = run_pipeline(pipe, all_stages=True, cancelled=cancel.is_set, report=report)
    assert out.kind == CANCELLED and out.stage == "train" and "resume" in out.lines[0]
    log = ws.path("logs/pipeline.log").read_text()
    assert "stopped cleanly at step" in log  # the child got SIGINT and exited by itself, not killed
    stopped_at = int(log.split("stopped cleanly at step ")[1].split()[0])
    assert 20 <= stopped_at < 1000 and steps and max(steps) <= stopped_at
    assert "--- stage stopped (exit 130)" in log
    monkeypatch.setenv(TRAIN_STEP_S_ENV, "0.001")  # nothing cancels the resumed run: it need not wait 20 s to finish
    out, seen = _run(scripted_pipeline(ws, PLAN), all_stages=True)
    assert out.kind == COMPLETE and out.ran == ("train",)
    assert f"resuming from step {stopped_at}" in ws.path("logs/pipeline.log").read_text()
    assert seen[0].skipped == ("data: a", "data: b")


def test_a_refused_gate_names_the_check_its_value_threshold_and_fix(scripted):
    from rc1.gates.base import Check, GateResult
    from rc1.machine.service import advance, open_machine

    ws = scripted
    fix = "96 episodes of 24 prompts; fix: easier items (pool.difficulty_target) or a stronger model.base"
    advance(ws, "round2_pass", machine=open_machine(ws, gate_runner=lambda gate: [
        GateResult("learning_signal", [Check.at_least("pass@4", 0.083, 0.1, fix),
                                       Check.at_least("prompts measured", 24, 16)], [])]))
    out, _ = _run(scripted_pipeline(ws, [("gate: round2", "refuse")]), all_stages=True)
    assert out.kind == REFUSED and out.gate == "round2" and not out.ok
    assert out.lines[0] == "state stays round1: gate round2 refused"
    assert "✘ learning_signal/pass@4: measured 0.083, threshold >= 0.1" in out.lines
    assert "   fix: easier items (pool.difficulty_target) or a stronger model.base" in out.lines
    assert not any("prompts measured" in line for line in out.lines)  # passing checks are not listed


def test_a_failing_stage_is_fatal_with_its_fail_pack(scripted):
    out, _ = _run(scripted_pipeline(scripted, [("data: a", "crash")]), all_stages=True)
    assert out.kind == FATAL and out.title == "FATAL: data: a failed (exit 1)"
    assert out.failpack and scripted.path(out.failpack).is_file()
    assert "RuntimeError: disk on fire" in out.lines and any("press f" in line for line in out.lines)



@pytest.fixture
def anyio_backend():
    return "asyncio"


async def _wait(pilot, cond, what: str, timeout: float = 90.0) -> None:  # child processes: slow on a loaded 2-core CI
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.05)


@pytest.mark.anyio
async def test_console_runs_the_next_stage_all_stages_and_cancels(scripted):
    from rc1.console.screens.modals import ConfirmScreen, ResultScreen
    from rc1.console.screens.pipeline import PipelineScreen

    backend = PipelineBackend(scripted, PLAN, trainer=FakeTrainerStatus(pid=None, alive=False))
    app = make_app(backend=backend, poll_interval=0.05, watch_interval=0.1)
    async with app.run_test(size=(120, 40)) as pilot:
        await _wait(pilot, lambda: app.view is not None and app.trainer is not None, "first load")
        await pilot.press("5")
        await _wait(pilot, lambda: isinstance(app.screen, PipelineScreen) and app.pipeline_stages, "stage list")
        assert app.pipeline_stages == [("data: a", False), ("data: b", False), ("train", False)]
        assert app.disabled_reason("cancel_run") == "no pipeline run in progress"
        await pilot.press("p")
        await _wait(pilot, lambda: app.run_outcome is not None, "next stage")
        assert app.run_outcome.kind == DONE and app.run_outcome.ran == ("data: a",)
        await _wait(pilot, lambda: app.pipeline_stages[0] == ("data: a", True), "stage list refreshed")
        await pilot.press("P")
        await _wait(pilot, lambda: app.run_progress is not None and app.run_progress.stage == "train"
                    and (app.run_progress.completed or 0) >= 5, "training stage under way")
        assert app.check_action("run_next", ()) is None and app.check_action("cancel_run", ()) is True
        assert app.disabled_reason("run_all") == "a pipeline run is in progress (c cancels it)"
        assert app.disabled_reason("stop").startswith("the pipeline run owns the trainer")
        assert "step" in str(app.screen.query_one("#run-text").content)
        await pilot.press("c")
        await _wait(pilot, lambda: app.run_outcome is not None and not app.pipeline_running(), "cancelled")
        assert app.run_outcome.kind == CANCELLED and app.run_outcome.ran == ("data: b",)
        await _wait(pilot, lambda: any("stopped cleanly" in line for line in app.pipeline_log), "log tail")
        # a failing stage: FATAL in a modal, and f offered
        backend.plan = [("data: c", "crash")]
        await pilot.press("p")
        await _wait(pilot, lambda: isinstance(app.screen, ResultScreen), "FATAL modal")
        assert app.screen.title_text == "FATAL: data: c failed (exit 1)"
        assert "f: failpack" in str(app.activity)
        await pilot.press("escape")
        # quitting during a run asks first
        backend.plan = PLAN
        await pilot.press("P")
        await _wait(pilot, lambda: app.run_progress is not None and app.run_progress.stage == "train", "running")
        await pilot.press("q")
        await _wait(pilot, lambda: isinstance(app.screen, ConfirmScreen), "quit confirmation")
        await pilot.press("n")
        await pilot.press("c")
        await _wait(pilot, lambda: not app.pipeline_running(), "cancelled again")
        assert ("stop_judge",) not in backend.calls
        await pilot.press("q")  # runs were started here: the judge they may have started is stopped, as rc1 pipeline does
        await _wait(pilot, lambda: ("stop_judge",) in backend.calls, "judge stopped on quit")


@pytest.mark.anyio
async def test_run_all_from_the_overview_lists_the_stages_as_it_goes(scripted):
    """P pressed on the Overview, before the Pipeline screen ever listed the stages: the Pipeline screen shows
    every stage, the ones behind the run marked done, rather than "checking which stages are done"."""
    from rc1.console.screens.pipeline import PipelineScreen

    backend = PipelineBackend(scripted, PLAN, trainer=FakeTrainerStatus(pid=None, alive=False))
    app = make_app(backend=backend, poll_interval=0.05, watch_interval=0.1)
    async with app.run_test(size=(80, 24)) as pilot:
        await _wait(pilot, lambda: app.view is not None and app.trainer is not None, "first load")
        assert app.pipeline_stages is None
        await pilot.press("P")
        await _wait(pilot, lambda: app.run_progress is not None and app.run_progress.stage == "train", "training stage")
        await pilot.press("5")
        await _wait(pilot, lambda: isinstance(app.screen, PipelineScreen), "pipeline screen")
        assert app.pipeline_stages == [("data: a", True), ("data: b", True), ("train", False)]
        stages = app.screen.query_one("#stages").render()
        assert "checking" not in str(stages)
        await pilot.press("c")
        await _wait(pilot, lambda: not app.pipeline_running(), "cancelled")


def test_a_stage_is_cancellable_even_when_the_pipeline_ignores_sigint(scripted):
    """A pipeline started with SIGINT ignored (a background job of a non-interactive shell) still stops its
    stage cleanly: the child gets SIGINT's default back."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        cancel = threading.Event()

        def report(p):
            if p.completed is not None and p.completed >= 20:
                cancel.set()

        out = run_pipeline(scripted_pipeline(scripted, PLAN), all_stages=True, cancelled=cancel.is_set, report=report)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert out.kind == CANCELLED and "stopped cleanly at step" in scripted.path("logs/pipeline.log").read_text()


@pytest.mark.anyio
async def test_a_worker_that_ends_while_the_app_closes_does_not_crash_it(scripted):
    """The CI failure of a pipeline cancelled just before the test's app closed: the worker's state change
    arrived with no screen left on the stack, and refreshing the key bindings raised ScreenStackError."""
    backend = PipelineBackend(scripted, PLAN, trainer=FakeTrainerStatus(pid=None, alive=False))
    app = make_app(backend=backend, poll_interval=0.05, watch_interval=0.1)
    async with app.run_test(size=(80, 24)) as pilot:
        await _wait(pilot, lambda: app.view is not None, "first load")
    assert not app.screen_stack
    app.refresh_bindings()  # what on_worker_state_changed does for a pipeline worker that ended
