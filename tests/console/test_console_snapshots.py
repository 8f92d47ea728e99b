"""Snapshots of every screen at 120x40 on the deterministic fixture workspace (fixed clock, key, data).

Regenerate after an intended UI change: pytest tests/console --snapshot-update
"""

from __future__ import annotations

import time

from tests.helpers.console import FakeTrainerStatus, RecordingBackend

from rc1.console.app import make_app

SIZE = (120, 40)


def settled(*, screen: str | None = None, extra=None):
    """run_before: wait until the first loads are shown (and the plots drawn) so the picture is stable."""

    async def run_before(pilot) -> None:
        app = pilot.app
        deadline = time.monotonic() + 15

        def done() -> bool:
            if app.view is None or app.trainer is None or app.metrics is None:
                return False
            if screen == "training":
                return len(app.metrics[1]) == 8
            return True

        while not done():
            assert time.monotonic() < deadline, "console did not settle"
            await pilot.pause(0.05)
        if extra is not None:
            await extra(pilot)
        await pilot.pause(0.3)

    return run_before


def app_for(ws, **kw):
    return make_app(backend=RecordingBackend(ws, **kw), poll_interval=0.05, watch_interval=0.1)


def test_overview(snap_compare, console_ws):
    assert snap_compare(app_for(console_ws), terminal_size=SIZE, run_before=settled())


def test_reports_difficulty(snap_compare, console_ws):
    async def show_difficulty(pilot):
        await pilot.press("2")
        await pilot.pause(0.2)
        pilot.app.screen.query_one("#report-tabs").active = "rep-difficulty"

    assert snap_compare(app_for(console_ws), terminal_size=SIZE, run_before=settled(extra=show_difficulty))


def test_reports_not_produced_yet(snap_compare, console_ws):
    async def show_eval(pilot):
        await pilot.press("2")
        await pilot.pause(0.2)
        pilot.app.screen.query_one("#report-tabs").active = "rep-eval"

    assert snap_compare(app_for(console_ws), terminal_size=SIZE, run_before=settled(extra=show_eval))


def test_training(snap_compare, console_ws):
    async def show_training(pilot):
        await pilot.press("3")
        deadline = time.monotonic() + 15
        while len(pilot.app.metrics[1]) < 8 or not pilot.app.log_lines:
            assert time.monotonic() < deadline
            await pilot.pause(0.05)

    assert snap_compare(app_for(console_ws), terminal_size=SIZE, run_before=settled(extra=show_training))


def test_training_dead_trainer(snap_compare, console_ws):
    report = "reports/ERROR_20261122T030000000Z.json"
    console_ws.path(report).write_text('{"error": "RuntimeError: CUDA out of memory", "step": 231}')
    dead = FakeTrainerStatus(alive=False, last_error_report=report)

    async def show_training(pilot):
        await pilot.press("3")
        deadline = time.monotonic() + 15
        while len(pilot.app.metrics[1]) < 8:
            assert time.monotonic() < deadline
            await pilot.pause(0.05)

    assert snap_compare(app_for(console_ws, trainer=dead), terminal_size=SIZE, run_before=settled(extra=show_training))


def test_checkpoints(snap_compare, console_ws):
    async def show(pilot):
        await pilot.press("4")

    assert snap_compare(app_for(console_ws), terminal_size=SIZE, run_before=settled(extra=show))


def test_refused_gate_result(snap_compare, console_ws):
    async def advance(pilot):
        from rc1.console.screens.modals import ResultScreen

        await pilot.press("a")
        await pilot.pause(0.2)
        await pilot.press("y")
        deadline = time.monotonic() + 15
        while not isinstance(pilot.app.screen, ResultScreen):
            assert time.monotonic() < deadline
            await pilot.pause(0.05)

    assert snap_compare(app_for(console_ws), terminal_size=SIZE, run_before=settled(extra=advance))


def test_missing_workspace(snap_compare, tmp_path):
    app = make_app(tmp_path / "nowhere")

    async def wait(pilot):
        await pilot.pause(0.3)

    assert snap_compare(app, terminal_size=SIZE, run_before=wait)
