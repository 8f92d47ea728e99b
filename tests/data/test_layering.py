"""The data core and its gates never import the UI or CLI libraries."""

from __future__ import annotations

import subprocess
import sys


def test_data_core_imports_no_typer_or_textual():
    code = ("import sys; import rc1.data.pipeline, rc1.data.diversity, rc1.data.difficulty, rc1.data.sources, "
            "rc1.data.v1, rc1.bench.data, rc1.gates.pool, rc1.gates.difficulty; "
            "bad = [m for m in ('typer', 'textual', 'click', 'torch') if m in sys.modules]; print(bad); "
            "sys.exit(1 if bad else 0)")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
