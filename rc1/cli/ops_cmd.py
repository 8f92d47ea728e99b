"""`rc1 failpack` and `rc1 sync export`."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from rc1.cli.common import command_group, workspace


def register(app: typer.Typer) -> None:
    @app.command("failpack")
    def failpack() -> None:
        """Pack logs/, reports/, configs/ into reports/FAIL_<ts>.tgz with secrets redacted."""
        from rc1.runtime.failpack import make_failpack

        ws = workspace()
        typer.echo(f"wrote {ws.rel(make_failpack(ws))}")

    sync_app = command_group(app, "sync", "SYNC hand-off files.")

    @sync_app.command("export")
    def export(round_n: Annotated[Optional[int], typer.Option("--round", help="round number (default: from the state)")] = None) -> None:
        """Write reports/sync/SYNC_round<N>.json from the real state, artifacts and blockers."""
        from rc1.machine.sync import export_sync

        ws = workspace()
        typer.echo(f"wrote {ws.rel(export_sync(ws, round_n))}")
