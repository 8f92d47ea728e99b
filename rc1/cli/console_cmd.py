"""`rc1 console [--config P]`: the Textual operator console (rc1.console)."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from rc1.cli.common import workspace


def register(app: typer.Typer) -> None:
    @app.command("console")
    def console(
        config: Annotated[Optional[str], typer.Option("--config", help="run config (workspace-relative) for gates and training")] = None,
    ) -> None:
        """Open the operator console: state machine, gate checks, reports, live training, actions."""
        from rc1.console.app import make_app

        ws = workspace()
        if config is not None and not ws.path(config).is_file():
            from rc1.runtime.errors import ConfigError

            raise ConfigError(f"--config {config}: no such file in the workspace")
        make_app(ws, config).run()
