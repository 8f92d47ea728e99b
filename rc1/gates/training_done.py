"""training -> eval: every seed's run trained, and what ran is what the gates asked for.

Reads each seed run's end record (cfg.seed_run(i).end_file, written by the recipe when a run ends:
rc1.training.base.RecipeBase.end_record) and re-verifies that run's latest checkpoint. It checks
what RAN, not what the config declares:

  verified checkpoint     each seed run's `latest` exists, verifies against its sha256 manifest and is
                          at the step the end record reports
  steps reached           the run completed run.max_steps, or was stopped early (operator, early stop,
                          target_kl): then it is marked STOPPED EARLY, which the RC1 gate refuses
                          unless the operator accepts it (rc1.gates.rc1_eval)
  steps trained           steps trained >= gates.run_config.min_steps, whatever the config says
  seeds trained           distinct seeds with a finished run >= gates.run_config.min_seeds
  finetune method         the method the model trained with (read off the loaded model) is the config's,
                          and the gates' required one when set (production: qlora)
  KL vs target_kl         the mean per-token KL over the run's last monitor.window steps
                          <= training_done.kl_tolerance x target_kl; not measurable when the run
                          measured no KL; not applicable without a target_kl
"""

from __future__ import annotations

import json

from rc1.gates.base import Check, GateContext, GateResult
from rc1.runtime.checkpoint import CheckpointError, META_STEP, read_latest, read_meta, verify_checkpoint
from rc1.runtime.fingerprint import Evidence

COMPLETED = "completed"
EARLY_STOPS = ("operator", "early_stop", "target_kl", "interrupt")
INTERRUPTIONS = ("operator", "interrupt")  # a run stopped from outside: `rc1 resume` continues it


def _read(ws, rel):
    p = ws.path(rel)
    if not p.exists():
        return None
    try:
        return json.loads(p.read_text())
    except json.JSONDecodeError:
        return None


def evaluate(ctx: GateContext) -> GateResult:
    res = GateResult("training_done")
    ws, cfg = ctx.ws, ctx.config
    if cfg is None:
        res.checks.append(Check.unavailable("run config", "no run config known to the machine"))
        return res
    g = ctx.gates
    runs = []
    for i, seed in enumerate(cfg.seed_list):
        sr = cfg.seed_run(i)
        label = f"seed {i} ({seed})"
        end = _read(ws, sr.end_file)
        if end is None:
            res.checks.append(Check(f"{label}: trained", None, "an end record", False,
                                    f"no {sr.end_file}: run `rc1 train --config {ctx.config_path or 'P'} "
                                    f"--seed-index {i}`"))
            continue
        res.evidence.append(Evidence.of(ws, sr.end_file))
        latest = read_latest(ws.path(sr.checkpoint_dir))
        if latest is None:
            res.checks.append(Check(f"{label}: verified checkpoint", None, "exists and verifies", False,
                                    f"no `latest` checkpoint in {sr.checkpoint_dir}"))
            continue
        try:
            verify_checkpoint(latest)
            step = int(read_meta(latest)[META_STEP])
        except CheckpointError as exc:
            res.checks.append(Check(f"{label}: verified checkpoint", ws.rel(latest), "exists and verifies", False,
                                    exc.message))
            continue
        res.evidence.append(Evidence.of(ws, latest / "manifest.json"))
        same = step == end.get("step") and end.get("seed") == seed
        res.checks.append(Check(f"{label}: verified checkpoint", ws.rel(latest), "verifies; its step is the run's",
                                same, f"checkpoint step {step}, end record step {end.get('step')}, "
                                      f"seed {end.get('seed')}"))
        reason = end.get("reason")
        early = bool(end.get("stopped_early", reason != COMPLETED))
        target = cfg.run.max_steps
        if not early:
            res.checks.append(Check(f"{label}: steps reached", step, f">= {target}", step >= target,
                                    f"run ended: {reason}"))
        else:
            ok = reason in EARLY_STOPS
            res.checks.append(Check(f"{label}: steps reached", step, f">= {target} (or stopped early)", ok,
                                    f"STOPPED EARLY ({reason}) at step {step}/{target}: the RC1 gate refuses this "
                                    "run unless the operator accepts it" if ok else f"run ended: {reason}"))
            res.notes.append(f"{label} stopped early ({reason}) at step {step}/{target}")
        res.checks.append(Check.at_least(f"{label}: steps trained", step, g.run_config.min_steps,
                                         "steps the run actually trained (gates.run_config.min_steps)"))
        method = end.get("finetune_method")
        want = g.run_config.finetune_method
        ok = method == cfg.finetune.method and (want is None or method == want)
        res.checks.append(Check(f"{label}: finetune method", method,
                                f"== {cfg.finetune.method!r}" + (f" (gates: {want!r})" if want else ""), ok,
                                "read off the model that trained"))
        res.checks.append(_kl_check(label, end, cfg, g))
        runs.append(seed)
    res.checks.append(Check.at_least("seeds trained", len(set(runs)), g.run_config.min_seeds,
                                     f"seeds with a finished, verified run: {runs} of {cfg.seed_list}"))
    return res


def _kl_check(label: str, end: dict, cfg, g) -> Check:
    name = f"{label}: KL vs target_kl"
    target = cfg.effective_target_kl
    kl = end.get("kl") or {}
    if target is None:
        return Check.not_applicable(name, "the config sets no target_kl")
    measured = kl.get("last_window_mean")
    tol = g.training_done.kl_tolerance
    threshold = f"<= {tol:g} x target_kl {target:g} = {tol * target:.4g}"
    if measured is None:
        return Check.not_measurable(name, threshold, "the run measured no KL toward the reference policy")
    return Check(name, round(float(measured), 6), threshold, measured <= tol * target,
                 f"mean per-token KL (k3, nats) over the last {kl.get('last_window')} steps; run mean "
                 f"{kl.get('mean')}, max {kl.get('max')}; control: {kl.get('control')}")
