"""Scale-up gate (scale_1000, scale_5000): expand the training pool with NEW items, with the
diversity, scorer-stability and difficulty reports re-run before and after the expansion.

`ctx.round` names the stage; its size is `gates.scale.stages[stage]`. Order (the gate stops at the
first failing check; every later check is reported as "not run"):

  before   previous stage passed (its after-report verifies)   [stages after the first]
           diversity of the current pool      rc1.data.diversity.validate (pool thresholds)
           scorer stability                   the judge grades `stability_items` items' gold answers and a
                                              wrong answer to each (rc1.judge.probe.wrong_responses):
                                              mean variance of its K samples (not applicable for a
                                              deterministic method) and discrimination (AUC CI lower bound
                                              >= scorer.auc_min): a constant judge has variance 0 and fails
           difficulty of the current pool     rc1.data.difficulty.difficulty_checks
  expand   the stage's expansion file: reused when it verifies and has N items; else built by the
           builder `ctx.extras["expand"]` that `rc1 scale run` passes (rc1.data.expansion: new items
           with a stage seed, none repeating an earlier pool or the shadow set, N per the task mix and
           bucket target). The gate itself never builds: `rc1 advance` judges the file that is there
  after    size, id overlap, near-dup vs earlier pools, leak vs the shadow set (re-read from disk)
           diversity, scorer stability (new items) and difficulty of the expanded pool

The current pool is the balanced seed pool (`seed_pool`) plus the expansions of earlier stages;
`items >= min_items` of round 1 is replaced by the stage's own size checks. Writes
`data/rollouts/rc1_<stage>.jsonl` and `reports/scale/<stage>_{before,after}.json` (registered
artifacts). An expansion file left by an interrupted run is reused only if its sidecar verifies
and it has the stage's size; the after-checks re-verify it either way.

`ctx.extras["judge"]` may hold a scorer with `score_many(pairs)` (JudgeClient's interface); by
default a `rc1.judge.client.JudgeClient` is built from the run config. No judge reachable: the
stability check fails and says how to start one.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from pathlib import Path

from rc1.config.names import BUCKETS, TASKS
from rc1.gates.base import FAIL, NOT_APPLICABLE, NOT_MEASURABLE, PASS, Check, GateContext, GateResult
from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.errors import Rc1Error
from rc1.runtime.fingerprint import Evidence, register_artifact, sha256_file, verify_artifact
from rc1.data.expansion import overlaps
from rc1.runtime.layout import SCALE_REPORTS, V1_POOL, expansion_path

GATE = "scale"
NOT_RUN = "not run"
NOT_RUN_STATUS = "not_run"


def report_path(stage: str, phase: str) -> str:
    return f"{SCALE_REPORTS}/{stage}_{phase}.json"


class _Stop(Exception):
    """The first failing check: the caller reports every remaining step as not run."""


class _Run:
    """Collects checks in order; stops at the first failure."""

    def __init__(self, ctx: GateContext, stage: str):
        self.ctx, self.stage = ctx, stage
        self.res = GateResult(GATE)
        self.phase_checks: dict[str, list[dict]] = {"before": [], "after": []}
        self.phase = "before"
        self.extra: dict[str, dict] = {"before": {}, "after": {}}
        self.evidence: dict[str, Evidence] = {}

    def add(self, check: Check) -> None:
        check = Check(f"{self.phase}: {check.name}", check.measured, check.threshold, check.passed, check.detail,
                      check.status)
        self.res.checks.append(check)
        self.phase_checks[self.phase].append(check.to_dict())

    def blocks(self, check: Check) -> bool:
        return check.status == FAIL or (check.status == NOT_MEASURABLE and self.ctx.gates.not_measurable == "block")

    def add_group(self, checks: list[Check]) -> None:
        """Checks computed together (one report): all recorded; stop after the group if one blocks."""
        for c in checks:
            self.add(c)
        if any(self.blocks(c) for c in checks):
            raise _Stop()

    def need(self, check: Check) -> None:
        self.add(check)
        if self.blocks(check):
            raise _Stop()

    def not_run(self, phase: str, names: list[str], why: str) -> None:
        for name in names:
            c = Check(f"{phase}: {name}", None, NOT_RUN, False, f"not run: {why}")
            self.res.checks.append(c)
            self.phase_checks[phase].append({**c.to_dict(), "status": NOT_RUN_STATUS})

    def look(self, path: str | Path) -> None:
        p = self.ctx.ws.path(path)
        if p.exists() and p.is_file():
            ev = Evidence(self.ctx.ws.rel(p), sha256_file(p))
            self.evidence[ev.path] = ev


# ----------------------------------------------------------------------------- helpers
def _read(ws, rel: str | None) -> list[dict] | None:
    from rc1.data.io import read_jsonl

    if not rel or not ws.path(rel).exists():
        return None
    return read_jsonl(ws.path(rel))


def _read_all(ws, rels: list[str]) -> list[dict]:
    """The items of every existing file in `rels`, in order."""
    return [it for r in rels for it in _read(ws, r) or []]


def _measure(ctx: GateContext, run, label: str, steps_left: list, items: list[dict], stability_items: list[dict],
             shadow, v1) -> None:
    """One phase's measurements: diversity and difficulty of `items`, scorer stability on `stability_items`."""
    ctx.progress(f"{label}: diversity of {len(items)} items")
    steps_left.pop(0)
    run.add_group(_diversity(run, items, shadow or None, v1))
    ctx.progress(f"{label}: scorer stability")
    steps_left.pop(0)
    run.add_group(_stability(run, stability_items))
    ctx.progress(f"{label}: difficulty")
    steps_left.pop(0)
    run.add_group(_difficulty(run, items))


def _checks_from(report_checks: list[dict], prefix: str) -> list[Check]:
    return [Check(f"{prefix} {c['name']}", c.get("measured"), str(c.get("threshold")), bool(c.get("passed")),
                  str(c.get("detail") or ""), c.get("status", "")) for c in report_checks]


def _diversity(run: _Run, items: list[dict], shadow: list[dict] | None, v1: list[dict] | None) -> list[Check]:
    from rc1.data import diversity as DV
    from rc1.data.tokens import get_counter

    cfg = run.ctx.config
    th = run.ctx.gates.pool.model_copy(update={"min_items": 1})  # sizes are the stage's own checks
    rep = DV.validate(items, shadow, v1, th, counter=get_counter(cfg.model.base), seed=cfg.pool.seed)
    rep.pop("distributions", None)
    run.extra[run.phase]["diversity"] = {k: v for k, v in rep.items() if k not in ("checks",)}
    return _checks_from([c for c in rep["checks"] if c["name"] != "items"], "diversity:")


def _difficulty(run: _Run, items: list[dict]) -> list[Check]:
    from rc1.data import difficulty as D

    missing = [it.get("id") for it in items if "difficulty" not in it or "bucket" not in it]
    if missing:
        return [Check("difficulty: metrics present", len(missing), "== 0 items without", False,
                      f"{len(missing)} item(s) have no difficulty/bucket (run `rc1 data difficulty metrics`): {missing[:5]}")]
    checks, offenders = D.difficulty_checks(items, run.ctx.gates.difficulty)
    counts = {t: {b: sum(1 for it in items if it["task"] == t and it["bucket"] == b) for b in BUCKETS} for t in TASKS}
    run.extra[run.phase]["difficulty"] = {"checks": checks, "bucket_counts": counts,
                                          "offenders": {k: v[:20] for k, v in offenders.items()}}
    return _checks_from(checks, "difficulty:")


def _stability(run: _Run, items: list[dict]) -> list[Check]:
    """The judge on `stability_items` items: each gold answer and one wrong answer (see the module docstring)."""
    import random

    from rc1.judge.probe import discrimination, gold_response, wrong_responses

    ctx, g, gs = run.ctx, run.ctx.gates.scale, run.ctx.gates.scorer
    var_name, disc_name = "scorer stability: mean judge variance", "scorer stability: discrimination (AUC CI lower bound)"
    var_th, disc_th = f"<= {g.scorer_variance_max:g}", f">= {gs.auc_min:g} ({gs.auc_confidence:.0%} CI)"
    sample = items[:g.stability_items]
    rng = random.Random(f"stability:{run.stage}:{run.phase}")
    graded: list[tuple[dict, str, bool]] = []
    for n, it in enumerate(sample):
        graded.append((it, gold_response(it), True))
        wrong = wrong_responses(it, items, rng)
        if wrong:  # alternate the kinds: a perturbed answer, another item's answer
            graded.append((it, wrong[n % len(wrong)][1], False))
    judge = ctx.extras.get("judge")
    owned = None
    try:
        if judge is None:
            from rc1.judge.client import JudgeClient

            judge = owned = JudgeClient(ctx.ws, ctx.config.scorer, ctx.config.reward, stats_path=None)
        scores = judge.score_many([(it, resp) for it, resp, _ in graded],
                                  [f"{it['id']}/{'gold' if ok else 'wrong'}" for it, _, ok in graded])
        deterministic = bool(getattr(judge, "deterministic", False))
        method = getattr(judge, "method", None)
    except Rc1Error as exc:
        why = f"judge unavailable: {exc.message} (start the local judge with `rc1 judge serve`)"
        return [Check(var_name, None, var_th, False, why), Check(disc_name, None, disc_th, False, why)]
    except Exception as exc:  # noqa: BLE001 - connection problems come in many types; the check says which
        why = f"judge failed: {exc.__class__.__name__}: {exc}"
        return [Check(var_name, None, var_th, False, why), Check(disc_name, None, disc_th, False, why)]
    finally:
        if owned is not None:
            owned.close()
    ok = [s for s in scores if s.median is not None and s.variance is not None]
    k = max((len(s.samples) for s in scores), default=0)
    variances = [float(s.variance) for s in ok]
    unstable = sum(v > g.scorer_variance_max for v in variances)
    disc = discrimination([s.median for s in scores], [c for _, _, c in graded], [it["id"] for it, _, _ in graded],
                          auc_min=gs.auc_min, confidence=gs.auc_confidence, seed=len(graded))
    run.extra[run.phase]["stability"] = {
        "items": len(sample), "responses": len(graded), "correct": sum(c for _, _, c in graded), "scored": len(ok),
        "method": method, "samples_per_item": k, "variance_max": g.scorer_variance_max,
        "mean_variance": statistics.fmean(variances) if variances else None,
        "max_variance": max(variances) if variances else None, "unstable": unstable,
        "unstable_share": unstable / len(variances) if variances else None, "discrimination": disc,
        "per_item": [{"id": s.item_id, "correct": c, "median": s.median, "variance": s.variance}
                     for s, (_, _, c) in zip(scores, graded)]}
    if len(ok) < max(1, math.ceil(0.9 * len(graded))):
        why = f"only {len(ok)}/{len(graded)} answers got a judge score (K={k})"
        return [Check(var_name, None, var_th, False, why), Check(disc_name, None, disc_th, False, why)]
    if deterministic or k < 2:
        var = Check.not_applicable(var_name, f"the judge's method ({method or 'one sample per score'}) gives one "
                                             "deterministic grade per answer: there is no sample variance to measure")
    else:
        var = Check.at_most(var_name, round(statistics.fmean(variances), 6), g.scorer_variance_max,
                            f"K={k} samples on {len(ok)} answers ({disc['n_correct']} correct, {disc['n_wrong']} "
                            f"wrong); {unstable} above {g.scorer_variance_max:g} (max {max(variances):.4f})")
    if disc["verdict"] == "not measurable":
        return [var, Check.not_measurable(disc_name, disc_th, disc["why"])]
    d = Check.at_least(disc_name, disc["ci"][0], gs.auc_min, disc["why"])
    return [var, Check(d.name, d.measured, disc_th, d.passed, d.detail)]


def _earlier_pools(ctx: GateContext, stage_names: list[str], idx: int) -> list[str]:
    cfg = ctx.config
    rels = [cfg.pool.out, cfg.seed_pool, cfg.pool.v1_pool or V1_POOL, cfg.data.train_path, cfg.data.eval_path]
    rels += [expansion_path(s) for s in stage_names[:idx]]
    seen, out = set(), []
    for r in rels:
        if r and r not in seen and ctx.ws.path(r).exists():
            seen.add(r)
            out.append(r)
    return out


def _write_report(run: _Run, phase: str, pools: list[str], stage_n: int, extra: dict | None = None) -> None:
    ws = run.ctx.ws
    checks = run.phase_checks[phase]
    doc = {"stage": run.stage, "phase": phase, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "profile": run.ctx.gates.profile, "stage_items": stage_n,
           "passed": bool(checks) and all(c["status"] in (PASS, NOT_APPLICABLE) or
                                          (c["status"] == NOT_MEASURABLE and run.ctx.gates.not_measurable == "warn")
                                          for c in checks),
           "not_measurable": run.ctx.gates.not_measurable,
           "pools": [{"path": p, "sha256": sha256_file(ws.path(p))} for p in pools if ws.path(p).exists()],
           "checks": checks, **run.extra[phase], **(extra or {})}
    p = ws.path(report_path(run.stage, phase))
    atomic_write_json(p, doc)
    ev = register_artifact(ws, p, "scale_report", stage=run.stage, phase=phase, passed=doc["passed"])
    run.evidence[ev.path] = ev


BEFORE_STEPS = ["previous stage", "diversity", "scorer stability", "difficulty"]
AFTER_STEPS = ["expansion", "new items", "diversity", "scorer stability", "difficulty"]


def evaluate(ctx: GateContext) -> GateResult:
    g = ctx.gates.scale
    stage = ctx.round
    stage_names = list(g.stages)
    if stage not in g.stages:
        return GateResult(GATE, [Check("scale stage", stage, f"one of {stage_names}", False,
                                       f"gate round {stage!r} is not a stage of gates.scale.stages")])
    if ctx.config is None:
        return GateResult(GATE, [Check("run config", None, "given", False, "the scale gate needs the run config (--config)")])
    idx, n = stage_names.index(stage), int(g.stages[stage])
    run = _Run(ctx, stage)
    ws, cfg = ctx.ws, ctx.config
    shadow = _read(ws, cfg.data.shadow_path) or []
    v1 = _read(ws, cfg.pool.v1_pool or V1_POOL)
    base_rel = cfg.seed_pool if ws.path(cfg.seed_pool).exists() else cfg.pool.out
    current_rels = [base_rel] + [expansion_path(s) for s in stage_names[:idx]]
    earlier_rels = _earlier_pools(ctx, stage_names, idx)
    for r in [*earlier_rels, cfg.data.shadow_path]:
        run.look(r)
    done_before = done_after = False
    steps_left = list(BEFORE_STEPS)
    try:
        # ------------------------------------------------------------------ before
        if idx > 0:
            prev = stage_names[idx - 1]
            prel = report_path(prev, "after")
            pp = ws.path(prel)
            ok, why = False, f"{prel} does not exist: run `rc1 scale run --stage {prev}` first"
            if pp.exists():
                run.look(prel)
                if not verify_artifact(ws, pp):
                    why = f"{prel}: sha256 sidecar missing or not matching"
                else:
                    ok = bool(json.loads(pp.read_text()).get("passed"))
                    why = f"{prel}: " + ("passed" if ok else "did not pass")
            steps_left.pop(0)
            run.need(Check(f"previous stage {prev} passed", ok, "true", ok, why))
        else:
            steps_left.pop(0)
        missing = [r for r in current_rels if not ws.path(r).exists()]
        if missing:
            run.need(Check("current pool exists", None, "exists", False,
                           f"missing {missing}: build the seed pool (`rc1 data build-pool`, difficulty bucketize) first"))
        current = _read_all(ws, current_rels)
        _measure(ctx, run, f"{stage}: before", steps_left, current, current, shadow, v1)
        done_before = True
        _write_report(run, "before", current_rels, n)

        # ------------------------------------------------------------------ expand
        run.phase = "after"
        steps_left = list(AFTER_STEPS)
        earlier = _read_all(ws, earlier_rels)
        exp_rel = expansion_path(stage)
        exp_p = ws.path(exp_rel)
        ctx.progress(f"{stage}: expanding by {n} new items")
        expand = ctx.extras.get("expand")
        if exp_p.exists() and verify_artifact(ws, exp_p) and len(_read(ws, exp_rel) or []) == n:
            expansion = {"path": exp_rel, "sha256": sha256_file(exp_p), "n": n, "reused": True}
        elif expand is None:  # `rc1 advance` judges the expansion that is there; building it is `rc1 scale run`'s
            steps_left.pop(0)
            run.need(Check("expansion built", None, f"{n} new items", False,
                           f"{exp_rel} is missing, does not verify or lacks {n} items: build it with "
                           f"`rc1 scale run --stage {stage}`"))
        else:
            try:
                expansion = expand(stage, idx, n, earlier, shadow)
            except Rc1Error as exc:
                steps_left.pop(0)
                run.need(Check("expansion built", None, f"{n} new items", False, exc.message))
        steps_left.pop(0)
        run.extra["after"]["expansion"] = expansion
        run.look(exp_rel)
        new = _read(ws, exp_rel) or []
        gp = ctx.gates.pool
        ov = overlaps(new, earlier, shadow, gp.near_dup_jaccard, gp.leak_sim_max)
        run.extra["after"]["overlap"] = {k: v[:50] for k, v in ov.items()} | {"earlier_pools": earlier_rels,
                                                                            "shadow": cfg.data.shadow_path}
        steps_left.pop(0)
        run.add_group([
            Check.equals("new items", len(new), n, f"{exp_rel}"),
            Check.equals("ids already in earlier pools or the shadow set", len(ov["id"]), 0,
                         ", ".join(str(o["id"]) for o in ov["id"][:5])),
            Check.equals("exact repeats of earlier/shadow items", len(ov["exact"]), 0,
                         ", ".join(str(o["id"]) for o in ov["exact"][:5])),
            Check.equals(f"near-duplicates of earlier pool items (Jaccard >= {gp.near_dup_jaccard:g})",
                         len(ov["near_dup"]), 0, ", ".join(f"{o['id']}~{o['of']}" for o in ov["near_dup"][:5])),
            Check.equals(f"leaks vs the shadow set (similarity >= {gp.leak_sim_max:g})", len(ov["leak"]), 0,
                         ", ".join(f"{o['id']}~{o['of']}" for o in ov["leak"][:5])),
        ])
        _measure(ctx, run, f"{stage}: after", steps_left, current + new, new, shadow, v1)
        done_after = True
        _write_report(run, "after", current_rels + [exp_rel], n)
    except _Stop:
        first = next(c for c in run.res.checks if run.blocks(c))
        why = f"stopped at the first failing check ({first.name})"
        if not done_before:
            run.not_run("before", steps_left, why)
            _write_report(run, "before", current_rels, n)
            run.not_run("after", AFTER_STEPS, why)
            _write_report(run, "after", current_rels, n)
        elif not done_after:
            run.not_run("after", steps_left, why)
            _write_report(run, "after", current_rels + [expansion_path(stage)], n)
        run.res.notes.append(f"{stage}: {why}; later checks not run")
    run.res.evidence = list(run.evidence.values())
    return run.res
