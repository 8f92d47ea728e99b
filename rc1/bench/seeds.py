"""`rc1 bench seeds`: one run config trained at several seeds through the main pipeline; each seed's
held-out gain with its paired CI.

`make run` trains configs/local.yaml at one seed, to stay within the 30-minute budget on 2 cores. Early
RL varies a lot by seed, so a learning claim needs three. This benchmark writes the config with `seeds`
extended to N seeds (the config's own seeds first, then the first seed + 10, + 20, ...) to
reports/bench/<name>_seeds<N>.yaml and runs `rc1 pipeline` on it as a subprocess: the same stages, gates
and evidence as `make run`, one training run per seed (each with its own checkpoints), one eval of every
seed against one base pass, and the RC1 report. When a gate after training stops the pipeline (for example
training_done refusing one seed's KL), the benchmark still evaluates every trained seed with `rc1 eval` and
records each gate's failing checks beside the gains: a measurement, not a pass (the command then exits 1, after
writing the report). Run it in a fresh workspace (a clone): the pipeline starts from the data stages there.

The result, from the eval report the pipeline wrote: per seed, base and trained success on the set the
RC1 gate judges (the fitted held-out items when the difficulty fit is on) with the paired bootstrap 95 %
CI of the gain, the same on the shadow set beside it; and, per set, the seeds POOLED as the RC1 gate judges
them (the mean gain with its two-level bootstrap CI over seeds and items) beside the per-seed rows, with
how many seeds' own CIs clear 0 (a count for the reader; the gate judges the pooled CI).
"""

from __future__ import annotations

import sys
import time

from rc1.config.load import load_train_config, read_mapping
from rc1.runtime.atomic import atomic_write_text
from rc1.runtime.errors import ConfigError
from rc1.runtime.interrupt import run_child
from rc1.runtime.layout import EVAL_REPORTS, eval_report_stamp

SEED_STEP = 10


def seed_list(own: list[int], n: int) -> list[int]:
    """The config's own seeds, then its first seed + 10, + 20, ... until there are `n` (never a repeat)."""
    out = list(own[:n])
    k = 1
    while len(out) < n:
        s = own[0] + SEED_STEP * k
        if s not in out:
            out.append(s)
        k += 1
    return out


def derived_config(ws, config: str, n: int) -> tuple[str, list[int]]:
    """Write `config` with `seeds` set to n seeds; returns (its workspace-relative path, the seeds)."""
    import yaml

    cfg = load_train_config(config, ws)  # the config must be valid as it stands
    data = read_mapping(ws.path(config), config)
    seeds = seed_list(cfg.seed_list, n)
    data["seeds"] = seeds
    data.setdefault("run", {})["seed"] = seeds[0]
    name = ws.path(config).stem
    rel = f"reports/bench/{name}_seeds{n}.yaml"
    header = (f"# {config} with seeds {seeds}: written by `rc1 bench seeds --config {config} --seeds {n}`\n")
    atomic_write_text(ws.path(rel), header + yaml.safe_dump(data, sort_keys=False))
    load_train_config(rel, ws)  # and so must the derived one
    return rel, seeds


def summarize(report: dict) -> dict:
    """Per seed and per set (the gate's set first, then the shadow set): base, trained, gain and its CI."""
    from rc1.eval.splits import HELDOUT

    decisive = report.get("heldout_set") or HELDOUT
    out: dict = {"set": decisive, "sets": {}}
    for name in dict.fromkeys((decisive, HELDOUT)):
        if name not in report["results"]:
            continue
        base = report["results"][name]["base"]["success"]
        rows = []
        for run in report["runs"]:
            r = run["results"][name]
            d = r["delta"]["success"]
            rows.append({"seed_index": run["seed_index"], "seed": run["seed"], "n": base["n"],
                         "base": base["rate"], "trained": r["trained"]["success"]["rate"],
                         "delta_pp": d["delta_pp"], "ci95_pp": d["ci95_pp"],
                         "stopped_early": run["training"].get("stopped_early")})
        pooled = ((report.get("pooled") or {}).get(name) or {}).get("success") or {}
        out["sets"][name] = {"majority": report["results"][name]["majority"]["overall"]["rate"], "per_seed": rows,
                             "pooled": {"n": pooled.get("n"), "seeds": pooled.get("seeds"), "base": pooled.get("base"),
                                        "trained": pooled.get("trained"), "delta_pp": pooled.get("delta_pp"),
                                        "ci95_pp": pooled.get("ci95_pp")} if pooled else None}
    rows = out["sets"][decisive]["per_seed"]
    pooled = out["sets"][decisive]["pooled"]
    out["pooled_ci_above_0"] = bool(pooled and pooled["ci95_pp"] and pooled["ci95_pp"][0] > 0)
    out["seeds_with_ci_above_0"] = sum(r["ci95_pp"][0] > 0 for r in rows)
    out["all_seeds_ci_above_0"] = bool(rows) and out["seeds_with_ci_above_0"] == len(rows)
    return out


def _table(summary: dict) -> str:
    lines = []
    for name, s in summary["sets"].items():
        lines.append(f"{name} set (majority-class {s['majority']:.1%}"
                     + (", judged by the RC1 gate)" if name == summary["set"] else ", reported beside it)"))
        lines.append(f"  {'seed':<16} {'n':>4} {'base':>7} {'trained':>8} {'gain':>8}  95% CI")
        for r in s["per_seed"]:
            lo, hi = r["ci95_pp"]
            lines.append(f"  {r['seed_index']} ({r['seed']})".ljust(18) + f" {r['n']:>4} {r['base']:>7.1%} "
                         f"{r['trained']:>8.1%} {r['delta_pp']:>+7.1f}pp  [{lo:+.1f}, {hi:+.1f}]"
                         + ("  STOPPED EARLY" if r["stopped_early"] else ""))
        p = s.get("pooled")
        if p and p["ci95_pp"]:
            lo, hi = p["ci95_pp"]
            lines.append(f"  {'pooled':<16} {p['n']:>4} {p['base']:>7.1%} {p['trained']:>8.1%} {p['delta_pp']:>+7.1f}pp"
                         f"  [{lo:+.1f}, {hi:+.1f}]  (mean of {p['seeds']} seeds, two-level bootstrap)")
    lines.append(f"{summary['seeds_with_ci_above_0']} of {len(summary['sets'][summary['set']]['per_seed'])} seeds "
                 f"with a gain whose CI lower bound is above 0 on the {summary['set']} set; pooled CI lower bound "
                 + ("above 0" if summary.get("pooled_ci_above_0") else "not above 0"))
    return "\n".join(lines)


def _latest_eval(ws, rel: str, seeds: int):
    """(the newest eval report of config `rel` that evaluated `seeds` runs, its path), or (None, None)."""
    import json

    for path in sorted(ws.root.glob(EVAL_REPORTS), key=eval_report_stamp, reverse=True):
        rep = json.loads(path.read_text())
        if (rep.get("config") or {}).get("path") == rel and len(rep.get("runs") or []) == seeds:
            return rep, path
    return None, None


def _gate_verdicts(ws) -> dict:
    """Each gate report's failing checks (reports/gates/*.json), as the pipeline left them."""
    from rc1.machine.service import last_gate_reports

    return {gate: {"failing": [{k: c.get(k) for k in ("name", "measured", "threshold")}
                               for r in doc.get("results", [doc]) for c in r.get("checks", [])
                               if c.get("status") == "fail"]}
            for gate, doc in last_gate_reports(ws).items()}


def run(ws, quick: bool = False, config: str = "configs/local.yaml", seeds: int = 3) -> dict:
    if seeds < 2:
        raise ConfigError(f"--seeds {seeds}: a spread needs at least 2 seeds")
    rel, seed_values = derived_config(ws, config, seeds)
    print(f"rc1 bench seeds: {config} at seeds {seed_values} -> {rel}; running `rc1 pipeline --config {rel}`",
          flush=True)
    t0 = time.time()
    code = run_child([sys.executable, "-m", "rc1.cli.main", "pipeline", "--config", rel], cwd=ws.root)
    wall = time.time() - t0
    result = {"config": config, "derived_config": rel, "seeds": seed_values, "pipeline_exit": code,
              "pipeline_seconds": round(wall, 1)}
    report, path = _latest_eval(ws, rel, seeds)
    if report is None and code != 0:
        # a gate after training (training_done: a seed's KL over its tolerance) stops the pipeline before its
        # eval; the benchmark still measures every seed that trained, and records the refusal beside it
        print(f"rc1 pipeline exited {code}; evaluating every trained seed (`rc1 eval --config {rel}`)",
              flush=True)
        result["eval_after_pipeline_stopped"] = run_child([sys.executable, "-m", "rc1.cli.main", "eval", "--config", rel],
                                                          cwd=ws.root)
        report, path = _latest_eval(ws, rel, seeds)
    result["gates"] = _gate_verdicts(ws)
    if report is None:
        print(f"no eval of every seed of {rel} (pipeline exit {code})", flush=True)
        result["summary"] = None
        return result
    result["eval_report"] = ws.rel(path)
    result["summary"] = summarize(report)
    result["drift"] = drift_rows(ws, seeds)
    print(_table(result["summary"]), flush=True)
    for d in result["drift"]:
        ci = d["per_token_ci"] or [float("nan")] * 2
        bound = "none" if d["bound"] is None else f"{d['bound']:.4g}"
        print(f"drift seed {d['seed_index']}: per-token KL {d['per_token']:.4f} [{ci[0]:.4f}, {ci[1]:.4f}] "
              f"(bound {bound}; step {d['step']})", flush=True)
    if code != 0:  # the table above measures the seeds; it is not a verdict of the run
        refused = sorted(g for g, v in result["gates"].items() if v["failing"])
        print(f"rc1 pipeline exited {code}: gate(s) refused: {', '.join(refused) or 'none recorded'} "
              "(reports/gates/)", flush=True)
    return result


def drift_rows(ws, seeds: int) -> list[dict]:
    """Each seed's drift measurement (rc1 drift, the training_done gate's input), where it was made."""
    import json

    from rc1.eval.drift import drift_report_path

    rows = []
    for i in range(seeds):
        p = ws.path(drift_report_path(i))
        if p.exists():
            rep = json.loads(p.read_text())
            rows.append({"seed_index": i, "step": rep["checkpoint"]["step"], "per_token": rep["per_token"]["mean"],
                         "per_token_ci": rep["per_token"]["ci"], "per_sequence": rep["per_sequence"]["mean"],
                         "bound": rep.get("bound"), "tokens": rep.get("tokens")})
    return rows
