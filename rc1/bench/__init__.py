"""Benchmarks behind `rc1 bench <area>`: numbers that check the speed and memory targets, not asserts.

One module per area, each with `run(ws, quick=False, **options) -> dict` that prints a table and
returns the result; `run_area` runs one and writes reports/bench/<area>.json.

  data     the data pipeline at production size (build, validate, difficulty)
  reward   judge cache lookups, calibration time, local judge throughput
  grpo     pure PyTorch engine vs TRL on identical GRPO steps (and, with a 4B-shaped base, s/step on a GPU)
  rollout  completion tok/s of each generation backend (torch, llama.cpp) vs llama.cpp single-stream and the bandwidth limit
  eval     eval episodes/s and generated tokens/s
  console  console ready time, render and key-press latency
  distributed  1 process with accumulation vs N processes: equal parameters, s/step
  micro    step time of run.micro_batch_size vs the whole batch at equal rows (pure engine GRPO)
  memory   peak memory of one GRPO step of a model shape (QLoRA, LoRA, full), measured or extrapolated
  learn    rc1 vs TRL GRPO on the same budget: held-out accuracy against wall time
  seeds    a run config through `rc1 pipeline` at N seeds: each seed's held-out gain with its paired CI
  gates    broken runs (lr x 20, no change, no learnable level) refused by the check named for them
  adapter  a LoRA adapter swap into llama.cpp for a model shape: adapter GGUF write, load and set on a loaded base
"""

from __future__ import annotations

import importlib
from pathlib import Path

AREAS = ("data", "reward", "grpo", "rollout", "eval", "console", "distributed", "micro", "memory", "learn", "seeds",
         "gates", "adapter")


def report_path(ws, area: str) -> Path:
    return ws.reports / "bench" / f"{area}.json"


def run_area(ws, area: str, **options) -> tuple[Path, dict]:
    """Run benchmark `area` with `options` and write its report; returns (report path, result)."""
    from rc1.runtime.atomic import atomic_write_json

    if area not in AREAS:
        raise KeyError(f"unknown benchmark {area!r}; known: {', '.join(AREAS)}")
    module = importlib.import_module(f"rc1.bench.{area}")
    result = module.run(ws, **options)
    return atomic_write_json(report_path(ws, area), result), result
