"""Pilot tests: keys and palette entries call the right core functions, a refused gate shows its
failing checks, the training screen follows metrics.jsonl, faults are shown rather than crashing."""

from __future__ import annotations

import json
import time

import pytest
from tests.helpers.console import (FakeTrainerStatus, RecordingBackend, metrics_line, pass_round2, text_of, wait_for,
                                  write_metrics)

from rc1.console.app import make_app
from rc1.console.screens.missing import MissingWorkspaceScreen
from rc1.console.screens.modals import ConfirmScreen, ReportPicker, ResultScreen
from rc1.console.screens.report_view import ReportViewScreen
from rc1.console.screens.training import TrainingScreen

SIZE = (120, 40)
pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def screen_text(app) -> str:
    return "\n".join(text_of(w) for w in app.screen.query("Static, Label"))


async def ready(pilot, app) -> None:
    await wait_for(pilot, lambda: app.view is not None and app.trainer is not None and app.metrics is not None,
                   what="first workspace load")


def fast_app(backend):
    return make_app(backend=backend, poll_interval=0.05, watch_interval=0.1)


async def test_action_keys_call_the_core(console_ws):
    """t/r/s ask first (n declines, y runs); f and x run at once; each shows what it did."""
    pass_round2(console_ws)
    backend = RecordingBackend(console_ws, trainer=FakeTrainerStatus(pid=None, alive=False))
    app = fast_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        for key, expected, shown in (("t", ("start_trainer", None), "pid 4242"),
                                     ("r", ("start_trainer", "latest"), "resumed trainer"),
                                     ("s", ("stop_trainer",), "stop trainer")):
            if key == "s":  # a trainer now runs: s stops it
                backend.trainer = FakeTrainerStatus()
                await wait_for(pilot, app.trainer_alive, what="trainer seen running")
            backend.calls.clear()
            await pilot.press(key)
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirmation modal")
            await pilot.press("n")  # declining calls nothing
            await pilot.pause(0.1)
            assert backend.calls == []
            await pilot.press(key)
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirmation modal")
            await pilot.press("y")
            await wait_for(pilot, lambda: backend.calls and shown in str(app.activity), what=f"{key}: call and result")
            assert backend.calls == [expected]
            await wait_for(pilot, lambda: not any(w.is_running for w in app.workers if w.group == "action"), what="idle")
        for key, expected, written in (("f", ("failpack",), "reports/FAIL_test.tgz"),
                                       ("x", ("sync_export", None), "reports/sync/SYNC_round2.json")):
            backend.calls.clear()
            await pilot.press(key)
            await wait_for(pilot, lambda: backend.calls and written in str(app.activity), what=f"{key}: path shown")
            assert backend.calls == [expected]
            await wait_for(pilot, lambda: not any(w.is_running for w in app.workers if w.group == "action"), what="idle")


async def test_palette_runs_sync_export(console_ws):
    backend = RecordingBackend(console_ws)
    app = fast_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for t in ("Run the next pipeline stage (p) — unavailable", "Run all remaining pipeline stages (P) — unavailable",
                  "Cancel the pipeline run (c) — unavailable", "Advance to the next state (a)",
                  "Start training (t) — unavailable", "Stop training (s)", "Resume from latest (r) — unavailable",
                  "Make a FAIL pack (f)", "SYNC export (x)", "Open a report (o)", "Show Training (3)",
                  "Show Pipeline (5)"):
            assert t in titles
        await pilot.press("ctrl+p")
        await pilot.pause(0.2)
        await pilot.press(*"SYNC export")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: backend.calls, what="palette command")
        assert backend.calls == [("sync_export", None)]


async def test_refused_gate_lists_failing_checks_and_state_stays(console_ws):
    from rc1.machine.service import current_state

    backend = RecordingBackend(console_ws)
    app = fast_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen), what="confirmation")
        assert "round1 → round2_pass" in text_of(app.screen.query_one("#question"))
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, ResultScreen), what="gate result")
        body = text_of(app.screen.query_one("#result-body"))
        assert "REFUSED" in body and "cache hit rate" in body and "0.97" in body and "< 0.95" in body
        assert "distinct-2" not in body  # only failing checks in the result
        assert text_of(app.screen.query_one("#result-title")) == "gate round2 refused"
        assert backend.calls == [("advance", "round2_pass")]
        assert current_state(console_ws) == "round1"
        await pilot.press("escape")
        blockers = text_of(app.screen.query_one("#blockers"))
        assert "2 failing check(s) of round2" in blockers and "scorer/cache hit rate" in blockers


async def test_training_screen_follows_appended_metrics_and_counts_corrupt_lines(console_ws):
    app = fast_app(RecordingBackend(console_ws))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("3")
        await wait_for(pilot, lambda: isinstance(app.screen, TrainingScreen) and app.metrics[1], what="plots")
        info = app.screen.query_one("#metrics-info")
        assert "240 records" in text_of(info) and "skipped: 2" in text_of(info)
        # the partial last line of the fixture completes and new lines follow, one of them corrupt
        with open(console_ws.metrics_path, "a") as fh:
            fh.write(': 0.5}\n')
        write_metrics(console_ws.metrics_path, range(241, 261), corrupt=1)
        await wait_for(pilot, lambda: "261 records" in text_of(info), what="appended records")
        assert "skipped: 3" in text_of(info)
        assert "step=260" in text_of(info)
        loss_panel = next(p for p in app.screen.query("PlotPanel") if p.plot_title == "loss")
        assert "loss=" in text_of(loss_panel)
        # the log pane tails logs/train.log
        with open(console_ws.train_log, "a") as fh:
            fh.write("2026-11-22 03:01:00 INFO rc1.train: saved checkpoint step_00300\n")
        log = app.screen.query_one("#train-log")
        await wait_for(pilot, lambda: any("step_00300" in line for line in log.lines), what="new log line")
        # a reward/success divergence alert from the trainer gets an alert line
        with open(console_ws.metrics_path, "a") as fh:
            fh.write(json.dumps({"step": 261, "loss": 0.1, "reward": 0.6, "success": 0.0,
                                 "alert": "reward rose 0.40 -> 0.55 while verified success did not",
                                 "alert/kind": "reward_success_divergence"}) + "\n")
        await wait_for(pilot, lambda: "ALERT at step 261" in text_of(info), what="alert line")
        assert "verified success did not" in text_of(info)
        assert "judge:" not in text_of(info)  # a rules-scored run has no judge line
        # a run with the judge in the loop: its latest step's figures beside the plots
        with open(console_ws.metrics_path, "a") as fh:
            fh.write(json.dumps({"step": 262, "loss": 0.1, "judge/calls": 18, "judge/live": 12, "judge/cache": 6,
                                 "judge/latency_p50_s": 0.61, "judge/latency_p95_s": 1.2, "judge/seconds": 4.5,
                                 "judge/cost_total": 0.0123, "judge/billable_tokens_total": 41000,
                                 "judge/n429": 2, "judge/unstable_total": 3}) + "\n")
        await wait_for(pilot, lambda: "judge:" in text_of(info), what="judge line")
        line = text_of(info)
        assert "calls 18 (live 12, cache 6)" in line and "p50 0.61s p95 1.20s" in line
        assert "cost so far 0.0123 (41000 tokens)" in line and "429s 2" in line and "unstable samples 3" in line


async def test_dead_trainer_shows_error_report_and_offers_failpack_and_resume(console_ws):
    report = "reports/ERROR_20261122T030000000Z.json"
    console_ws.path(report).write_text(json.dumps({"error": "RuntimeError: CUDA out of memory", "step": 231}))
    backend = RecordingBackend(console_ws, trainer=FakeTrainerStatus(alive=False, last_error_report=report))
    app = fast_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("3")
        await wait_for(pilot, lambda: isinstance(app.screen, TrainingScreen), what="training screen")
        status = text_of(app.screen.query_one("#trainer-status"))
        assert "not running" in status and "CUDA out of memory" in status and "at step 231" in status
        assert report in status and "f for a failpack" in status
        assert "r to resume" not in status  # state round1: a resume would be refused, so it is not offered
        await pilot.press("s")  # nothing to stop
        await pilot.pause(0.1)
        assert backend.calls == []


async def test_worker_crash_is_shown_once_with_its_error_report(console_ws):
    class Broken(RecordingBackend):
        def failpack(self):
            raise RuntimeError("disk on fire")

    app = fast_app(Broken(console_ws))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("f")
        await wait_for(pilot, lambda: isinstance(app.screen, ResultScreen), what="error modal")
        body = text_of(app.screen.query_one("#result-body"))
        assert "RuntimeError: disk on fire" in body and "ERROR report: reports/ERROR_" in body
        rel = body.split("ERROR report: ")[1].split()[0]
        assert json.loads(console_ws.path(rel).read_text())["error"] == "RuntimeError: disk on fire"


async def test_open_report_shows_it(console_ws):
    app = fast_app(RecordingBackend(console_ws))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("o")
        await wait_for(pilot, lambda: isinstance(app.screen, ReportPicker), what="picker")
        picker = app.screen
        idx = next(i for i, (rel, _) in enumerate(picker.reports) if rel == "reports/rc1/difficulty_report.json")
        option_list = picker.query_one("#picker-list")
        option_list.highlighted = idx
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReportViewScreen), what="report view")
        text = screen_text(app)
        assert "per_task" in text and "hotpotqa" in text and "clue_overlap" in text


async def test_reports_refresh_when_a_report_appears(console_ws):
    app = fast_app(RecordingBackend(console_ws))
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        await pilot.press("2")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ReportsScreen", what="reports screen")
        head = app.screen.query_one("#rep-eval .report-head")
        assert "not produced yet" in text_of(head)
        console_ws.path("reports/eval_20261122.json").write_text(json.dumps({"success_needs_clar": 0.61}))
        await wait_for(pilot, lambda: "reports/eval_20261122.json" in text_of(head), what="new report")
        # a poll may land between the truncate and the write (shown as not valid JSON); the next one reads it whole
        await wait_for(pilot, lambda: "success_needs_clar" in text_of(app.screen.query_one("#rep-eval .report-body")),
                       what="report body")


async def test_missing_workspace_explains_how_to_create_it(tmp_path):
    app = make_app(tmp_path / "nowhere")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        assert isinstance(app.screen, MissingWorkspaceScreen)
        text = screen_text(app)
        assert "does not exist" in text and "Press c to create it here" in text and "make run" in text
        assert app.check_action("advance", ()) is False
        (tmp_path / "nowhere" / "data").mkdir(parents=True)
        await pilot.press("g")
        await wait_for(pilot, lambda: not isinstance(app.screen, MissingWorkspaceScreen), what="workspace found")
        await wait_for(pilot, lambda: app.view is not None, what="view")
        assert app.view.state == "idle"


def test_large_metrics_file_preview_then_exact(tmp_path, monkeypatch):
    """A big file is first shown from a sample, then the full scan makes it exact (all lines, all corrupt ones)."""
    import rc1.console.metrics_feed as mf

    monkeypatch.setattr(mf, "FULL_READ_BYTES", 20_000)
    monkeypatch.setattr(mf, "SCAN_CHUNK", 50_000)
    monkeypatch.setattr(mf, "TAIL_BYTES", 5_000)
    monkeypatch.setattr(mf, "SAMPLE_LINES", 100)
    path = tmp_path / "metrics.jsonl"
    write_metrics(path, range(1, 501), corrupt=3)
    write_metrics(path, range(501, 1001))
    feed = mf.MetricsFeed(path)
    first = feed.start()
    assert not first.exact and first.records < 1000 and first.last["step"] == 1000
    deadline = time.monotonic() + 60
    while feed.catching_up:  # the full scan runs in a child process
        assert time.monotonic() < deadline
        feed.step()
        time.sleep(0.05)
    snap = feed.snapshot()
    assert snap.exact and snap.records == 1000 and snap.bad_lines == 3
    assert snap.series["loss"][0][1][-1] == 1000  # the newest point is always plotted


def test_series_stay_bounded(monkeypatch):
    import rc1.console.metrics_feed as mf

    monkeypatch.setattr(mf, "SERIES_CAP", 64)
    s = mf.Series()
    for i in range(10_000):
        s.add(float(i), float(i))
    assert len(s.xs) < 64 and s.last == (9999.0, 9999.0)
    xs, ys = s.points(20)
    assert len(xs) == 21 and xs[-1] == 9999.0 and xs[0] < 500


def test_eta_from_sec_per_step_and_max_steps():
    from rc1.console.metrics_feed import eta_seconds, format_duration

    assert eta_seconds(1000, 2000, 0.5) == 500
    assert format_duration(500) == "8m20s" and format_duration(7260) == "2h01m"
    assert eta_seconds(None, 2000, 0.5) is None


def test_metrics_line_fixture_is_valid_json():
    assert json.loads(metrics_line(3))["step"] == 3


async def test_keys_the_machine_would_refuse_are_disabled_with_the_reason(console_ws):
    """At round1 (round 2 refused) with a trainer running: t and r are greyed out and say why; pressing them
    does nothing; the palette lists them as unavailable with the same reason."""
    backend = RecordingBackend(console_ws)
    app = fast_app(backend)
    async with app.run_test(size=SIZE) as pilot:
        await ready(pilot, app)
        assert app.check_action("train", ()) is None and app.check_action("resume", ()) is None
        assert app.disabled_reason("train") == "the trainer is already running"
        backend.trainer = FakeTrainerStatus(pid=None, alive=False)
        await wait_for(pilot, lambda: not app.trainer_alive(), what="trainer seen stopped")
        assert app.disabled_reason("train") == "round 2 not passed — gate round2 refused"
        assert app.check_action("stop", ()) is None and app.disabled_reason("stop") == "no trainer is running"
        assert app.check_action("advance", ()) is True and app.check_action("failpack", ()) is True
        await wait_for(pilot, lambda: "t/r Train, Resume: round 2 not passed — gate round2 refused"
                       in text_of(app.screen.query_one("#key-hints")), what="key line")
        await pilot.press("t")
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ConfirmScreen) and backend.calls == []
        footer_train = next(ab for ab in app.screen.active_bindings.values() if ab.binding.action == "train")
        assert not footer_train.enabled and "round 2 not passed" in footer_train.tooltip
        titles = {c.title: c.help for c in app.get_system_commands(app.screen)}
        assert titles["Start training (t) — unavailable"] == "round 2 not passed — gate round2 refused"
        await pilot.press("3")
        await wait_for(pilot, lambda: isinstance(app.screen, TrainingScreen), what="training screen")
        status = text_of(app.screen.query_one("#trainer-status"))
        assert "training cannot start: round 2 not passed" in status and "press t" not in status


async def test_missing_workspace_can_be_created_from_the_console(tmp_path):
    app = make_app(tmp_path / "fresh")
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        assert isinstance(app.screen, MissingWorkspaceScreen)
        await pilot.press("c")
        await wait_for(pilot, lambda: not isinstance(app.screen, MissingWorkspaceScreen), what="workspace created")
        for d in ("logs", "reports", "checkpoints", "data", "configs"):
            assert (tmp_path / "fresh" / d).is_dir(), d
        assert (tmp_path / "fresh" / "configs" / "local.yaml").is_file()
        await wait_for(pilot, lambda: app.view is not None, what="view")
        assert app.view.state == "idle" and app.view.run_config == "configs/local.yaml"
