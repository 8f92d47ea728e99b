"""Running rc1 as the operator does in the distributed tests: the real CLI in a subprocess (so its ranks are
real processes), the run's outputs read back."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

from safetensors.torch import load_file

REPO = Path(__file__).resolve().parents[2]


def rc1(ws, *args, timeout: float = 600, check: bool = False) -> subprocess.CompletedProcess:
    """`rc1 --workdir <ws> <args>` in a subprocess running this checkout."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    res = subprocess.run([sys.executable, "-m", "rc1.cli.main", "--workdir", str(ws.root), *map(str, args)],
                         capture_output=True, text=True, timeout=timeout, env=env, cwd=str(ws.root))
    if check:
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-5000:]
    return res


def metrics(ws) -> list[dict]:
    return [json.loads(line) for line in ws.metrics_path.read_text().splitlines() if line.strip()]


def final_weights(ws, run_dir: str = "checkpoints/t") -> dict:
    from rc1.runtime.checkpoint import read_latest

    latest = read_latest(ws.path(run_dir))
    (f,) = [p for p in latest.iterdir() if p.suffix == ".safetensors"]
    return load_file(str(f))


def max_abs_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys() and a
    return max(float((a[k].double() - b[k].double()).abs().max()) for k in a)


def wait_for(condition, timeout: float, what: str, interval: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")


def run_in_process(ws, config, **kwargs):
    """One process, the recipe `rc1 train` builds (no gates: the reference run of a comparison)."""
    from rc1.config.load import load_train_config
    from rc1.training.base import make_recipe

    recipe = make_recipe(ws, load_train_config(config, ws), config_path=str(config), **kwargs)
    recipe.setup()
    recipe.train()
    recipe.cleanup()
    return recipe
