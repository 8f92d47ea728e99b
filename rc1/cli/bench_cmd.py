"""`rc1 bench <area>`: benchmarks that check the speed and memory targets (numbers, not asserts).

Each area lives beside the code it measures, as a module with
`run(ws, **options) -> dict` that prints a table and writes reports/bench/<area>.json.
"""

from __future__ import annotations

import importlib
import json
from typing import Annotated, Optional

import typer

from rc1.cli.common import workspace
from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.errors import ConfigError

BENCHES = {
    "data": "rc1.data.bench",
    "reward": "rc1.rewards.bench",
    "grpo": "rc1.engines.bench",
    "console": "rc1.console.bench",
    "eval": "rc1.eval.bench",
    "distributed": "rc1.bench.distributed",
}


def register(app: typer.Typer) -> None:
    @app.command("bench")
    def bench(
        area: Annotated[str, typer.Argument(help=f"one of: {', '.join(BENCHES)}")],
        quick: Annotated[bool, typer.Option(help="smaller sizes, for a smoke run")] = False,
        option: Annotated[Optional[list[str]], typer.Option("--set", help="KEY=VALUE passed to the benchmark")] = None,
    ) -> None:
        """Run a benchmark and write reports/bench/<area>.json."""
        if area not in BENCHES:
            raise ConfigError(f"unknown benchmark {area!r}; known: {', '.join(BENCHES)}")
        try:
            module = importlib.import_module(BENCHES[area])
        except ModuleNotFoundError as exc:
            raise ConfigError(f"benchmark {area!r} is not available: {exc}") from None
        opts = {}
        for kv in option or []:
            if "=" not in kv:
                raise ConfigError(f"--set {kv!r}: expected KEY=VALUE")
            k, v = kv.split("=", 1)
            opts[k] = json.loads(v) if v[:1] in "0123456789-[{tfn\"" and v not in ("-",) else v
        ws = workspace()
        result = module.run(ws, quick=quick, **opts)
        out = atomic_write_json(ws.reports / "bench" / f"{area}.json", result)
        typer.echo(f"wrote {ws.rel(out)}")
