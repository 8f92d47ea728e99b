"""The `rc1` command: one Typer app; each command group lives in its own module.

Each module in `COMMAND_MODULES` exposes `register(app: typer.Typer) -> None`, which adds its
commands or sub-apps (`app.add_typer`). Heavy imports (torch, transformers) stay inside the
command functions so `rc1 --version` and `rc1 status` start fast.
"""

from __future__ import annotations

import importlib
import sys
from typing import Annotated, Optional

import typer

from rc1 import __version__
from rc1.cli.common import STATE, Rc1Group, run_guarded

COMMAND_MODULES = (
    "rc1.cli.config_cmd",
    "rc1.cli.machine_cmd",
    "rc1.cli.ops_cmd",
    "rc1.cli.data_cmd",
    "rc1.cli.reward_cmd",
    "rc1.cli.judge_cmd",
    "rc1.cli.train_cmd",
    "rc1.cli.eval_cmd",
    "rc1.cli.export_cmd",
    "rc1.cli.console_cmd",
    "rc1.cli.bench_cmd",
    "rc1.cli.pipeline_cmd",
)

app = typer.Typer(
    name="rc1",
    cls=Rc1Group,
    help="Local-first, gated RL post-training for reasoning models.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"rc1 {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    workdir: Annotated[Optional[str], typer.Option("--workdir", "-C", help="workspace (default: $RC1_WORKDIR or cwd)")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="print the version")] = False,
) -> None:
    STATE.workdir = workdir


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main(argv: list[str] | None = None) -> None:
    sys.exit(run_guarded(app, argv))


if __name__ == "__main__":  # pragma: no cover
    main()
