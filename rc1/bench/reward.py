"""`rc1 bench reward`: judge cache lookups/s, calibration time, judge throughput vs the local server.

Targets (issue 4): cache lookups >= 10k/s; calibration on 245 x 7 with 5-fold CV and 200
bootstrap resamples <= 10 s; judge throughput against the local llama.cpp server reported at
concurrency 1 and 4 (the server is started for the benchmark and stopped after, unless one runs).
Options: --no-judge (skip the server part), --judge-items N.
"""

from __future__ import annotations

import os
import random
import tempfile
import time
from pathlib import Path

import numpy as np

from rc1.runtime.workspace import Workspace


def bench_cache(n_keys: int, lookups: int) -> dict:
    from rc1.judge.cache import JudgeStore, cache_key

    with tempfile.TemporaryDirectory() as d, JudgeStore(Path(d) / "bench.sqlite") as store:
        keys = [cache_key("http://127.0.0.1:1/v1", "m", [{"role": "user", "content": f"q{i}"}],
                          {"temperature": 0.7, "max_tokens": 8, "sample": i % 3}, "bench") for i in range(n_keys)]
        t0 = time.perf_counter()
        for k in keys:
            store.put(k, "7", {"prompt_tokens": 50, "completion_tokens": 1})
        put_s = time.perf_counter() - t0
        rng = random.Random(0)
        probe = [keys[rng.randrange(n_keys)] if i % 2 else f"miss-{i}" for i in range(lookups)]
        t0 = time.perf_counter()
        hits = sum(store.get(k) is not None for k in probe)
        get_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        for i in range(min(lookups, 2000)):
            cache_key("http://127.0.0.1:1/v1", "m", [{"role": "user", "content": f"q{i}"}], {"t": 0.7}, "bench")
        key_s = (time.perf_counter() - t0) / min(lookups, 2000)
    return {"keys": n_keys, "lookups": lookups, "hit_rate": hits / lookups, "lookups_per_s": lookups / get_s,
            "inserts_per_s": n_keys / put_s, "key_hash_us": key_s * 1e6, "target_lookups_per_s": 10000,
            "meets_target": lookups / get_s >= 10000}


def bench_calibration(n: int = 245, folds: int = 5, bootstrap: int = 200) -> dict:
    from rc1.rewards.calibrate import calibrate_arrays

    rng = np.random.default_rng(0)
    X = rng.random((n, 7))
    y = np.clip(X @ np.array([0.45, 0.15, 0.1, 0.1, 0.05, 0.05, 0.1]) + rng.normal(0, 0.05, n), 0, 1)
    t0 = time.perf_counter()
    r = calibrate_arrays(X, y, np.full(7, 1 / 7), folds=folds, bootstrap=bootstrap)
    s = time.perf_counter() - t0
    return {"n": n, "dims": 7, "folds": folds, "bootstrap": bootstrap, "lambda_grid": len(r["cv"]),
            "seconds": s, "target_s": 10.0, "meets_target": s <= 10.0}


def bench_judge(ws: Workspace, items: int) -> dict:
    from rc1.config.schema import ScorerSection
    from rc1.judge.client import JudgeClient
    from rc1.judge.server import judge_server, running_judge
    from rc1.judge.probe import probe_items

    out = {}
    with tempfile.TemporaryDirectory() as d:
        tmp_ws = Workspace(Path(d))
        running = running_judge(ws)
        ctx = judge_server(tmp_ws) if running is None else None
        info = ctx.__enter__() if ctx else running
        try:
            if running is not None:  # reuse the operator's server: point a temp pid file at it
                from rc1.runtime.atomic import atomic_write_json
                from rc1.runtime.layout import JUDGE_SERVER_STATE

                atomic_write_json(tmp_ws.path(JUDGE_SERVER_STATE), running)
            for conc in (1, 4):
                scorer = ScorerSection(provider="local", samples=1, concurrency=conc, max_tokens=4,
                                       cache_path=f"reports/bench_cache_{conc}.sqlite")
                pairs = [(it, resp) for it, resp, _ in probe_items(items, seed=1000 + conc)]
                with JudgeClient(tmp_ws, scorer, stats_path=None) as client:
                    t0 = time.perf_counter()
                    scores = client.score_many(pairs)
                    wall = time.perf_counter() - t0
                    st = client.stats()
                out[f"concurrency_{conc}"] = {
                    "requests": items, "wall_s": wall, "requests_per_s": items / wall,
                    "latency_p50_s": st["latency_p50_s"], "latency_p95_s": st["latency_p95_s"],
                    "tokens_per_s": st["billable_tokens"] / wall, "graded": sum(s.ok for s in scores)}
        finally:
            if ctx:
                ctx.__exit__(None, None, None)
    out["server"] = {"model": info["model"], "gguf": os.path.basename(info.get("gguf", ""))}
    return out


def run(ws: Workspace, quick: bool = False, judge: bool = True, judge_items: int | None = None, **_opts) -> dict:
    result = {"cache": bench_cache(2000 if quick else 20000, 5000 if quick else 50000),
              "calibration": bench_calibration(bootstrap=50 if quick else 200)}
    if judge:
        result["judge"] = bench_judge(ws, judge_items or (4 if quick else 12))
    c, k = result["cache"], result["calibration"]
    print(f"{'metric':38s} {'value':>12s}  target")
    print(f"{'cache lookups/s':38s} {c['lookups_per_s']:12.0f}  >= 10000 {'ok' if c['meets_target'] else 'MISS'}")
    print(f"{'cache inserts/s (commit each)':38s} {c['inserts_per_s']:12.0f}")
    print(f"{'calibration 245x7 CV5 boot' + str(k['bootstrap']) + ' (s)':38s} {k['seconds']:12.2f}  <= 10 "
          f"{'ok' if k['meets_target'] else 'MISS'}")
    for conc in (1, 4):
        j = result.get("judge", {}).get(f"concurrency_{conc}")
        if j:
            print(f"{'judge req/s, concurrency ' + str(conc):38s} {j['requests_per_s']:12.2f}  "
                  f"(p50 {j['latency_p50_s']:.2f}s p95 {j['latency_p95_s']:.2f}s)")
    return result
