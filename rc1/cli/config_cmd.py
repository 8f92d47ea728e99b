"""`rc1 config verify`: validate a train, gates or weights config; every error as a dotted path.

`--smoke` also runs one optimizer step of a train config's engine, strategy, accumulation, finetune
method and precision on random:qwen3-tiny in a temporary workspace (rc1.training.smoke); exit 2 with
the reason when that step cannot run. The workspace is only read."""

from __future__ import annotations

from typing import Annotated

import typer

from rc1.cli.common import command_group, workspace


def register(app: typer.Typer) -> None:
    config_app = command_group(app, "config", "Validate configs.")

    @config_app.command("verify")
    def verify(
        config: Annotated[str, typer.Option("--config", "-c", help="config path (relative to the workspace)")],
        write_effective: Annotated[bool, typer.Option(help="write reports/config_effective.yaml for a train config")] = False,
        smoke: Annotated[bool, typer.Option(help="also run one optimizer step of the config's engine/strategy "
                                                 "on random:qwen3-tiny, in a temporary directory")] = False,
    ) -> None:
        """Exit 0 if the config (and the gates/weights files it names) is valid and this machine can run its
        distributed settings, else 2 with every error."""
        from rc1.config.load import config_hash, verify_config_file, write_effective_config

        from rc1.runtime.errors import ConfigError

        ws = workspace()
        kind, model = verify_config_file(config, ws)
        if kind == "train":  # what this machine cannot run fails here, not mid-run (DeepSpeed, FSDP2, NCCL, cores)
            from rc1.runtime.distributed import machine_errors

            errors = machine_errors(model)
            if errors:
                raise ConfigError(f"{config}: {len(errors)} setting(s) this machine cannot run", lines=errors)
        typer.echo(f"ok: {config} is a valid {kind} config")
        if kind == "train":
            typer.echo(f"config sha256: {config_hash(model)}")
            if write_effective:
                out = write_effective_config(ws, model, config)
                typer.echo(f"wrote {ws.rel(out)}")
        if smoke and kind != "train":
            typer.echo(f"smoke: nothing to run, {config} is a {kind} config")
        elif smoke:
            from rc1.training.smoke import run_smoke

            report = run_smoke(ws, config)
            for line in report.lines:
                typer.echo(f"  {line}")
            typer.echo(f"smoke: ok, one optimizer step of {config} ran (in a temporary directory)")
