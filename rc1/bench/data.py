"""`rc1 bench data`: wall and CPU time of the data pipeline at production size.

Steps (each in a scratch workspace under reports/bench/data_ws, removed afterwards):
build 30k, validate 30k (diversity + dedup + leak vs the 245-item shadow set), difficulty
metrics + bucketize + validate on 30k, and validate 300k (skipped with quick) whose time should be
<= 12x the 30k validation (near-linear). Targets are for 2 free cores; the CPU column shows how
much of the wall time was this process when the machine is shared.
"""

from __future__ import annotations

import os
import resource
import shutil
import time
from pathlib import Path

from rc1.runtime.workspace import Workspace

TARGET_S = 30.0
SCALE_MAX = 12.0


def _cpu() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def _timed(rows: list, name: str, fn, target: float | None):
    w0, c0 = time.perf_counter(), _cpu()
    out = fn()
    wall, cpu = time.perf_counter() - w0, _cpu() - c0
    rows.append({"step": name, "wall_s": round(wall, 2), "cpu_s": round(cpu, 2),
                 "target_s": target, "ok": None if target is None else wall <= target})
    return out


def _templates(ws: Workspace, given: str | None) -> Path:
    for cand in (given, ws.path("templates/pack_v2"), Path(__file__).resolve().parents[2] / "templates" / "pack_v2"):
        if cand and Path(cand).is_dir():
            return Path(cand)
    raise FileNotFoundError("templates/pack_v2 not found; pass --templates-dir PATH")


def run(ws: Workspace, quick: bool = False, *, n: int | None = None, big: int | None = None,
        templates_dir: str | None = None, scratch: str = "reports/bench/data_ws", keep: bool = False) -> dict:
    """n: pool size (default 30000, quick 3000); big: the near-linear scaling pool (default 10 x n, quick none);
    scratch: the scratch workspace (removed afterwards unless keep)."""
    from rc1.config.gates import GatesConfig
    from rc1.data.pipeline import (bucketize_file, build_pool_file, difficulty_metrics_file, make_shadow_set,
                                   validate_difficulty_file, validate_pool_file)
    from rc1.data.pool import BuildParams
    from rc1.data.tokens import get_counter

    n = int(n or (3000 if quick else 30000))
    big = int(big if big is not None else (0 if quick else 10 * n))
    templates = _templates(ws, templates_dir)
    scratch = Workspace(ws.path(scratch))
    shutil.rmtree(scratch.root, ignore_errors=True)
    scratch.ensure()
    gates = GatesConfig()
    tok = get_counter().name  # load the tokenizer once, outside the timings
    # a fresh token-count cache: every validate step tokenizes cold; the difficulty step then reuses
    # the counts its validate step made (as `validate-pool` then `difficulty metrics` do in the pipeline)
    old_cache = os.environ.get("RC1_TOKEN_CACHE")
    os.environ["RC1_TOKEN_CACHE"] = str(scratch.path("token_cache"))
    rows: list[dict] = []
    try:
        params = lambda k, seed: BuildParams(n=k, templates_dir=templates, seed=seed)  # noqa: E731
        build = _timed(rows, f"build {n}", lambda: build_pool_file(scratch, params(n, 20250821), "pool.jsonl"), TARGET_S)
        build_pool_file(scratch, params(n, 1), "v1.jsonl", version="v1")
        make_shadow_set(scratch, templates_dir=templates, out="shadow.jsonl", manifest="shadow_manifest.json")
        rep = _timed(rows, f"validate {n}", lambda: validate_pool_file(
            scratch, "pool.jsonl", shadow="shadow.jsonl", v1="v1.jsonl", report="div.json", th=gates.pool), TARGET_S)

        def difficulty():
            difficulty_metrics_file(scratch, "pool.jsonl", "metrics.jsonl")
            bucketize_file(scratch, "metrics.jsonl", "balanced.jsonl")
            return validate_difficulty_file(scratch, "metrics.jsonl", "balanced.jsonl", report="diff.json",
                                            th=gates.difficulty)
        drep = _timed(rows, f"difficulty {n} (metrics+bucketize+validate)*", difficulty, TARGET_S)
        result = {"n": n, "tokenizer": tok, "cores": os.cpu_count(), "build_workers": build["workers"],
                  "load_avg_1m": os.getloadavg()[0], "pool_passed": rep["passed"], "difficulty_passed": drep["passed"]}
        if big:
            build_pool_file(scratch, params(big, 20250822), "big.jsonl")
            v30 = rows[1]["wall_s"]
            _timed(rows, f"validate {big}", lambda: validate_pool_file(
                scratch, "big.jsonl", shadow="shadow.jsonl", v1="v1.jsonl", report="div_big.json", th=gates.pool),
                SCALE_MAX * v30)
            result["scale_ratio"] = round(rows[-1]["wall_s"] / v30, 2)
            result["scale_ratio_cpu"] = round(rows[-1]["cpu_s"] / max(rows[1]["cpu_s"], 1e-9), 2)
    finally:
        if old_cache is None:
            os.environ.pop("RC1_TOKEN_CACHE", None)
        else:
            os.environ["RC1_TOKEN_CACHE"] = old_cache
        if not keep:
            shutil.rmtree(scratch.root, ignore_errors=True)
    result["steps"] = rows
    print(f"data bench (tokenizer: {tok}; load avg {result['load_avg_1m']:.1f} on {result['cores']} cores)")
    print(f"{'step':<48}{'wall s':>9}{'cpu s':>9}{'target':>9}  ok")
    for r in rows:
        tgt = "" if r["target_s"] is None else f"{r['target_s']:.0f}"
        print(f"{r['step']:<48}{r['wall_s']:>9.2f}{r['cpu_s']:>9.2f}{tgt:>9}  {'-' if r['ok'] is None else ('yes' if r['ok'] else 'NO')}")
    print("* token counts reused from the validate step (same pool sha256 and tokenizer)")
    if "scale_ratio" in result:
        print(f"validate {big} / validate {n}: {result['scale_ratio']}x wall, {result['scale_ratio_cpu']}x cpu (<= {SCALE_MAX:g}x)")
    return result
