"""Running rc1 from tests: the repository root, the `rc1` command line, the Typer app in-process, and a
workspace holding the repository's templates (a plain module; conftests and tests import it)."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def rc1_cmd() -> list[str]:
    """The installed `rc1` script beside this interpreter, else `python -m rc1.cli.main`."""
    exe = shutil.which("rc1", path=os.path.dirname(sys.executable))
    return [exe] if exe else [sys.executable, "-m", "rc1.cli.main"]


def run_cli(ws, *args):
    """`rc1 --workdir <ws> ARGS` through Typer's CliRunner (in-process)."""
    from typer.testing import CliRunner

    from rc1.cli.main import app

    return CliRunner().invoke(app, ["--workdir", str(ws.root), *args])


def new_ws(root: Path):
    """A workspace at `root` with the repository's templates/ copied in."""
    from rc1.runtime.workspace import Workspace

    shutil.copytree(REPO / "templates", root / "templates")
    return Workspace(root).ensure()
