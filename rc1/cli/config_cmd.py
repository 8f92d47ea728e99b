"""`rc1 config verify`: validate a train, gates or weights config; every error as a dotted path."""

from __future__ import annotations

from typing import Annotated

import typer

from rc1.cli.common import workspace


def register(app: typer.Typer) -> None:
    config_app = typer.Typer(help="Validate configs.", no_args_is_help=True)
    app.add_typer(config_app, name="config")

    @config_app.command("verify")
    def verify(
        config: Annotated[str, typer.Option("--config", "-c", help="config path (relative to the workspace)")],
        write_effective: Annotated[bool, typer.Option(help="write reports/config_effective.yaml for a train config")] = False,
    ) -> None:
        """Exit 0 if the config (and the gates/weights files it names) is valid and this machine can run its
        distributed settings, else 2 with every error."""
        from rc1.config.load import config_hash, verify_config_file, write_effective_config

        from rc1.runtime.errors import ConfigError

        ws = workspace()
        kind, model = verify_config_file(config, ws)
        if kind == "train":  # what this machine cannot run fails here, not mid-run (DeepSpeed, FSDP2, NCCL, cores)
            from rc1.training.distributed import machine_errors

            errors = machine_errors(model)
            if errors:
                raise ConfigError(f"{config}: {len(errors)} setting(s) this machine cannot run", lines=errors)
        typer.echo(f"ok: {config} is a valid {kind} config")
        if kind == "train":
            typer.echo(f"config sha256: {config_hash(model)}")
            if write_effective:
                out = write_effective_config(ws, model, config)
                typer.echo(f"wrote {ws.rel(out)}")
