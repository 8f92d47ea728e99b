"""`rc1 pipeline --config P`: the main job (`make run`), resumable at any stage."""

from __future__ import annotations

import time
from typing import Annotated

import typer

from rc1.cli.common import workspace


def register(app: typer.Typer) -> None:
    @app.command("pipeline")
    def pipeline(
        config: Annotated[str, typer.Option("--config", "-c", help="run config (relative to the workspace)")] = "configs/local.yaml",
        keep_judge: Annotated[bool, typer.Option(help="leave the local judge server running at the end")] = False,
    ) -> None:
        """Data → scorer → round1/round2 gates → training → eval → RC1 report, with progress bars.

        Started again after an interruption it continues from the current state: finished stages whose
        artifacts still verify are skipped and training resumes from the latest verified checkpoint.
        """
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        from rc1.pipeline import Pipeline
        from rc1.runtime.interrupt import terminate_as_interrupt
        from rc1.runtime.logs import setup_logging

        console = Console()
        pipe = Pipeline.prepare(workspace(), config, echo=console.print, warm_stages=True)
        ws = pipe.ws
        setup_logging(ws, console=False)
        stages = pipe.stages()
        t_start = time.time()
        console.print(f"[bold]rc1 pipeline[/] workspace {ws.root}  config {config}  (log: logs/pipeline.log)")
        try:
            # a SIGTERM (kill PID, a scheduler's stop) takes Ctrl-C's path: the running stage stops cleanly
            # (rc1.runtime.interrupt) instead of running on alone after the pipeline is gone
            with terminate_as_interrupt(), Progress(SpinnerColumn(), TextColumn("{task.description:<32}"), BarColumn(),
                                                    MofNCompleteColumn(), TimeElapsedColumn(), console=console) as progress:
                overall = progress.add_task("pipeline", total=len(stages))
                for stage in stages:
                    if stage.done():
                        progress.console.print(f"  [dim]skip[/] {stage.name} (done, evidence unchanged)")
                        progress.advance(overall)
                        continue
                    task = progress.add_task(stage.name, total=None)
                    pipe.run_stage(stage, progress, task)
                    pipe.save_timings()  # after each stage, so the report stage lists every stage before it
                    progress.update(task, total=1, completed=1)
                    progress.console.print(f"  [green]done[/] {stage.name} ({pipe.timings[stage.name]:.1f} s)")
                    progress.advance(overall)
        finally:
            pipe.timings["total (this invocation)"] = round(time.time() - t_start, 2)
            pipe.save_timings()
            if not keep_judge:
                pipe.stop_judge()
        console.print(f"\n[bold green]pipeline complete[/] in {time.time() - t_start:.0f} s")
        console.print("report:  reports/rc1/rc1_report.md")
        console.print(f"console: rc1 console --config {config}   (or: make console)")
