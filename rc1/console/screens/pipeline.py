"""Pipeline: run `rc1 pipeline`'s stages from the console (p: the next one, P: all the rest, c: cancel).

Shows every stage (done ✔ / running ▶ / to do ·), the running stage with a progress bar and its ETA, the
tail of logs/pipeline.log, and the last run's result: a refused gate's failing checks with the fix, or
FATAL with the FAIL pack of a stage that failed.
"""

from __future__ import annotations

import time

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Log, ProgressBar, Static

from rc1.console.metrics_feed import format_duration
from rc1.console.pipeline_run import CANCELLED, FATAL, REFUSED, RunOutcome, StageProgress
from rc1.console.screens.base import WorkspaceScreen


def stages_table(stages: list[tuple[str, bool]] | None, error: str | None, running: str | None,
                 outcome: RunOutcome | None) -> Table | Text:
    if error:
        return Text(error, style="yellow")
    if stages is None:
        return Text("checking which stages are done…", style="dim")
    t = Table(box=None, pad_edge=False, show_header=False, expand=True)
    t.add_column(width=1, no_wrap=True)
    t.add_column(overflow="fold")
    failed = outcome.stage if outcome is not None and not outcome.ok else None
    stopped = outcome is not None and outcome.kind == CANCELLED
    for name, done in stages:
        if name == running:
            mark = Text("▶", style="bold yellow")
        elif name == failed:
            mark = Text("■", style="bold yellow") if stopped else Text("✘", style="bold red")
        elif done:
            mark = Text("✔", style="green")
        else:
            mark = Text("·", style="dim")
        t.add_row(mark, Text(name, style="bold" if name in (running, failed) else ("" if not done else "dim")))
    return t


def run_text(progress: StageProgress | None, outcome: RunOutcome | None, now: float, cancelling: bool = False) -> Text:
    if progress is not None:
        out = Text()
        out.append(f"▶ {progress.index}/{progress.total}  {progress.stage}", style="bold yellow")
        elapsed = now - progress.started
        out.append(f"   elapsed {format_duration(elapsed)}")
        if progress.completed is not None and progress.steps:
            out.append(f"   step {progress.completed}/{progress.steps}")
        eta = progress.eta_s(now)
        out.append(f"   ETA {format_duration(eta)}" if eta is not None else "   ETA — (first run of this stage)")
        if progress.remaining_after_s:
            out.append(f"   then ≈{format_duration(progress.remaining_after_s)} for the stages after it", style="dim")
        if cancelling:
            out.append("\n■ cancelling: the stage got SIGINT and is stopping cleanly (training checkpoints first)",
                       style="bold yellow")
        else:
            out.append("\nc cancels: the stage gets SIGINT and stops cleanly; the next run resumes from there",
                       style="dim")
        return out
    if outcome is None:
        return Text("no run yet in this console — p runs the next stage that is not done, P every remaining one "
                    "(the stages of `rc1 pipeline`; done ones are skipped)", style="dim")
    style = "bold green" if outcome.ok else ("bold red" if outcome.kind in (FATAL, REFUSED) else "bold yellow")
    out = Text(outcome.title, style=style)
    for line in outcome.lines:
        out.append("\n" + line, style="red" if line.startswith(("✘", "FATAL")) else "")
    return out


class PipelineScreen(WorkspaceScreen):
    SUBTITLE = "pipeline"
    BORDER_TITLES = {"#stages-scroll": "stages (rc1 pipeline)", "#run": "run", "#pipeline-log": "logs/pipeline.log"}

    def body(self) -> ComposeResult:
        with Horizontal(id="pipeline-body"):
            with VerticalScroll(id="stages-scroll"):
                yield Static(id="stages")
            with Vertical(id="pipeline-right"):
                with Vertical(id="run"):
                    yield ProgressBar(id="stage-bar", show_eta=False, show_percentage=True)
                    yield Static(id="run-text")
                yield Log(id="pipeline-log", max_lines=2000)

    def prepare(self) -> None:
        self.set_interval(1.0, self._tick, pause=False)

    def refresh_view(self) -> None:
        app = self.app
        self.show_stages(app.pipeline_stages, app.pipeline_stages_error)
        self.show_run(app.run_progress, app.run_outcome)
        log = self.query_one(Log)
        log.clear()
        log.write_lines(list(app.pipeline_log))
        if not app.pipeline_running():
            app.list_pipeline_stages()

    def show_view(self, view) -> None:
        """The stage list follows the run (show_run/show_stages), not the workspace view."""

    def show_stages(self, stages, error) -> None:
        app = self.app
        running = app.run_progress.stage if app.run_progress is not None else None
        self.query_one("#stages", Static).update(stages_table(stages, error, running, app.run_outcome))

    def show_run(self, progress: StageProgress | None, outcome: RunOutcome | None) -> None:
        bar = self.query_one("#stage-bar", ProgressBar)
        now = time.monotonic()
        if progress is None:
            bar.update(total=100, progress=0 if outcome is None or not outcome.ok else 100)
        else:
            frac = progress.fraction(now)
            bar.update(total=None if frac is None else 100, progress=0 if frac is None else round(100 * frac))
        self.query_one("#run-text", Static).update(run_text(progress, outcome, now, self.app.cancelling()))
        self.show_stages(self.app.pipeline_stages, self.app.pipeline_stages_error)

    def _tick(self) -> None:
        if self.app.run_progress is not None:  # elapsed and ETA move on between progress messages
            self.show_run(self.app.run_progress, self.app.run_outcome)

    def add_pipeline_log_lines(self, lines: list[str], reset: bool) -> None:
        log = self.query_one(Log)
        if reset:
            log.clear()
        log.write_lines(lines)
