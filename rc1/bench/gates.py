"""`rc1 bench gates`: the gates' operating characteristic. Broken runs must be refused by the check named for
them; healthy runs (`rc1 bench seeds`) must pass.

Each broken case is the run config with one change, run through `rc1 pipeline` in a workspace of its own
(reports/bench/gates/<case>/, the repository's configs/ and templates/ copied in: each case has its own
gated machine), and judged by which gate refused it and on which check:

  drift       engine.lr x 20                         training_done: the drift bound (rc1 drift)
  no-change   engine.lr x 1e-6: the checkpoint is    rc1_eval: the held-out success delta
              the base model to fp32 rounding
  no-level    every task's ladder cut to the top rung  round2: the difficulty fit keeps no level
              the config fits, which the model cannot
              solve
  hacking     a reward that pays format and style      training_done: the reward/success divergence
              only: reward.pay_success false, the      alerts (the reward rises while verified success
              correctness dimension's weight 0, the    does not)
              shaping counted in every group

A case is DETECTED when the pipeline stopped at the expected gate with the expected check failing; a case
refused elsewhere, or passed, is a miss and the report says where it went. `--max-steps` shortens the broken
runs, but the learning-signal gate scales its expected informative groups with the planned steps: on the
laptop profile 30 steps are refused at round 2 before training (measured), so keep enough steps for it. Healthy runs are measured by
`rc1 bench seeds` (each seed's gates and the pooled RC1 verdict); `--healthy-seeds N` runs it here too, in
its own workspace, and counts every refusal of a healthy seed as a false refusal.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from dataclasses import dataclass

from rc1.config.load import load_train_config, read_mapping
from rc1.runtime.atomic import atomic_write_text
from rc1.runtime.errors import ConfigError
from rc1.runtime.interrupt import run_child


@dataclass(frozen=True)
class Case:
    name: str
    what: str
    gate: str           # the gate that must refuse it
    check: str          # a substring of the check that must fail
    change: object      # (config mapping, loaded config, case workspace) -> None: edits the mapping in place


def _lr(factor: float):
    def change(data: dict, cfg, sub) -> None:
        data.setdefault("engine", {})["lr"] = cfg.engine.lr * factor
    return change


def _top_rungs(data: dict, cfg, sub) -> None:
    """Each task's ladder cut to the top rung the config fits (its difficulty_fit.levels range; the ladder's
    own top where it sets none)."""
    from rc1.data.ladder import LADDER

    top = {t: cfg.difficulty_fit.levels[t][1] if t in cfg.difficulty_fit.levels else LADDER[t][-1].n
           for t, w in cfg.datasets.mix.items() if w > 0 and t in LADDER}
    levels = {t: [n, n] for t, n in top.items()}
    data.setdefault("difficulty_fit", {})["levels"] = levels


def _shaping_only(data: dict, cfg, sub) -> None:
    """The reward pays no success: I[success] dropped, the correctness dimension's weight 0 (the other six
    share its weight), the shaping counted in every rollout group."""
    from rc1.config.load import read_mapping

    src = read_mapping(sub.path(cfg.reward.weights), cfg.reward.weights)
    w = dict(src["weights"])
    freed, w["correctness"] = w.get("correctness", 0.0), 0.0
    others = [d for d in w if d != "correctness"]
    w.update({d: w[d] + freed / len(others) for d in others})
    rel = "configs/weights_bench_hacking.json"
    atomic_write_text(sub.path(rel), json.dumps({**src, "weights": w, "note": "rc1 bench gates --case hacking: "
                                                 "no weight on correctness"}, indent=2) + "\n")
    data.setdefault("reward", {}).update({"pay_success": False, "shaping_groups": "all", "weights": rel})


CASES = {c.name: c for c in (
    Case("drift", "engine.lr x 20", "training_done", "drift vs bound", _lr(20.0)),
    Case("no-change", "engine.lr x 1e-6 (the checkpoint is the base model)", "rc1_eval", "success delta", _lr(1e-6)),
    Case("no-level", "every task's ladder cut to its top rung", "round2", "tasks with a level in the band", _top_rungs),
    Case("hacking", "a reward that pays only format and style (reward.pay_success false, correctness weight 0)",
         "training_done", "divergence alerts", _shaping_only),
)}


def fresh_workspace(ws, name: str):
    """An empty workspace reports/bench/gates/<name>/ holding copies of the repository's configs, templates and
    examples: each case runs its own gated machine."""
    from rc1.runtime.workspace import Workspace

    root = ws.path(f"reports/bench/gates/{name}")
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    for folder in ("configs", "templates", "examples"):
        if ws.path(folder).is_dir():
            shutil.copytree(ws.path(folder), root / folder)
    return Workspace(root)


def case_workspace(ws, config: str, case: Case, max_steps: int | None = None):
    """A fresh workspace for `case` with the repository's configs and templates and the changed config (and
    `max_steps` training steps when given: a shorter broken run, which can only drift less); returns
    (workspace, config path inside it)."""
    sub = fresh_workspace(ws, case.name)
    cfg = load_train_config(config, ws)
    if case.gate == "training_done" and cfg.effective_target_kl is None:
        raise ConfigError(f"{config}: the drift case needs a target_kl (the drift bound is kl_tolerance x target_kl)")
    data = read_mapping(ws.path(config), config)
    case.change(data, cfg, sub)
    if max_steps is not None:
        data["steps"] = max_steps
        run_section = data.setdefault("run", {})
        run_section["max_steps"] = max_steps
        run_section["save_steps"] = min(max_steps, int(run_section.get("save_steps") or max_steps))
    import yaml

    rel = f"configs/bench_gates_{case.name}.yaml"
    atomic_write_text(sub.path(rel), f"# {config} with {case.what}: `rc1 bench gates --case {case.name}`\n"
                      + yaml.safe_dump(data, sort_keys=False))
    load_train_config(rel, sub)  # the changed config must be valid: a case that cannot load tests nothing
    return sub, rel


def verdict(sub, case: Case, exit_code: int) -> dict:
    """Where the pipeline of `case` stopped, and whether that is the expected refusal."""
    from rc1.machine.service import last_gate_reports

    failing = {gate: [c.get("name") for r in doc.get("results", [doc]) for c in r.get("checks", [])
                      if c.get("status") == "fail"]
               for gate, doc in last_gate_reports(sub).items()}
    failing = {g: names for g, names in failing.items() if names}
    hit = exit_code != 0 and any(case.check in n for n in failing.get(case.gate, []))
    return {"case": case.name, "what": case.what, "expected": f"{case.gate}: {case.check}", "pipeline_exit": exit_code,
            "detected": hit, "failing": failing}


def run(ws, quick: bool = False, config: str = "configs/local.yaml", cases: list[str] | None = None,
        healthy_seeds: int = 0, max_steps: int | None = None) -> dict:
    names = cases or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        raise ConfigError(f"--case {', '.join(unknown)}: unknown; known: {', '.join(CASES)}")
    out: dict = {"config": config, "cases": [], "max_steps": max_steps}
    for name in names:
        case = CASES[name]
        sub, rel = case_workspace(ws, config, case, max_steps)
        print(f"rc1 bench gates: {name} ({case.what}) in {ws.rel(sub.root)}: rc1 pipeline --config {rel}", flush=True)
        t0 = time.time()
        code = run_child([sys.executable, "-m", "rc1.cli.main", "--workdir", str(sub.root), "pipeline", "--config", rel])
        row = {**verdict(sub, case, code), "seconds": round(time.time() - t0, 1)}
        out["cases"].append(row)
        print(f"  {name}: {'DETECTED' if row['detected'] else 'MISSED'} (expected {row['expected']}; pipeline exit "
              f"{row['pipeline_exit']}; failing: {json.dumps(row['failing'])})", flush=True)
    out["detected"] = sum(r["detected"] for r in out["cases"])
    if healthy_seeds:
        from rc1.bench import seeds as seeds_bench

        healthy = seeds_bench.run(fresh_workspace(ws, "healthy"), config=config, seeds=healthy_seeds)
        refusals = {g: v["failing"] for g, v in (healthy.get("gates") or {}).items() if v["failing"]}
        out["healthy"] = {"seeds": healthy["seeds"], "pipeline_exit": healthy["pipeline_exit"],
                          "summary": healthy.get("summary"), "drift": healthy.get("drift"), "refusals": refusals,
                          "false_refusals": len(refusals)}
    print(f"broken runs detected: {out['detected']} of {len(out['cases'])}"
          + (f"; healthy seeds {healthy_seeds}: {out['healthy']['false_refusals']} gate(s) refused"
             if healthy_seeds else ""), flush=True)
    return out
