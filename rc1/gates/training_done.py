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
  drift vs bound          the trained policy's per-token KL to the reference, measured on fixed prompts
                          after training (rc1.eval.drift, `rc1 drift`: exact KL over the vocabulary, a
                          prompt-level bootstrap CI) for the run's current latest checkpoint: refused only
                          when the CI's LOWER bound exceeds training_done.kl_tolerance x target_kl; a point
                          estimate above the bound with the CI reaching under it passes with a warning.
                          Not applicable without a target_kl. The training-stream KL (k3, last steps) is
                          reported beside it, never judged: its few steps of heavy-tailed k3 made the
                          verdict on a healthy run chance.
  divergence alerts       the run raised no reward/success divergence alert (reward rose while verified
                          success did not: reward hacking), or the operator accepted this very run's alerts
                          (`rc1 advance --to eval --accept-divergence "why"`, an audit-log entry naming the
                          end record by sha256)
"""

from __future__ import annotations

import json

from rc1.gates.base import Check, GateContext, GateResult
from rc1.runtime.checkpoint import CheckpointError, META_STEP, read_latest, read_meta, verify_checkpoint
from rc1.runtime.fingerprint import Evidence
from rc1.runtime.fmt import fmt_num

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
        res.checks.append(_drift_check(label, ws, cfg, g, i, latest, end, res,
                                       ws.rel(ctx.config_path) if ctx.config_path else "P"))
        res.checks.append(_divergence_check(label, ws, sr, end))
        runs.append(seed)
    res.checks.append(Check.at_least("seeds trained", len(set(runs)), g.run_config.min_seeds,
                                     f"seeds with a finished, verified run: {runs} of {cfg.seed_list}"))
    return res


def _drift_check(label: str, ws, cfg, g, seed_index: int, latest, end: dict, res: GateResult,
                 config_arg: str) -> Check:
    """The drift bound on the trained policy (rc1.eval.drift's report for the current latest checkpoint)."""
    from rc1.eval.drift import drift_report_path
    from rc1.runtime.checkpoint import MANIFEST_FILE
    from rc1.runtime.fingerprint import read_sidecar, sha256_file

    name = f"{label}: drift vs bound (per-token KL to the reference, CI lower bound)"
    target = cfg.effective_target_kl
    if target is None:
        return Check.not_applicable(name, "the config sets no target_kl")
    td = g.training_done
    bound = td.kl_tolerance * target
    threshold = f"<= {td.kl_tolerance:g} x target_kl {target:g} = {bound:.4g} (95% CI lower bound)"
    rel = drift_report_path(seed_index)
    fix = f"run `rc1 drift --config {config_arg} --seed-index {seed_index}`"
    path = ws.path(rel)
    if not path.exists():
        return Check(name, None, threshold, False, f"no drift measurement {rel}: {fix}")
    digest = sha256_file(path)
    if read_sidecar(path) != digest:
        return Check(name, None, threshold, False, f"{rel}: its sha256 sidecar is missing or differs (written "
                                                   f"partly or edited): {fix}")
    res.evidence.append(Evidence(rel, digest))
    try:
        rep = json.loads(path.read_text())
        ck, tok = rep["checkpoint"], rep["per_token"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return Check(name, None, threshold, False, f"{rel}: not a drift report: {fix}")
    if ck.get("manifest_sha256") != sha256_file(latest / MANIFEST_FILE):
        return Check(name, None, threshold, False, f"{rel} measured {ck.get('path')}, not the current latest "
                                                   f"{ws.rel(latest)}: {fix}")
    n = (rep.get("prompts") or {}).get("n", 0)
    if n < td.drift_prompts or rep.get("samples_per_prompt", 0) < td.drift_samples:
        return Check(name, None, threshold, False, f"{rel} measured {n} prompts x {rep.get('samples_per_prompt')} "
                                                   f"answers; the gate asks for {td.drift_prompts} x "
                                                   f"{td.drift_samples}: {fix}")
    ci, point = tok.get("ci"), tok.get("mean")
    if point is None or not ci:
        return Check.not_measurable(name, threshold, f"{rel}: no CI ({rep.get('tokens')} tokens over {n} prompts)")
    stream = (end.get("kl") or {})
    detail = (f"point estimate {point:.4f} nats/token, {round(100 * tok.get('confidence', 0.95))}% CI "
              f"[{ci[0]:.4f}, {ci[1]:.4f}] ({tok.get('ci_method')}); per sequence {rep['per_sequence']['mean']:.3f} "
              f"nats; {n} prompts x {rep.get('samples_per_prompt')} answers at T={rep.get('temperature')}, "
              f"{rep.get('tokens')} tokens, step {ck.get('step')}; training stream (k3, not judged): last "
              f"{stream.get('last_window')} steps {fmt_num(stream.get('last_window_mean'), 4)}, run mean "
              f"{fmt_num(stream.get('mean'), 4)}, control {stream.get('control')}")
    if ci[0] > bound:
        return Check(name, round(ci[0], 6), threshold, False, f"the trained policy drifted beyond the bound: {detail}")
    if point > bound:
        res.notes.append(f"{label}: WARNING drift point estimate {point:.4f} is above the bound {bound:.4g}, its CI "
                         f"[{ci[0]:.4f}, {ci[1]:.4f}] reaches under it: not refused")
        return Check(name, round(ci[0], 6), threshold, True, f"WARNING point estimate above the bound, CI reaches "
                                                             f"under it: {detail}")
    return Check(name, round(ci[0], 6), threshold, True, detail)


def _divergence_check(label: str, ws, sr, end: dict) -> Check:
    """No reward/success divergence alert in the run, or the operator's audited acceptance of this run's."""
    from rc1.eval.runs import ACCEPT_DIVERGENCE, acceptance_for, divergence_alerts, read_end

    name = f"{label}: reward/success divergence alerts"
    alerts = divergence_alerts(end)
    if not alerts:
        return Check(name, 0, "0 alerts (or accepted by the operator)", True,
                     "the reward never rose while verified success stayed flat (monitor window)")
    first = alerts[0]
    what = f"{len(alerts)} alert(s), first at step {first.get('step')}: {first.get('message')}"
    accepted = acceptance_for(ws, sr.checkpoint_dir, read_end(ws, sr.end_file), trigger=ACCEPT_DIVERGENCE)
    if accepted is None:
        return Check(name, len(alerts), "0 alerts (or accepted by the operator)", False,
                     f"{what}: the reward may be hacked; refused unless the operator accepts it: "
                     f'rc1 advance --to eval --accept-divergence "why"')
    return Check(name, f"{len(alerts)}, accepted", "0 alerts (or accepted by the operator)", True,
                 f"{what}; accepted by {accepted.get('operator')} at {accepted.get('time')} (audit log): "
                 f"{accepted.get('why')}")
