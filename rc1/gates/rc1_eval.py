"""RC1 gate (eval -> scale_1000): the trained model beats the base model on the held-out set, honestly.

Reads the newest reports/eval_*.json and refuses it unless its sha256 sidecar matches. For every
training run the report evaluated (one per seed), it checks that:

  - the report is for the run's current `latest` checkpoint or its newest best/ copy;
  - the run completed, or it stopped early and the operator accepted that for this very run
    (`rc1 advance --to scale_1000 --accept-early-stop "why"`, an audit-log entry naming the run's end
    record by sha256, rc1.eval.runs);
  - on the held-out set, with thresholds from `gates.eval` (SPEC §3, seeds 003/004):

      overall success delta            CI lower bound > success_delta_pp_gt pp
      trained - majority-class baseline CI lower bound > vs_majority_pp_gt pp (same items)
      needs-clarification success delta CI lower bound >= needs_clar_success_pp_min pp
      over-clarification reduction     (base - trained) / base, CI lower bound >= overclar_rel_reduction_min
      average turns increase           CI upper bound <= avg_turns_max_increase
      hard-bucket success (hq + sq)    CI lower bound >= hard_success_pp_min pp

Each threshold is judged on the end of the paired-bootstrap 95 % CI that is least favourable to the
model (the lower bound of a required gain, the upper bound of an allowed increase); the detail prints the
point estimate and the whole CI. A check whose inputs cannot show a difference is `not measurable`, never
a pass: no items of its kind, neither model over-clarifying (0 -> 0), every episode of both models taking
the same number of turns. With several seeds every seed's run must pass.
"""

from __future__ import annotations

import json

from rc1.eval.metrics import HARD_TASKS
from rc1.gates.base import Check, GateContext, GateResult
from rc1.runtime.fingerprint import Evidence, read_sidecar, sha256_file
from rc1.runtime.layout import EVAL_REPORTS

GATE = "rc1_eval"
ACCEPT_HINT = 'rc1 advance --to scale_1000 --accept-early-stop "why"'


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.1f}%"


def _ci_pp(ci: list | None) -> str:
    return "n/a" if not ci else f"[{ci[0]:+.1f}, {ci[1]:+.1f}] pp"


def _wilson_txt(part: dict | None) -> str:
    if not part or part.get("rate") is None:
        return "n/a"
    lo, hi = part["ci95"]
    return f"{_pct(part['rate'])} [{_pct(lo)}, {_pct(hi)}] ({part['k']}/{part['n']})"


def _point(d: dict) -> str:
    return f"point estimate {d['delta_pp']:+.1f} pp, 95% CI {_ci_pp(d['ci95_pp'])} (paired bootstrap, n={d['n']})"


def _checkpoint_current(ctx: GateContext, run: dict) -> tuple[bool, str, Evidence | None]:
    """Was the run's entry computed for its current latest checkpoint or its newest best copy?"""
    from rc1.eval.best import best_index
    from rc1.runtime.checkpoint import MANIFEST_FILE, read_latest

    ck = run.get("checkpoint") or {}
    path = ctx.ws.path(ck["path"])
    manifest = path / MANIFEST_FILE
    if not manifest.exists():
        return False, f"{ck['path']}: the evaluated checkpoint no longer exists", None
    now = sha256_file(manifest)
    ev = Evidence(ctx.ws.rel(manifest), now)
    if now != ck.get("manifest_sha256"):
        return False, f"{ck['path']}: checkpoint changed since the eval (manifest sha256 differs)", ev
    run_dir = run.get("run_dir")
    latest = read_latest(ctx.ws.path(run_dir)) if run_dir else None
    candidates = {}
    if latest is not None and (latest / MANIFEST_FILE).exists():
        candidates["latest"] = sha256_file(latest / MANIFEST_FILE)
    bests = best_index(ctx.ws, run_dir) if run_dir else []
    if bests:
        candidates["best"] = bests[-1].get("manifest_sha256")
    which = [k for k, v in candidates.items() if v == now]
    if not which:
        return False, (f"{ck['path']} is neither the current latest ({ctx.ws.rel(latest) if latest else 'none'}) "
                       "nor the newest best/ checkpoint: run `rc1 eval` again"), ev
    return True, f"{ck['path']} (step {ck.get('step')}) is the current {' and '.join(which)}", ev


def _run_ended(ctx: GateContext, run: dict, res: GateResult) -> Check:
    """The run completed, or stopped early with the operator's audited acceptance of this very run."""
    from rc1.eval.runs import acceptance_for, read_end

    name, threshold = "run completed (or early stop accepted)", "completed, or accepted by the operator"
    end_file = (run.get("training") or {}).get("end_file")
    if not end_file:
        return Check(name, None, threshold, False, f"{run['checkpoint']['path']} belongs to no training run of this "
                     "config: how its run ended is unknown")
    end = read_end(ctx.ws, end_file)
    if end.record is None:
        return Check(name, None, threshold, False, f"no training end record {end_file}: the gate cannot tell "
                     "whether the run completed")
    res.evidence.append(Evidence(end_file, end.sha256))
    rec = end.record
    at = f"step {rec.get('step')}/{rec.get('max_steps')}"
    if not end.stopped_early:
        return Check(name, end.reason, threshold, True, f"{end_file}: {end.reason} at {at}")
    accepted = acceptance_for(ctx.ws, run["run_dir"], end)
    if accepted is None:
        return Check(name, f"stopped early ({end.reason})", threshold, False,
                     f"{end_file}: the run stopped early ({end.reason} at {at}); the RC1 gate refuses it unless the "
                     f"operator accepts it: {ACCEPT_HINT}")
    return Check(name, f"stopped early ({end.reason}), accepted", threshold, True,
                 f"{end_file}: stopped early ({end.reason} at {at}); accepted by {accepted.get('operator')} at "
                 f"{accepted.get('time')} (audit log): {accepted.get('why')}")


def heldout_checks(g, held: dict, prefix: str = "", per_task: bool = False) -> list[Check]:
    """The RC1 thresholds on one run's held-out view (rc1.eval.harness.run_view). `per_task`: the success
    delta and the margin over the majority class are judged for every task of the set too (the fitted set:
    each task the fit kept must improve)."""
    base, trained, delta = held["base"], held["trained"], held["delta"]
    out: list[Check] = []

    def gain(name: str, d: dict, minimum: float, strict: bool, what: str, none_why: str) -> Check:
        full = prefix + name
        threshold = f"{'>' if strict else '>='} {minimum:g} (95% CI lower bound)"
        if not d["n"] or not d.get("ci95_pp"):
            return Check.not_measurable(full, threshold, none_why)
        lo = d["ci95_pp"][0]
        ok = lo > minimum if strict else lo >= minimum
        return Check(full, lo, threshold, ok, f"{_point(d)}; {what}")

    s = delta["success"]
    out.append(gain("held-out success delta (pp, CI lower bound)", s, g.success_delta_pp_gt, True,
                    f"base {_wilson_txt(base['success'])} -> trained {_wilson_txt(trained['success'])}",
                    "no paired held-out items"))

    v = held["vs_majority"]["success"]
    answers = ", ".join(f"{t} '{m['answer']}'" for t, m in held["majority"]["by_task"].items())
    out.append(gain("trained success - majority-class baseline (pp, CI lower bound)", v, g.vs_majority_pp_gt, True,
                    f"trained {_pct(v['trained'])} vs the majority-class baseline {_pct(v['base'])} (each task's most "
                    f"common gold answer to every item: {answers}; computed on these items' own labels)",
                    "no held-out items"))

    if per_task:
        for task, d in (delta.get("by_task") or {}).items():
            out.append(gain(f"{task}: held-out success delta (pp, CI lower bound)", d, g.success_delta_pp_gt, True,
                            f"base {_pct(d.get('base'))} -> trained {_pct(d.get('trained'))}",
                            f"no paired {task} items"))
            vt = (held["vs_majority"].get("by_task") or {}).get(task)
            if vt is not None:
                out.append(gain(f"{task}: trained success - majority-class baseline (pp, CI lower bound)", vt,
                                g.vs_majority_pp_gt, True,
                                f"trained {_pct(vt.get('trained'))} vs majority-class {_pct(vt.get('base'))}",
                                f"no {task} items"))

    out.append(gain("needs-clarification success delta (pp, CI lower bound)", delta["needs_clar_success"],
                    g.needs_clar_success_pp_min, False,
                    f"base {_wilson_txt(base['needs_clar_success'])} -> trained {_wilson_txt(trained['needs_clar_success'])}",
                    "no needs-clarification items in the held-out set"))

    oc = delta["overclar"]
    name = prefix + "over-clarification relative reduction (CI lower bound)"
    threshold = f">= {g.overclar_rel_reduction_min:g} (95% CI lower bound)"
    rates = f"base {_wilson_txt(base['overclar'])} -> trained {_wilson_txt(trained['overclar'])}"
    if not oc["n"]:
        out.append(Check.not_measurable(name, threshold, "no items without a clarification need in the held-out set"))
    elif not oc["base"] and not oc["trained"]:
        out.append(Check.not_measurable(name, threshold, f"neither model ever over-clarified ({rates}): a relative "
                                        "reduction cannot be measured", measured="0 -> 0"))
    elif not oc["base"]:
        out.append(Check(name, None, threshold, False, f"{rates}: the base model never over-clarified and the "
                         "trained model does"))
    else:
        ci = oc.get("rel_reduction_ci95")
        if not ci:
            out.append(Check.not_measurable(name, threshold, f"{rates}: too few over-clarifications for a CI"))
        else:
            out.append(Check(name, ci[0], threshold, ci[0] >= g.overclar_rel_reduction_min,
                             f"point estimate {oc['rel_reduction']:.2f}, 95% CI [{ci[0]:.2f}, {ci[1]:.2f}]; {rates}"))

    t = delta["avg_turns"]
    name = prefix + "average turns increase (CI upper bound)"
    threshold = f"<= {g.avg_turns_max_increase:g} (95% CI upper bound)"
    bt, tt = base["avg_turns"], trained["avg_turns"]
    constant = (bt["ci95"] and tt["ci95"] and bt["ci95"][0] == bt["ci95"][1] and tt["ci95"][0] == tt["ci95"][1]
                and bt["mean"] == tt["mean"])
    if t["base"] is None or not t["ci95"]:
        out.append(Check.not_measurable(name, threshold, "no paired held-out items"))
    elif constant:
        out.append(Check.not_measurable(name, threshold, f"every episode of both models took {bt['mean']:g} turn(s): "
                                        "turns cannot show a difference", measured=f"{bt['mean']:.3f} -> {tt['mean']:.3f}"))
    else:
        ci = t["ci95"]
        out.append(Check(name, ci[1], threshold, ci[1] <= g.avg_turns_max_increase,
                         f"point estimate {t['delta']:+.3f}, 95% CI [{ci[0]:+.3f}, {ci[1]:+.3f}]; "
                         f"base {t['base']:.3f} -> trained {t['trained']:.3f} turns"))

    name = "hard-bucket success delta, hotpotqa+strategyqa (pp, CI lower bound)"
    if not set(base["by_task"]) & set(HARD_TASKS):
        out.append(Check.not_applicable(prefix + name, "the held-out set has no hotpotqa or strategyqa items "
                                        f"(tasks: {', '.join(base['by_task'])})"))
    else:
        out.append(gain(name, delta["hard_hq_sq"], g.hard_success_pp_min, False,
                        f"base {_wilson_txt(base['hard_hq_sq'])} -> trained {_wilson_txt(trained['hard_hq_sq'])}",
                        "no hard hotpotqa/strategyqa items in the held-out set"))
    return out


def evaluate(ctx: GateContext) -> GateResult:
    from rc1.eval.harness import HELDOUT, REPORT_VERSION, latest_report, run_view
    from rc1.eval.splits import FITTED

    g = ctx.gates.eval
    res = GateResult(GATE)
    path = latest_report(ctx.ws)
    if path is None:
        res.checks.append(Check("eval report", None, "exists", False,
                                f"no {EVAL_REPORTS}: run `rc1 eval --config ...` first"))
        return res
    rel = ctx.ws.rel(path)
    digest = sha256_file(path)
    res.evidence.append(Evidence(rel, digest))
    side = read_sidecar(path)
    ok = side is not None and side == digest
    res.checks.append(Check("eval report sha256", digest[:12], "matches its .sha256 sidecar", ok,
                            f"{rel}: " + ("verified" if ok else "no sidecar" if side is None else
                                          f"sidecar says {side[:12]}: the report was edited after it was written")))
    if not ok:
        return res
    try:
        report = json.loads(path.read_text())
        held_name = report.get("heldout_set", HELDOUT)
        runs = report["runs"]
        views = [run_view(report, r, held_name) for r in runs]
    except (json.JSONDecodeError, KeyError, TypeError) as exc:
        res.checks.append(Check("eval report readable", None, f"eval report JSON version {REPORT_VERSION}", False,
                                f"{rel}: {exc.__class__.__name__}: {exc} (written by an older rc1? run `rc1 eval` again)"))
        return res
    if not runs:
        res.checks.append(Check("report is for the current checkpoint", None, "latest or newest best", False,
                                "the report evaluated the base model only (no checkpoint)"))
        return res
    held_set = report["sets"][held_name]
    dt = report.get("dtype") or {}
    mde = (report["results"][held_name].get("mde") or {}).get("overall") or {}
    res.notes.append(f"held-out set {held_set['path']} (n={held_set['n']}), profile {report.get('profile')}, "
                     f"report {rel}; eval dtype {dt.get('eval')}, training dtype {', '.join(dt.get('train') or ['unknown'])}")
    if mde.get("mde") is not None:
        res.notes.append(f"with n={mde['n']} the smallest success increase a paired test detects (80% power, "
                         f"alpha 0.05) is {100 * mde['mde']:.1f} pp")
    multi = len(runs) > 1
    for run, held in zip(runs, views):
        prefix = f"seed {run['seed_index']}: " if multi else ""
        current, why, ev = _checkpoint_current(ctx, run)
        if ev is not None:
            res.evidence.append(ev)
        res.checks.append(Check(prefix + "report is for the current checkpoint", run["checkpoint"]["path"],
                                "latest or newest best", current, why))
        ended = _run_ended(ctx, run, res)
        res.checks.append(Check(prefix + ended.name, ended.measured, ended.threshold, ended.passed, ended.detail,
                                ended.status))
        if current:
            res.checks.extend(heldout_checks(g, held, prefix, per_task=held_name == FITTED))
    if held_name == FITTED and HELDOUT in report["results"]:
        for run in runs:
            sh = run_view(report, run, HELDOUT)
            d = (sh.get("delta") or {}).get("success") or {}
            if d.get("n"):
                res.notes.append(f"{'seed ' + str(run['seed_index']) + ': ' if multi else ''}full-difficulty shadow set "
                                 f"(reported, not judged): {_point(d)}")
    if multi and report.get("spread"):
        d = report["spread"][held_name]["delta_pp"]
        res.notes.append(f"{len(runs)} seeds: held-out success delta min {d['min']:+.1f} / mean {d['mean']:+.1f} / "
                         f"max {d['max']:+.1f} pp")
    return res
