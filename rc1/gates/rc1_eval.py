"""RC1 gate (eval -> scale_1000): the trained model beats the base model on the held-out set, honestly.

Reads the newest reports/eval_*.json and refuses it unless its sha256 sidecar matches. For every
training run the report evaluated (one per seed), it checks that:

  - the report is for the run's current `latest` checkpoint or its newest best/ copy;
  - the run completed, or it stopped early and the operator accepted that for this very run
    (`rc1 advance --to scale_1000 --accept-early-stop "why"`, an audit-log entry naming the run's end
    record by sha256, rc1.eval.runs).

The thresholds (`gates.eval`, SPEC §3, seeds 003/004) are judged on the seeds POOLED (the report's `pooled`,
rc1.eval.metrics.pooled_compare): the mean delta over seeds with a two-level bootstrap 95 % CI (resample
seeds, then items within each), never every seed on its own (a real gain would pass 0.77^3 of the time).
With one seed that is the paired bootstrap. Success is judged on the set the report judges (the fitted
held-out items with a difficulty fit, else the shadow set):

      success delta                     CI lower bound > success_delta_pp_gt pp
      no seed clearly regressed         (several seeds) every seed's own CI upper bound >= 0
      trained - majority-class baseline CI lower bound > vs_majority_pp_gt pp (same items; the baseline's
                                        answer is chosen on the training split)
      per task (fitted set)             the success delta, and the margin over the majority class for a task
                                        with a closed answer set

The behaviour checks are improvements where the judged set can measure them by construction (the report's
sets[*].measures: a set without clarification items cannot show a clarification change, one of single-turn
items cannot show a turns change):

      needs-clarification success delta CI lower bound >= needs_clar_success_pp_min pp
      over-clarification reduction     (base - trained) / base, CI lower bound >= overclar_rel_reduction_min
      average turns increase           CI upper bound <= avg_turns_max_increase
      hard-bucket success (hq + sq)    CI lower bound >= hard_success_pp_min pp

With a difficulty fit whose levels cannot measure one (the embedded default trains bare sums), the run was not
trained for it, so the full-difficulty shadow set guards it instead, as non-inferiority with the margin
shadow_noninferiority_pp: needs-clarification and hard-bucket success CI lower bound >= margin, the
over-clarification rate's increase CI upper bound <= -margin pp, the average turns' increase CI upper bound
<= avg_turns_max_increase. Where no set can measure one it is not applicable, with the reason.

With a difficulty fit the full-difficulty shadow set also guards against regression: its success delta's CI
lower bound >= shadow_noninferiority_pp, on at least shadow_min_n items (fewer fails, naming the size).

Each threshold is judged on the end of the CI least favourable to the model; the detail prints the point
estimate and the whole CI. A check whose inputs cannot show a difference is `not measurable`, never a pass:
no items of its kind, neither model over-clarifying (0 -> 0), every episode of both models taking the same
number of turns.
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


def _point(d: dict) -> str:
    seeds = d.get("seeds") or 1
    how = (f"paired bootstrap, n={d['n']}" if seeds == 1 else
           f"two-level bootstrap over {seeds} seeds and n={d['n']} items; seeds "
           + " / ".join(f"{x:+.1f}" for x in d.get("per_seed_delta_pp") or []) + " pp")
    return f"point estimate {d['delta_pp']:+.1f} pp, 95% CI {_ci_pp(d['ci95_pp'])} ({how})"


def _gain(name: str, d: dict, minimum: float, strict: bool, what: str, none_why: str) -> Check:
    threshold = f"{'>' if strict else '>='} {minimum:g} (95% CI lower bound)"
    if not d.get("n") or not d.get("ci95_pp"):
        return Check.not_measurable(name, threshold, none_why)
    lo = d["ci95_pp"][0]
    ok = lo > minimum if strict else lo >= minimum
    return Check(name, lo, threshold, ok, f"{_point(d)}; {what}")


def _rates(d: dict, seeds: int) -> str:
    return f"base {_pct(d.get('base'))} -> trained {_pct(d.get('trained'))}" + (f" (mean of {seeds} seeds)"
                                                                              if seeds > 1 else "")


def measures(report: dict, set_name: str) -> dict:
    """What a set can measure by construction (the harness's sets[*].measures; from the base summary when a
    report has none: the multi-turn count is then unknown, taken as present)."""
    m = (report["sets"].get(set_name) or {}).get("measures")
    if m is not None:
        return m
    base = report["results"][set_name]["base"]
    return {"needs_clarification": base["needs_clar_success"]["n"], "multi_turn": None,
            "hard_hq_sq": base["hard_hq_sq"]["n"]}


def success_checks(g, report: dict, set_name: str, per_task: bool) -> list[Check]:
    """Success on the judged set, pooled over seeds: the delta, no clearly regressed seed, the margin over
    the majority-class baseline; with `per_task` (the fitted set: each task the fit kept must improve) per task."""
    pooled = report["pooled"][set_name]
    seeds = pooled["seeds"]
    out: list[Check] = []
    s = pooled["success"]
    out.append(_gain("held-out success delta (pp, CI lower bound)", s, g.success_delta_pp_gt, True,
                     _rates(s, seeds), "no paired held-out items"))
    if seeds > 1:
        rows = [(r["seed_index"], ((r["results"][set_name]["delta"] or {}).get("success") or {}).get("ci95_pp"))
                for r in report["runs"]]
        his = [ci[1] for _, ci in rows if ci]
        worst = min(his) if his else None
        bad = [f"seed {i} [{ci[0]:+.1f}, {ci[1]:+.1f}] pp" for i, ci in rows if ci and ci[1] < 0]
        out.append(Check("no seed's success delta CI entirely below 0 (pp, lowest CI upper bound)", worst,
                         ">= 0 (each seed's paired-bootstrap 95% CI upper bound)", worst is not None and not bad,
                         ("clearly regressed: " + ", ".join(bad)) if bad else
                         "every seed's CI reaches 0 or above: " + ", ".join(f"seed {i} {_ci_pp(ci)}" for i, ci in rows)))
    maj = report["results"][set_name]["majority"]
    vs = pooled["vs_majority"]
    v = vs["success"]
    answers = ", ".join(f"{t} '{m['answer']}'" + ("" if m.get("answer_set", "closed") == "closed" else " (open answer)")
                        for t, m in maj["by_task"].items())
    out.append(_gain("trained success - majority-class baseline (pp, CI lower bound)", v, g.vs_majority_pp_gt, True,
                     f"trained {_pct(v['trained'])} vs the majority-class baseline {_pct(v['base'])} ({answers}; "
                     f"{maj.get('definition', '')})", "no held-out items"))
    if per_task:
        for task, d in (pooled.get("by_task") or {}).items():
            out.append(_gain(f"{task}: held-out success delta (pp, CI lower bound)", d, g.success_delta_pp_gt, True,
                             _rates(d, seeds), f"no paired {task} items"))
            m = maj["by_task"].get(task) or {}
            vt = (vs.get("by_task") or {}).get(task)
            if vt is not None and m.get("answer_set", "closed") == "closed":
                out.append(_gain(f"{task}: trained success - majority-class baseline (pp, CI lower bound)", vt,
                                 g.vs_majority_pp_gt, True,
                                 f"trained {_pct(vt.get('trained'))} vs majority-class '{m.get('answer')}' "
                                 f"{_pct(vt.get('base'))}", f"no {task} items"))
    return out


def behaviour_checks(g, report: dict, set_name: str, prefix: str = "") -> list[Check]:
    """Clarification, over-clarification and turns, pooled over seeds, on one set."""
    pooled = report["pooled"][set_name]
    seeds = pooled["seeds"]
    out: list[Check] = []
    nc = pooled["needs_clar_success"]
    out.append(_gain(prefix + "needs-clarification success delta (pp, CI lower bound)", nc,
                     g.needs_clar_success_pp_min, False, _rates(nc, seeds),
                     f"no needs-clarification items in the {set_name} set"))

    oc = pooled["overclar"]
    name = prefix + "over-clarification relative reduction (CI lower bound)"
    threshold = f">= {g.overclar_rel_reduction_min:g} (95% CI lower bound)"
    rates = _rates(oc, seeds)
    if not oc["n"]:
        out.append(Check.not_measurable(name, threshold, f"no items without a clarification need in the {set_name} set"))
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

    t = pooled["avg_turns"]
    out.append(turns_check(g, t, prefix, set_name))
    return out


def turns_check(g, t: dict, prefix: str, set_name: str) -> Check:
    name = prefix + "average turns increase (CI upper bound)"
    threshold = f"<= {g.avg_turns_max_increase:g} (95% CI upper bound)"
    if t["base"] is None or not t["ci95"]:
        return Check.not_measurable(name, threshold, f"no paired {set_name} items")
    if t.get("constant") is not None:
        return Check.not_measurable(name, threshold, f"every episode of both models took {t['constant']:g} turn(s): "
                                    "turns cannot show a difference", measured=f"{t['base']:.3f} -> {t['trained']:.3f}")
    ci = t["ci95"]
    return Check(name, ci[1], threshold, ci[1] <= g.avg_turns_max_increase,
                 f"point estimate {t['delta']:+.3f}, 95% CI [{ci[0]:+.3f}, {ci[1]:+.3f}]; "
                 f"base {t['base']:.3f} -> trained {t['trained']:.3f} turns")


def judged_checks(g, report: dict, held_name: str) -> list[Check]:
    """Every RC1 threshold, pooled over the report's runs: success on the judged set; each behaviour check as an
    improvement where the judged set can measure it by construction; with a fit, where only the shadow set can,
    as non-inferiority there (the run trained on the fitted levels only: a gain outside them is not what it
    was asked for, a loss is); and, with a fit, success non-inferiority on the shadow set."""
    from rc1.eval.splits import FITTED, HELDOUT

    shadow = HELDOUT if held_name != HELDOUT and HELDOUT in report["pooled"] else None
    order = [held_name] + ([shadow] if shadow else [])

    def can(name: str | None, kind: str) -> bool:
        k = measures(report, name).get(kind) if name else 0
        return k is None or k > 0

    out = success_checks(g, report, held_name, per_task=held_name == FITTED)
    behaviour = behaviour_checks(g, report, held_name)
    guards = guard_checks(g, report, shadow) if shadow else None
    if not can(held_name, "needs_clarification"):
        behaviour[0] = guards[0] if guards and can(shadow, "needs_clarification") else Check.not_applicable(
            "needs-clarification success delta (pp, CI lower bound)",
            "no item of any set needs clarification: " + ", ".join(order))
        behaviour[1] = guards[1] if guards else behaviour[1]
    if not can(held_name, "multi_turn"):
        behaviour[2] = guards[2] if guards and can(shadow, "multi_turn") else Check.not_applicable(
            "average turns increase (CI upper bound)", "every item of every set is single-turn: " + ", ".join(order))
    out += behaviour
    name = "hard-bucket success delta, hotpotqa+strategyqa (pp, CI lower bound)"
    has_hard = lambda n: can(n, "hard_hq_sq") and set(report["results"][n]["base"]["by_task"]) & set(HARD_TASKS)  # noqa: E731
    if has_hard(held_name):
        d = report["pooled"][held_name]["hard_hq_sq"]
        out.append(_gain(name, d, g.hard_success_pp_min, False, _rates(d, d.get("seeds") or 1),
                         f"no hard hotpotqa/strategyqa items in the {held_name} set"))
    elif guards and has_hard(shadow):
        out.append(guards[3])
    else:
        tasks = "; ".join(f"{n}: {', '.join(report['results'][n]['base']['by_task'])}" for n in order)
        out.append(Check.not_applicable(name, "no set has hard hotpotqa or strategyqa items "
                                        f"(tasks: {tasks if len(order) > 1 else tasks.split(': ', 1)[1]})"))
    if shadow:
        out.append(noninferiority_check(g, report))
    return out


def _guard(stem: str, d: dict, g, what: str, none_why: str, *, rise_is_bad: bool = False) -> Check:
    """One behaviour guard on a shadow subset. With >= gates.eval.shadow_min_n paired items it is
    non-inferiority at gates.eval.shadow_noninferiority_pp (a fall: CI lower bound >= margin; a rise: CI upper
    bound <= -margin). A smaller subset cannot show non-inferiority at that margin (a model that changed nothing
    fails it by chance: 45 hard items give a CI of about +-7 pp), so there it refuses only a significant change
    for the worse (CI upper bound < 0 for a fall, lower bound > 0 for a rise), and says so."""
    m, n = g.shadow_noninferiority_pp, d.get("n") or 0
    if n >= g.shadow_min_n:
        if not rise_is_bad:
            return _gain(stem + ", non-inferiority (pp, CI lower bound)", d, m, False, what, none_why)
        name, threshold = stem + ", non-inferiority (pp, CI upper bound)", f"<= {-m:g} (95% CI upper bound)"
        if not d.get("ci95_pp"):
            return Check.not_measurable(name, threshold, none_why)
        hi = d["ci95_pp"][1]
        return Check(name, hi, threshold, hi <= -m, f"{_point(d)}; {what}")
    small = f"n={n} < {g.shadow_min_n}: too few paired items for non-inferiority at {m:g} pp"
    if rise_is_bad:
        name, threshold = stem + ", no significant rise (pp, CI lower bound)", f"<= 0 (95% CI lower bound; {small})"
    else:
        name, threshold = stem + ", no significant fall (pp, CI upper bound)", f">= 0 (95% CI upper bound; {small})"
    if not n or not d.get("ci95_pp"):
        return Check.not_measurable(name, threshold, none_why)
    lo, hi = d["ci95_pp"]
    measured, ok = (lo, lo <= 0) if rise_is_bad else (hi, hi >= 0)
    return Check(name, measured, threshold, ok, f"{_point(d)}; {what}")


def guard_checks(g, report: dict, set_name: str) -> list[Check]:
    """The behaviour checks as guards on the shadow set (`_guard`: non-inferiority at margin
    gates.eval.shadow_noninferiority_pp on >= shadow_min_n paired items, else no significant change for the
    worse): needs-clarification success and hard-bucket success may not fall, the over-clarification rate may
    not rise; the average turns may not rise significantly (CI lower bound <= avg_turns_max_increase; every
    episode of both models at one turn is no increase)."""
    pooled = report["pooled"][set_name]
    seeds = pooled["seeds"]
    pre = f"{set_name} set: "
    nc = pooled["needs_clar_success"]
    clar = _guard(pre + "needs-clarification success", nc, g, _rates(nc, seeds),
                  f"no needs-clarification items in the {set_name} set")
    oc = pooled["overclar"]
    over = _guard(pre + "over-clarification rate increase", oc, g, f"asked without need: {_rates(oc, seeds)}",
                  f"no items without a clarification need in the {set_name} set", rise_is_bad=True)
    t = pooled["avg_turns"]
    name = pre + "average turns increase (CI lower bound)"
    threshold = f"<= {g.avg_turns_max_increase:g} (95% CI lower bound: no significant increase)"
    if t["base"] is None or not t["ci95"]:
        turns = Check.not_measurable(name, threshold, f"no paired {set_name} items")
    elif t.get("constant") is not None:
        turns = Check(name, 0.0, threshold, 0.0 <= g.avg_turns_max_increase,
                      f"every episode of both models took {t['constant']:g} turn(s) where more were allowed: no "
                      "increase")
    else:
        ci = t["ci95"]
        turns = Check(name, ci[0], threshold, ci[0] <= g.avg_turns_max_increase,
                      f"point estimate {t['delta']:+.3f}, 95% CI [{ci[0]:+.3f}, {ci[1]:+.3f}]; base {t['base']:.3f} -> "
                      f"trained {t['trained']:.3f} turns")
    d = pooled["hard_hq_sq"]
    hard = _guard(pre + "hard-bucket success, hotpotqa+strategyqa", d, g, _rates(d, d.get("seeds") or 1),
                  f"no hard hotpotqa/strategyqa items in the {set_name} set")
    return [clar, over, turns, hard]


def heldout_checks(g, held: dict, prefix: str = "", per_task: bool = False) -> list[Check]:
    """The RC1 thresholds on ONE run's view of one set (rc1.eval.harness.run_view), as the gate judges a
    single seed: success (per task with `per_task`), the majority-class margin, the behaviour checks and
    the hard bucket, all on that set."""
    base, trained, delta = held["base"], held["trained"], held["delta"]
    bt, tt = base["avg_turns"], trained["avg_turns"]
    constant = (bt["mean"] if bt["ci95"] and tt["ci95"] and bt["ci95"][0] == bt["ci95"][1]
                and tt["ci95"][0] == tt["ci95"][1] and bt["mean"] == tt["mean"] else None)
    one = {"seeds": 1, **{k: delta[k] for k in ("success", "by_task", "hard_hq_sq", "needs_clar_success", "overclar")},
           "avg_turns": {**delta["avg_turns"], "constant": constant}, "vs_majority": held["vs_majority"]}
    report = {"pooled": {"set": one}, "results": {"set": {"base": base, "majority": held["majority"]}}, "sets": {},
              "runs": []}
    out = success_checks(g, report, "set", per_task) + behaviour_checks(g, report, "set")
    name = "hard-bucket success delta, hotpotqa+strategyqa (pp, CI lower bound)"
    if not set(base["by_task"]) & set(HARD_TASKS) or not base["hard_hq_sq"]["n"]:
        out.append(Check.not_applicable(name, f"no hard hotpotqa or strategyqa items (tasks: {', '.join(base['by_task'])})"))
    else:
        out.append(_gain(name, delta["hard_hq_sq"], g.hard_success_pp_min, False, _rates(delta["hard_hq_sq"], 1),
                         "no hard hotpotqa/strategyqa items"))
    from dataclasses import replace

    return [replace(c, name=prefix + c.name) for c in out]


def noninferiority_check(g, report: dict) -> Check:
    """The full-difficulty shadow set guards a fitted run against regressing outside the fitted levels."""
    from rc1.eval.splits import HELDOUT

    name = "shadow set: success delta, non-inferiority (pp, CI lower bound)"
    threshold = f">= {g.shadow_noninferiority_pp:g} (95% CI lower bound, on >= {g.shadow_min_n} items)"
    d = report["pooled"][HELDOUT]["success"]
    n = report["sets"][HELDOUT]["n"]
    if n < g.shadow_min_n:
        return Check(name, None, threshold, False,
                     f"the shadow set has {n} items ({report['sets'][HELDOUT]['path']}); non-inferiority needs "
                     f">= {g.shadow_min_n}: raise eval.n_shadow")
    chk = _gain(name, d, g.shadow_noninferiority_pp, False, _rates(d, d.get("seeds") or 1), "no paired shadow items")
    return chk


def evaluate(ctx: GateContext) -> GateResult:
    from rc1.eval.harness import HELDOUT, REPORT_VERSION, latest_report

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
        if runs and held_name not in (report.get("pooled") or {}):
            raise KeyError("pooled")  # version 3 reports pool the seeds per set
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
    for run in runs:
        prefix = f"seed {run['seed_index']}: " if multi else ""
        current, why, ev = _checkpoint_current(ctx, run)
        if ev is not None:
            res.evidence.append(ev)
        res.checks.append(Check(prefix + "report is for the current checkpoint", run["checkpoint"]["path"],
                                "latest or newest best", current, why))
        ended = _run_ended(ctx, run, res)
        res.checks.append(Check(prefix + ended.name, ended.measured, ended.threshold, ended.passed, ended.detail,
                                ended.status))
    res.checks.extend(judged_checks(g, report, held_name))
    if multi:
        res.notes.append(f"{len(runs)} seeds pooled: each threshold is judged on the mean delta over seeds with a "
                         "two-level bootstrap CI (seeds, then items)")
    if multi and report.get("spread"):
        d = report["spread"][held_name]["delta_pp"]
        res.notes.append(f"{len(runs)} seeds: held-out success delta min {d['min']:+.1f} / mean {d['mean']:+.1f} / "
                         f"max {d['max']:+.1f} pp")
    return res
