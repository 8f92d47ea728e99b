"""Snapshots of every screen at 80x24, 120x40 and 160x50 on the deterministic fixture workspace (fixed clock,
key, data), so a table whose columns collapse or a plot that loses its axis at some width shows up as a diff.

Regenerate after an intended UI change: pytest tests/console --snapshot-update
"""

from __future__ import annotations

import time

import pytest
from tests.helpers.console import FakeTrainerStatus, PipelineBackend, RecordingBackend, write_plotted_reports

from rc1.console.app import make_app
from rc1.console.metrics_feed import PLOTS

SIZES = [(80, 24), (120, 40), (160, 50)]
SIZE_IDS = [f"{w}x{h}" for w, h in SIZES]
sizes = pytest.mark.parametrize("size", SIZES, ids=SIZE_IDS)


def settled(*, extra=None):
    """run_before: wait until the first loads are shown so the picture is stable."""

    async def run_before(pilot) -> None:
        app = pilot.app
        await wait(pilot, lambda: app.view is not None and app.trainer is not None and app.metrics is not None)
        if extra is not None:
            await extra(pilot)
        await pilot.pause(0.3)

    return run_before


async def wait(pilot, cond, timeout: float = 15) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "console did not settle"
        await pilot.pause(0.05)


def app_for(ws, **kw):
    return make_app(backend=RecordingBackend(ws, **kw), poll_interval=0.05, watch_interval=0.1)


def show_tab(tab: str):
    async def show(pilot):
        await pilot.press("2")
        await pilot.pause(0.2)
        pilot.app.screen.query_one("#report-tabs").active = tab

    return show


def plots_drawn(n: int):
    async def show_training(pilot):
        await pilot.press("3")
        await wait(pilot, lambda: len(pilot.app.metrics[1]) >= n and pilot.app.log_lines)

    return show_training


@sizes
def test_overview(snap_compare, console_ws, size):
    assert snap_compare(app_for(console_ws), terminal_size=size, run_before=settled())


@sizes
def test_reports_difficulty_fit(snap_compare, console_ws, size):
    write_plotted_reports(console_ws)
    assert snap_compare(app_for(console_ws), terminal_size=size, run_before=settled(extra=show_tab("rep-difficulty-fit")))


@sizes
def test_reports_eval_heldout_gain(snap_compare, console_ws, size):
    write_plotted_reports(console_ws)
    assert snap_compare(app_for(console_ws), terminal_size=size, run_before=settled(extra=show_tab("rep-eval")))


def test_reports_difficulty(snap_compare, console_ws):
    assert snap_compare(app_for(console_ws), terminal_size=(120, 40), run_before=settled(extra=show_tab("rep-difficulty")))


def test_reports_not_produced_yet(snap_compare, console_ws):
    assert snap_compare(app_for(console_ws), terminal_size=(120, 40), run_before=settled(extra=show_tab("rep-eval")))


@sizes
def test_training(snap_compare, console_ws, size):
    """The curriculum's level mix is the ninth plot."""
    write_plotted_reports(console_ws)
    assert snap_compare(app_for(console_ws), terminal_size=size, run_before=settled(extra=plots_drawn(len(PLOTS))))


def test_training_dead_trainer(snap_compare, console_ws):
    report = "reports/ERROR_20261122T030000000Z.json"
    console_ws.path(report).write_text('{"error": "RuntimeError: CUDA out of memory", "step": 231}')
    dead = FakeTrainerStatus(alive=False, last_error_report=report)
    assert snap_compare(app_for(console_ws, trainer=dead), terminal_size=(120, 40),
                        run_before=settled(extra=plots_drawn(len(PLOTS) - 1)))


@sizes
def test_checkpoints(snap_compare, console_ws, size):
    async def show(pilot):
        await pilot.press("4")

    assert snap_compare(app_for(console_ws), terminal_size=size, run_before=settled(extra=show))


@sizes
def test_pipeline(snap_compare, console_ws, size):
    """Stages with one done, no run yet in this console, and the tail of logs/pipeline.log."""
    plan = [("data: make-min", "ok"), ("data: seed pool", "ok"), ("gate: round1", "ok"), ("gate: round2", "refuse"),
            ("train", "train")]
    backend = PipelineBackend(console_ws, plan, trainer=FakeTrainerStatus(pid=None, alive=False))
    (console_ws.root / "stage_markers").mkdir(exist_ok=True)
    (console_ws.root / "stage_markers" / "data_make-min.done").write_text("done")
    console_ws.path("logs/pipeline.log").write_text(
        "\n=== 2026-11-22T03:00:00Z data: make-min: rc1 data make-min\nwrote data/train_min.jsonl (64 items)\n")
    app = make_app(backend=backend, poll_interval=0.05, watch_interval=0.1)

    async def show(pilot):
        await pilot.press("5")
        await wait(pilot, lambda: pilot.app.pipeline_stages is not None and pilot.app.pipeline_log)

    assert snap_compare(app, terminal_size=size, run_before=settled(extra=show))


@pytest.mark.parametrize("size", SIZES[:2], ids=SIZE_IDS[:2])
def test_refused_gate_result(snap_compare, console_ws, size):
    async def advance(pilot):
        from rc1.console.screens.modals import ResultScreen

        await pilot.press("a")
        await pilot.pause(0.2)
        await pilot.press("y")
        await wait(pilot, lambda: isinstance(pilot.app.screen, ResultScreen))

    assert snap_compare(app_for(console_ws), terminal_size=size, run_before=settled(extra=advance))


@sizes
def test_missing_workspace(snap_compare, tmp_path, size):
    app = make_app(tmp_path / "nowhere")

    async def wait_a_moment(pilot):
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=size, run_before=wait_a_moment)
