"""The rc1 operator console: a Textual App over the same core calls as the CLI.

Screens (one file each in console/screens/) are App modes: 1 Overview, 2 Reports, 3 Training,
4 Checkpoints, 5 Pipeline. Actions (run the next pipeline stage or all of them, cancel the run, advance,
train, stop, resume, failpack, SYNC export, open a report) are key bindings and command-palette entries;
long or destructive ones ask first. An action the machine would refuse is shown disabled, with the reason
(`disabled_reason`, Textual's `check_action`). Everything that
blocks runs in thread workers that post small dataclass messages back; a worker that fails is
handled in one place (`on_worker_state_changed`), which writes an ERROR report for crashes.

Build it with `make_app(...)`; tests pass their own backend.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from functools import partial
from pathlib import Path
from typing import Iterable

from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.css.query import NoMatches
from textual.reactive import reactive
from textual.screen import Screen
from textual.worker import Worker, WorkerState, get_current_worker

from rc1.console.backend import ConsoleBackend
from rc1.console.messages import (ActionFinished, GateProgress, LogLines, MetricsUpdated, PipelineFinished,
                                  PipelineProgress, PipelineStages, ReportOpened, TrainerUpdated, WorkspaceLoaded)
from rc1.console.metrics_feed import MetricsFeed, MetricsSnapshot
from rc1.console.plotting import render_plot
from rc1.console.screens.missing import MissingWorkspaceScreen
from rc1.console.screens.modals import ConfirmScreen, ReportPicker, ResultScreen
from rc1.console.screens.overview import OverviewScreen
from rc1.console.view import WorkspaceView, load_view
from rc1.state.table import forward_from
from rc1.runtime.errors import Rc1Error
from rc1.runtime.workspace import Workspace

# action name -> (key, palette title, palette help): a table of strings like machine.sync.AREA_NEEDS, nothing shared
ACTIONS: dict[str, tuple[str, str, str]] = {
    "run_next": ("p", "Run the next pipeline stage", "the next stage of `rc1 pipeline` that is not done, in the background"),
    "run_all": ("P", "Run all remaining pipeline stages", "every stage of `rc1 pipeline` not done yet, in order"),
    "cancel_run": ("c", "Cancel the pipeline run", "SIGINT to the running stage: it stops cleanly; a new run resumes"),
    "advance": ("a", "Advance to the next state", "run the next gate; the state moves only if it passes"),
    "train": ("t", "Start training", "start the trainer as a detached background process"),
    "stop": ("s", "Stop training", "SIGTERM the trainer: it checkpoints, then exits"),
    "resume": ("r", "Resume from latest", "start the trainer from the latest verified checkpoint"),
    "failpack": ("f", "Make a FAIL pack", "reports/FAIL_<ts>.tgz of logs, reports, configs (secrets redacted)"),
    "sync": ("x", "SYNC export", "reports/sync/SYNC_round<N>.json from the real state"),
    "open_report": ("o", "Open a report", "pick any JSON/Markdown report under reports/"),
}
SCREENS = (("overview", "1", "Overview"), ("reports", "2", "Reports"), ("training", "3", "Training"),
           ("checkpoints", "4", "Ckpts"), ("pipeline", "5", "Pipeline"))
# States from which `rc1 train` / `rc1 resume` may start (training_start passes from round2_pass; a resume
# continues a run in `training`).
TRAINABLE = ("round2_pass", "training")


def _reports_screen() -> Screen:
    # Screens not shown at start are imported on first use (Markdown, DataTable, Log): faster start.
    from rc1.console.screens.reports import ReportsScreen

    return ReportsScreen()


def _training_screen() -> Screen:
    from rc1.console.screens.training import TrainingScreen

    return TrainingScreen()


def _pipeline_screen() -> Screen:
    from rc1.console.screens.pipeline import PipelineScreen

    return PipelineScreen()


def _checkpoints_screen() -> Screen:
    from rc1.console.screens.checkpoints import CheckpointsScreen

    return CheckpointsScreen()


class Rc1Console(App):
    CSS_PATH = "console.tcss"
    TITLE = "rc1 console"
    MODES = {"overview": OverviewScreen, "reports": _reports_screen, "training": _training_screen,
             "checkpoints": _checkpoints_screen, "pipeline": _pipeline_screen}
    DEFAULT_MODE = "overview"
    BINDINGS = [
        *[Binding(key, f"switch_mode('{mode}')", label) for mode, key, label in SCREENS],
        Binding("p", "run_next", "Run stage"),
        Binding("P", "run_all", "Run all"),
        Binding("c", "cancel_run", "Cancel run"),
        Binding("a", "advance", "Advance"),
        Binding("t", "train", "Train"),
        Binding("s", "stop", "Stop"),
        Binding("r", "resume", "Resume"),
        Binding("f", "failpack", "Failpack"),
        Binding("x", "sync", "SYNC"),
        Binding("o", "open_report", "Open"),
        Binding("q", "quit", "Quit"),
    ]

    activity: reactive[Text] = reactive(Text(""), always_update=True)

    def __init__(self, backend: ConsoleBackend, *, poll_interval: float = 0.5, watch_interval: float = 1.0):
        super().__init__()
        self.backend = backend
        self.poll_interval = poll_interval
        self.watch_interval = watch_interval
        self.view: WorkspaceView | None = None
        self.metrics: tuple[MetricsSnapshot, dict[str, str]] | None = None
        self.trainer: TrainerUpdated | None = None
        self.log_lines: deque[str] = deque(maxlen=2000)
        self.pipeline_log: deque[str] = deque(maxlen=2000)
        self.run_progress = None   # StageProgress of the stage running now (None: no run)
        self.run_outcome = None    # RunOutcome of the last run started here
        self.pipeline_stages: list[tuple[str, bool]] | None = None
        self.pipeline_stages_error: str | None = None
        self._run_cancel = threading.Event()
        self._ran_pipeline = False  # a run started here: the judge it may have started is stopped on quit
        self.problem = backend.workspace_problem()
        self._plot_sizes: dict[str, tuple[int, int]] = {}
        self._sizes_lock = threading.Lock()
        self._sizes_changed = threading.Event()
        self._plots_visible = threading.Event()  # render plots only while the Training screen shows
        self._wake_watch = threading.Event()
        self._wake_live = threading.Event()
        self._live_started = False
        self.live_warm = False  # the live-data worker has its first data and plotext loaded

    # -- startup -------------------------------------------------------------------------------
    def on_mount(self) -> None:
        self.sub_title = self.backend.ws.root.name
        if self.problem:
            self.push_screen(MissingWorkspaceScreen(self.problem, self.backend.ws.root.name))
            return
        self.start_watchers()

    def start_watchers(self) -> None:
        # The live-data worker (metrics preview, numpy/plotext imports) starts once the Overview
        # has its first data, so it does not compete with the first paint.
        self._live_started = False
        self.watch_workspace()

    def action_create_workspace(self) -> None:
        made = self.backend.create_workspace()
        self.notify("created " + (", ".join(f"{m}/" for m in made) if made else "nothing (it was all there)"),
                    title=f"workspace {self.backend.ws.root.name}")
        self.action_recheck_workspace()

    def action_recheck_workspace(self) -> None:
        self.problem = self.backend.workspace_problem()
        if self.problem:
            self.notify(f"still no workspace: {self.problem}", severity="warning")
            return
        if isinstance(self.screen, MissingWorkspaceScreen):
            self.pop_screen()
        self.start_watchers()

    # -- workers: watching files ---------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="watch", name="watch workspace")
    def watch_workspace(self) -> None:
        worker = get_current_worker()
        last = None
        while not worker.is_cancelled:
            sig = self.backend.watched_mtimes()
            if sig != last:
                last = sig
                self.post_message(WorkspaceLoaded(load_view(self.backend)))
            self._wake_watch.wait(self.watch_interval)
            self._wake_watch.clear()

    @work(thread=True, exclusive=True, exit_on_error=False, group="live", name="live data")
    def live_data(self) -> None:
        """Tail metrics.jsonl and train.log, poll the trainer; render plots here, off the UI thread."""
        worker = get_current_worker()
        feed = MetricsFeed(self.backend.metrics_path)
        self._post_metrics(feed.start())
        render_plot([("warm-up", [0.0, 1.0], [0.0, 1.0])], 20, 6)  # import plotext before the first real plot
        self.live_warm = True
        log = _LogTail(self.backend.log_path)
        lines, reset = log.poll(initial=True)
        self.post_message(LogLines(lines, reset=True))
        pipeline_log = _LogTail(self.backend.pipeline_log_path)
        lines, reset = pipeline_log.poll(initial=True)
        self.post_message(LogLines(lines, reset=True, source="pipeline"))
        next_trainer, last_trainer, max_steps, next_max = 0.0, None, None, 0.0
        while not worker.is_cancelled:
            changed = feed.step()
            if self._sizes_changed.is_set():
                time.sleep(0.02)  # a screen lays out all its plots at once: render once for all sizes
                self._sizes_changed.clear()
                changed = True
            if changed:
                self._post_metrics(feed.snapshot())
            lines, reset = log.poll()
            if lines or reset:
                self.post_message(LogLines(lines, reset=reset))
            lines, reset = pipeline_log.poll()
            if lines or reset:
                self.post_message(LogLines(lines, reset=reset, source="pipeline"))
            now = time.monotonic()
            if now >= next_max:
                max_steps, next_max = self.backend.max_steps(), now + 30
            if now >= next_trainer:
                next_trainer = now + 1.0
                msg = self._trainer_message(max_steps)
                key = repr((msg.status, msg.unavailable, msg.max_steps))
                if key != last_trainer:
                    last_trainer = key
                    self.post_message(msg)
            self._wake_live.wait(self.poll_interval)
            self._wake_live.clear()

    def _trainer_message(self, max_steps: int | None) -> TrainerUpdated:
        try:
            st = self.backend.trainer_status()
        except Rc1Error as exc:  # Unavailable included
            return TrainerUpdated(None, unavailable=exc.message, max_steps=max_steps)
        err = None
        report = getattr(st, "last_error_report", None)
        if st is not None and not getattr(st, "alive", False) and report:
            try:
                err = json.loads(self.backend.ws.path(report).read_text())
            except (OSError, json.JSONDecodeError):
                err = {"error": f"(ERROR report {report} unreadable)"}
        return TrainerUpdated(st, error_report=err, max_steps=max_steps)

    def _post_metrics(self, snap: MetricsSnapshot) -> None:
        with self._sizes_lock:
            sizes = dict(self._plot_sizes) if self._plots_visible.is_set() else {}
        plots = {title: render_plot(snap.series.get(title, []), w, h) for title, (w, h) in sizes.items()
                 if snap.series.get(title)}
        self.post_message(MetricsUpdated(snap, plots))

    def set_plots_visible(self, visible: bool) -> None:
        if visible:
            self._plots_visible.set()
            self._sizes_changed.set()  # draw what arrived while hidden
            self._wake_live.set()
        else:
            self._plots_visible.clear()

    def set_plot_size(self, title: str, width: int, height: int) -> None:
        with self._sizes_lock:
            if self._plot_sizes.get(title) == (width, height):
                return
            self._plot_sizes[title] = (width, height)
        self._sizes_changed.set()
        self._wake_live.set()

    # -- messages from workers -----------------------------------------------------------------
    def _update_screens(self, method: str, *args) -> None:
        """Call `method` on the screens of the current mode that have it (others refresh on resume)."""
        for screen in self.screen_stack:
            if getattr(screen, "ready", False) and hasattr(screen, method):
                try:
                    getattr(screen, method)(*args)
                except NoMatches:  # the screen is being torn down (app exiting): nothing to show on
                    pass

    def on_workspace_loaded(self, message: WorkspaceLoaded) -> None:
        self.view = message.view
        self.refresh_bindings()
        if not self._live_started:
            self._live_started = True
            self.call_after_refresh(self.live_data)
        if message.view.problem and not isinstance(self.screen, MissingWorkspaceScreen):
            self.push_screen(MissingWorkspaceScreen(message.view.problem, self.backend.ws.root.name))
            return
        self._update_screens("show_view", message.view)

    def on_metrics_updated(self, message: MetricsUpdated) -> None:
        if not message.plots and self.metrics is not None:
            message.plots = self.metrics[1]  # not drawn while hidden: keep the last plots until redrawn
        self.metrics = (message.snapshot, message.plots)
        self._update_screens("show_metrics", message.snapshot, message.plots)

    def on_log_lines(self, message: LogLines) -> None:
        if message.source == "pipeline":
            if message.reset:
                self.pipeline_log.clear()
            self.pipeline_log.extend(message.lines)
            self._update_screens("add_pipeline_log_lines", message.lines, message.reset)
            return
        if message.reset:
            self.log_lines.clear()
        self.log_lines.extend(message.lines)
        self._update_screens("add_log_lines", message.lines, message.reset)

    def on_pipeline_progress(self, message: PipelineProgress) -> None:
        self.run_progress = message.progress
        p = message.progress
        if p.names and [name for name, _ in self.pipeline_stages or []] != list(p.names):
            # P pressed before the stage list was read (or the stages changed): the run's own list
            self.pipeline_stages, self.pipeline_stages_error = [(name, False) for name in p.names], None
        if self.pipeline_stages and len(self.pipeline_stages) == p.total:  # the run is past every stage before this
            self.pipeline_stages = [(name, done or i < p.index - 1) for i, (name, done) in enumerate(self.pipeline_stages)]
        self.activity = Text(f"▶ pipeline {p.index}/{p.total}: {p.stage}", style="yellow")
        self._update_screens("show_run", self.run_progress, self.run_outcome)
        self.refresh_bindings()

    def on_pipeline_finished(self, message: PipelineFinished) -> None:
        from rc1.console.pipeline_run import FATAL, REFUSED

        out = message.outcome
        self.run_outcome, self.run_progress = out, None
        style = "green" if out.ok else ("bold yellow" if out.kind not in (FATAL, REFUSED) else "bold red")
        hint = "  — f: failpack" if out.kind == FATAL else ("  — 1: all checks" if out.kind == REFUSED else "")
        self.activity = Text(f"{out.title}{hint}", style=style)
        self._wake_watch.set()
        self._update_screens("show_run", None, out)
        self.refresh_bindings()
        if out.kind in (FATAL, REFUSED):
            self.push_screen(ResultScreen(out.title, Text("\n".join(out.lines)), error=True))

    def on_pipeline_stages(self, message: PipelineStages) -> None:
        self.pipeline_stages, self.pipeline_stages_error = message.stages, message.error
        self._update_screens("show_stages", message.stages, message.error)

    def on_trainer_updated(self, message: TrainerUpdated) -> None:
        before = self.trainer.status if self.trainer else None
        self.trainer = message
        self.refresh_bindings()
        if getattr(before, "alive", False) and not getattr(message.status, "alive", False):
            report = getattr(message.status, "last_error_report", None)
            self.activity = Text(f"trainer stopped{f'; ERROR report {report}' if report else ''} — "
                                 "f: failpack, r: resume", style="bold yellow")
        self._update_screens("show_trainer", message)

    def on_gate_progress(self, message: GateProgress) -> None:
        self.activity = Text(f"⏳ {message.text}", style="yellow")

    def on_action_finished(self, message: ActionFinished) -> None:
        self.activity = Text(f"{message.title}: " + "; ".join(message.lines), style="green" if message.ok else "bold red")
        self._wake_watch.set()
        self._wake_live.set()
        if message.action == "advance":
            self.push_screen(ResultScreen(message.title, _outcome_body(message.outcome), error=not message.ok))
        else:
            self.notify("\n".join(message.lines), title=message.title, severity="information" if message.ok else "error")

    def on_report_opened(self, message: ReportOpened) -> None:
        from rc1.console.screens.report_view import ReportViewScreen

        self.push_screen(ReportViewScreen(message.rel, message.doc, message.error))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one place worker errors are handled: Rc1Error -> its message; a crash -> ERROR report."""
        if event.worker.group == "pipeline" and event.state in (WorkerState.SUCCESS, WorkerState.CANCELLED):
            self.refresh_bindings()
        if event.state != WorkerState.ERROR:
            return
        exc = event.worker.error
        name = event.worker.name or "worker"
        if event.worker.group == "pipeline":
            self.run_progress = None
            self._update_screens("show_run", None, self.run_outcome)
            self.refresh_bindings()
        if isinstance(exc, Rc1Error):
            lines = [exc.message, *exc.lines]
        else:
            lines = [f"{type(exc).__name__}: {exc}"]
            try:
                lines.append(f"ERROR report: {self.backend.ws.rel(self.backend.write_error_report(exc))}")
            except OSError as write_err:
                lines.append(f"(could not write the ERROR report: {write_err})")
        self.activity = Text(f"✘ {name}: " + " — ".join(lines), style="bold red")
        self.push_screen(ResultScreen(f"{name} failed", Text("\n".join(lines)), error=True))

    # -- actions -------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if self.problem and (action in ACTIONS or action == "switch_mode"):
            return False
        if action in ACTIONS and self.disabled_reason(action):
            return None  # shown greyed out; the reason is on the screen's key line and in the palette
        return True

    def refresh_bindings(self) -> None:
        if not self.screen_stack:
            return  # the app is closing: a worker that ended meanwhile has no screen left to refresh
        super().refresh_bindings()
        self._update_screens("show_key_hints")  # the line that says why a key is disabled

    def cancelling(self) -> bool:
        return self._run_cancel.is_set() and self.pipeline_running()

    def pipeline_running(self) -> bool:
        return any(w.group == "pipeline" and w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in self.workers)

    def trainer_alive(self) -> bool:
        return bool(getattr(self.trainer.status if self.trainer else None, "alive", False))

    def disabled_reason(self, action: str) -> str | None:
        """Why the machine would refuse `action` now (None: it may run). Read from what the console already
        knows (the last view, the trainer status, the run in progress), so it costs nothing to ask."""
        view = self.view
        state = view.state if view is not None else None
        running = self.pipeline_running()
        if action in ("run_next", "run_all"):
            if running:
                return "a pipeline run is in progress (c cancels it)"
            if self.trainer_alive():
                return "the trainer is running (s stops it)"
            if view is not None and view.run_config is None:
                return "no run config (start with --config PATH)"
            return None
        if action == "cancel_run":
            return None if running else "no pipeline run in progress"
        if action == "stop":
            if running:
                return "the pipeline run owns the trainer: c cancels the run (the trainer checkpoints first)"
            return None if self.trainer_alive() or self.trainer is None else "no trainer is running"
        if state is None:
            return None  # still loading: the action itself says what is wrong
        if action == "advance":
            if running:
                return "a pipeline run is in progress"
            return f"{state} is the final state" if forward_from(state) is None else None
        if action in ("train", "resume"):
            if running:
                return "a pipeline run is in progress"
            if self.trainer_alive():
                return "the trainer is already running"
            if state not in TRAINABLE:
                return _not_trainable(state, view.gates)
            if action == "resume" and not any(c.get("latest") for c in view.checkpoints or []):
                return "no checkpoint to resume from yet"
        return None

    def disabled_actions(self) -> list[tuple[str, str, str]]:
        """(keys, labels, reason) of the actions disabled now, those with one reason together; cancel is left
        out (it only means something while a run is in progress)."""
        grouped: dict[str, list[tuple[str, str]]] = {}
        for action, (key, title, _help) in ACTIONS.items():
            reason = None if self.problem or action == "cancel_run" else self.disabled_reason(action)
            if reason:
                grouped.setdefault(reason, []).append((key, _binding_label(self, action) or title))
        return [("/".join(k for k, _ in keys), ", ".join(label for _, label in keys), reason)
                for reason, keys in grouped.items()]

    def _busy(self) -> bool:
        running = [w for w in self.workers if w.group == "action" and w.state in (WorkerState.PENDING, WorkerState.RUNNING)]
        if running:
            self.notify(f"busy: {running[0].name} is still running", severity="warning")
        return bool(running)

    def action_advance(self) -> None:
        if self._busy():
            return
        state = self.view.state if self.view else self.backend.current_state()
        nxt = forward_from(state)
        if nxt is None:
            self.notify(f"{state} is the final state", severity="warning")
            return
        self.push_screen(ConfirmScreen(f"Run gate {nxt['gate']} to advance {state} → {nxt['dest']}?",
                                       "The state changes only if every check passes."),
                         lambda ok: ok and self.run_advance(nxt["dest"]))

    def action_run_next(self) -> None:
        self._start_run(all_stages=False)

    def action_run_all(self) -> None:
        self._start_run(all_stages=True)

    def _start_run(self, all_stages: bool) -> None:
        reason = self.disabled_reason("run_all")
        if reason:
            self.notify(reason, severity="warning")
            return
        self.run_outcome = None
        self._run_cancel.clear()
        self.activity = Text("▶ pipeline: checking which stages are done…", style="yellow")
        self.run_pipeline_stages(all_stages)
        self.refresh_bindings()

    def action_cancel_run(self) -> None:
        if not self.pipeline_running():
            self.notify("no pipeline run in progress", severity="warning")
            return
        self._run_cancel.set()
        self.activity = Text("■ cancelling: the stage gets SIGINT and stops cleanly (training checkpoints first)…",
                             style="yellow")
        self._update_screens("show_run", self.run_progress, self.run_outcome)

    async def action_quit(self) -> None:
        if self.pipeline_running():
            def answer(ok: bool | None) -> None:
                if ok:
                    self._run_cancel.set()
                    self.exit()

            self.push_screen(ConfirmScreen("A pipeline stage is running. Stop it and quit?",
                                           "It gets SIGINT and stops cleanly; the next run resumes where it stopped."),
                             answer)
            return
        if self._ran_pipeline:
            self._stop_judge()
        self.exit()

    def _stop_judge(self) -> None:
        try:
            self.backend.stop_judge()
        except (Rc1Error, OSError):
            pass  # nothing to stop with: no run config, or the judge was never started

    def action_train(self) -> None:
        if not self._busy():
            self.push_screen(ConfirmScreen("Start training?", "The trainer runs in the background and keeps running "
                                           "after the console closes."), lambda ok: ok and self.run_start(None))

    def action_resume(self) -> None:
        if not self._busy():
            self.push_screen(ConfirmScreen("Resume training from the latest checkpoint?"),
                             lambda ok: ok and self.run_start("latest"))

    def action_stop(self) -> None:
        status = self.trainer.status if self.trainer else None
        if self.trainer is not None and not getattr(status, "alive", False):
            self.notify("no trainer is running", severity="warning")
            return
        if not self._busy():
            self.push_screen(ConfirmScreen("Stop the trainer?", "SIGTERM: it writes a checkpoint, then exits."),
                             lambda ok: ok and self.run_stop())

    def action_failpack(self) -> None:
        if not self._busy():
            self.run_simple("failpack", "FAIL pack")

    def action_sync(self) -> None:
        if not self._busy():
            self.run_simple("sync", "SYNC export")

    def action_open_report(self) -> None:
        reports = [(self.backend.ws.rel(p), p) for p in self.backend.all_reports()]
        self.push_screen(ReportPicker(reports), lambda path: path is not None and self.open_report(path))

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        if self.problem:
            return
        for mode, key, label in SCREENS:
            yield SystemCommand(f"Show {label} ({key})", f"switch to the {mode} screen", partial(self.switch_mode, mode))
        for action, (key, title, help_text) in ACTIONS.items():
            reason = self.disabled_reason(action)
            if reason:
                yield SystemCommand(f"{title} ({key}) — unavailable", reason,
                                    partial(self.notify, f"{title}: {reason}", severity="warning"))
            else:
                yield SystemCommand(f"{title} ({key})", help_text, getattr(self, f"action_{action}"))

    # -- action workers ------------------------------------------------------------------------
    @work(thread=True, exclusive=True, exit_on_error=False, group="action", name="advance")
    def run_advance(self, target: str) -> None:
        self.post_message(GateProgress(f"running gates to {target}…"))

        def on_gate(gate: str, results: list) -> None:
            ok = bool(results) and all(r.passed for r in results)
            self.post_message(GateProgress(f"gate {gate}: {'passed' if ok else 'refused'}"))

        outcome = self.backend.advance(target, progress=lambda m: self.post_message(GateProgress(m)), on_gate=on_gate)
        if outcome.reached:
            title, lines = f"advanced to {outcome.state}", [f"state {outcome.start} → {outcome.state}"]
        else:
            gate = outcome.gates[-1][0] if outcome.gates else "?"
            failing = sum(len(r.failing) for _, results in outcome.gates[-1:] for r in results)
            title = f"gate {gate} refused"
            lines = [f"state stays {outcome.state}", f"{failing} failing check(s)"]
        self.post_message(ActionFinished("advance", title, lines, ok=outcome.reached, outcome=outcome))

    @work(thread=True, exclusive=True, exit_on_error=False, group="pipeline", name="pipeline run")
    def run_pipeline_stages(self, all_stages: bool) -> None:
        """The stages of `rc1 pipeline` (rc1.console.pipeline_run), stopped by c or by quitting the console."""
        from rc1.console.pipeline_run import run_pipeline

        worker = get_current_worker()
        self._ran_pipeline = True
        try:
            outcome = run_pipeline(self.backend.pipeline(), all_stages=all_stages,
                                   cancelled=lambda: self._run_cancel.is_set() or worker.is_cancelled,
                                   report=lambda p: self.post_message(PipelineProgress(p)))
            self.post_message(PipelineFinished(outcome))
        finally:
            if worker.is_cancelled:  # the console is quitting: leave no judge server behind (as `rc1 pipeline`)
                self._stop_judge()
            else:
                self.list_pipeline_stages()

    @work(thread=True, exclusive=True, exit_on_error=False, group="stages", name="list pipeline stages")
    def list_pipeline_stages(self) -> None:
        try:
            self.post_message(PipelineStages(self.backend.pipeline_stages()))
        except Rc1Error as exc:
            self.post_message(PipelineStages(None, exc.message))

    @work(thread=True, exclusive=True, exit_on_error=False, group="action", name="start trainer")
    def run_start(self, resume: str | None) -> None:
        pid = self.backend.start_trainer(resume=resume)
        what = "resumed trainer from latest" if resume else "started trainer"
        self.post_message(ActionFinished("train", what, [f"pid {pid}", f"log {self.backend.ws.rel(self.backend.log_path)}"]))

    @work(thread=True, exclusive=True, exit_on_error=False, group="action", name="stop trainer")
    def run_stop(self) -> None:
        stopped = self.backend.stop_trainer()
        self.post_message(ActionFinished("stop", "stop trainer", ["stopped (checkpoint written)" if stopped
                                                                  else "no running trainer to stop"], ok=stopped))

    @work(thread=True, exclusive=True, exit_on_error=False, group="action", name="action")
    def run_simple(self, action: str, title: str) -> None:
        path = self.backend.failpack() if action == "failpack" else self.backend.sync_export()
        self.post_message(ActionFinished(action, title, [f"wrote {self.backend.ws.rel(path)}"]))

    @work(thread=True, exclusive=True, exit_on_error=False, group="open", name="open report")
    def open_report(self, path: Path) -> None:
        rel = self.backend.ws.rel(path)
        try:
            self.post_message(ReportOpened(rel, self.backend.read_report(path)))
        except (Rc1Error, OSError) as exc:
            self.post_message(ReportOpened(rel, None, error=getattr(exc, "message", str(exc))))


def _binding_label(app: App, action: str) -> str | None:
    return next((b.description for b in app.BINDINGS if isinstance(b, Binding) and b.action == action), None)


def _not_trainable(state: str, gates: dict) -> str:
    """Why training cannot start from `state`: the gate that has not passed, and how it stands."""
    from rc1.state.table import STATES

    if state in STATES and STATES.index(state) > STATES.index("training"):
        return f"training is done (state {state})"
    nxt = forward_from(state)
    gate = nxt["gate"] if nxt else "?"
    report = gates.get(gate)
    how = "not run yet" if report is None else ("refused" if not report.get("passed") else "passed; advance (a)")
    names = {"round1": "round 1", "round2": "round 2"}
    return f"{names.get(gate, gate)} not passed — gate {gate} {how}"


def _outcome_body(outcome) -> Group | Text:
    from rc1.console.widgets.gate_checks import gate_table

    if outcome is None or not outcome.gates:
        return Text("no gate ran")
    tables = []
    from rc1.state.table import TRANSITIONS

    for gate, results in outcome.gates:
        passed = bool(results) and all(r.passed for r in results)
        move = next((t for t in TRANSITIONS if t["gate"] == gate), {})
        report = {"passed": passed, "from": move.get("source"), "to": move.get("dest"),
                  "results": [r.to_dict() for r in results]}
        tables.append(gate_table(gate, report, only_failing=not passed))
        if not passed:
            tables.append(Text("only the failing checks are listed; the Overview shows them all", style="dim"))
    return Group(*tables)


class _LogTail:
    """New lines of logs/train.log since the last poll (restarts when the file is truncated)."""

    def __init__(self, path: Path, initial_lines: int = 200):
        self.path, self.offset, self.partial, self.initial_lines = path, 0, b"", initial_lines

    def poll(self, initial: bool = False) -> tuple[list[str], bool]:
        try:
            size = self.path.stat().st_size
        except OSError:
            return [], False
        reset = size < self.offset
        if reset:
            self.offset, self.partial = 0, b""
        skip_first = False
        if initial and size > 256 * 1024:  # only the end of a long log
            self.offset, skip_first = size - 256 * 1024, True
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = fh.read(1 << 20)
        self.offset += len(data)
        if skip_first:
            data = data.split(b"\n", 1)[1] if b"\n" in data else b""
        chunks = (self.partial + data).split(b"\n")
        self.partial = chunks.pop()
        lines = [c.decode("utf-8", "replace") for c in chunks]
        return (lines[-self.initial_lines:] if initial else lines), reset


def make_app(workdir: str | Path | Workspace | None = None, config_path: str | None = None, *,
             backend: ConsoleBackend | None = None, poll_interval: float = 0.5,
             watch_interval: float = 1.0) -> Rc1Console:
    """The console for a workspace (or for an injected backend, as tests do)."""
    if backend is None:
        from rc1.runtime.workspace import resolve_workspace

        ws = workdir if isinstance(workdir, Workspace) else resolve_workspace(workdir)
        backend = ConsoleBackend(ws, config_path)
    return Rc1Console(backend, poll_interval=poll_interval, watch_interval=watch_interval)
