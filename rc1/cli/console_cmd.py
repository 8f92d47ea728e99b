"""`rc1 console [--config P]`: the Textual operator console (rc1.console)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from rc1.cli.common import workspace


def register(app: typer.Typer) -> None:
    @app.command("console")
    def console(
        config: Annotated[Optional[str], typer.Option("--config", help="run config (workspace-relative) for the pipeline, gates and training; default: the one the machine last ran with, else configs/local.yaml")] = None,
    ) -> None:
        """Open the operator console: run the pipeline (p next stage, P all, c cancel), the state machine and its
        gate checks, reports and plots, live training, and the actions (advance, train, stop, resume, failpack, SYNC)."""
        from rc1.console.app import make_app

        ws = workspace()
        if config is not None and not ws.path(config).is_file():
            from rc1.runtime.errors import ConfigError

            raise ConfigError(f"--config {config}: no such file in the workspace")
        make_app(ws, config).run()
