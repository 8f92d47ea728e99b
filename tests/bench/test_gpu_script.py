"""scripts/gpu_check.sh, the device check a short GPU loan runs: it is valid bash, and every rc1 command line it
invokes (on CUDA and in its CPU smoke mode) names commands and options rc1 has. Its smoke mode itself takes ~30 s
on the dev machine (two bench processes and a model build), too long for the suite; run it by hand with
`GPU_CHECK_DEVICE=cpu scripts/gpu_check.sh`."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from rc1.cli.main import app

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_check.sh"


def test_the_script_is_valid_bash_that_stops_on_errors():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)
    assert "set -euo pipefail" in SCRIPT.read_text()


@pytest.mark.parametrize("device", ["cuda", "cpu"])
def test_every_rc1_command_the_script_runs_parses(tmp_path, device):
    env = {**os.environ, "GPU_CHECK_DEVICE": device, "GPU_CHECK_WORK": str(tmp_path)}
    out = subprocess.run(["bash", str(SCRIPT), "commands"], env=env, check=True, capture_output=True, text=True).stdout
    commands = [shlex.split(line) for line in out.splitlines() if line.strip()]
    backends = [c[c.index("--rollout-backend") + 1] for c in commands if "--rollout-backend" in c]
    assert backends == ["paged", "torch"] and commands[-1][:1] == ["pipeline"]
    for args in commands:
        res = CliRunner().invoke(app, [*args, "--help"])   # an unknown command or option exits 2 before the help
        assert res.exit_code == 0, (args, res.output)
    assert (SCRIPT.parents[1] / commands[-1][commands[-1].index("--config") + 1]).is_file()
