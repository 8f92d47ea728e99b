"""Round 1 / round 2 difficulty gate: per-task hard/easy shares after balancing, length/turn/tool
bounds and clue-overlap medians and bounds (SPEC §3, the seeds' difficulty table), and whether the
buckets track difficulty at all: on the dev split (`data.eval_path`) the base model's answers
(`rc1 reward base-answers`, data/responses_dev_base.jsonl) must succeed measurably more often on easy
items than on hard ones (rc1.data.difficulty.outcome_gap: the task-stratified gap's CI lower bound
> `difficulty.outcome_gap_min_pp`); too few successes to tell is `not measurable`. With the difficulty fit on,
the dev split holds the fitted levels; where they leave no task with both easy and hard items (the fit keeps a
band of levels, so by construction on a small model) the check is `not applicable`: training then draws no
item by the pool's buckets (the curriculum walks the fitted levels), and the fit measured its levels on the base
model itself.

Inputs: the raw pool, its metrics file and the balanced pool (`seed_pool`). The chain is verified
by sha256: the metrics must come from the current pool and the balanced pool from the current
metrics (their `.meta.json` records the source hash). The difficulty report is reused only when
current (sidecar, input hashes and thresholds); otherwise the checks are recomputed in memory.
"""

from __future__ import annotations

import json

from rc1.gates.base import Check, GateContext, GateResult
from rc1.gates.pool import MAKERS, data_paths, missing_check, reused_report
from rc1.runtime.fingerprint import Evidence, sha256_file
from rc1.runtime.layout import DIFFICULTY_FIT_REPORT as FIT_REPORT
from rc1.runtime.layout import DIFFICULTY_REPORT as REPORT



def _chain(ctx: GateContext, derived: str, source: str, remake: str) -> Check | None:
    meta = ctx.ws.path(derived + ".meta.json")
    if not meta.exists():
        return Check(f"{derived} provenance", None, "records its source", False,
                     f"{derived}.meta.json is missing: remake it with `{remake}`")
    try:
        body = json.loads(meta.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return Check(f"{derived} provenance", None, "readable", False, f"{meta.name}: {exc}")
    if body.get("sha256") != sha256_file(ctx.ws.path(derived)):
        return Check(f"{derived} provenance", None, "matches the file", False,
                     f"{derived} changed after it was written: remake it with `{remake}`")
    if body.get("source_sha256") != sha256_file(ctx.ws.path(source)):
        return Check(f"{derived} provenance", None, f"made from the current {source}", False,
                     f"{derived} was made from another version of {source}: remake it with `{remake}`")
    return None


def evaluate(ctx: GateContext) -> GateResult:
    ws, th = ctx.ws, ctx.gates.difficulty
    paths = data_paths(ctx)
    result = GateResult("difficulty")
    makers = {"pool": MAKERS["pool"].format(path=paths["pool"]),
              "metrics": MAKERS["metrics"].format(pool=paths["pool"], path=paths["metrics"]),
              "balanced": MAKERS["balanced"].format(metrics=paths["metrics"], path=paths["balanced"])}
    ok = True
    for key in ("pool", "metrics", "balanced"):
        if ws.path(paths[key]).exists():
            result.evidence.append(Evidence.of(ws, paths[key]))
            if key != "pool" and ws.path(paths[key] + ".meta.json").exists():
                result.evidence.append(Evidence.of(ws, paths[key] + ".meta.json"))
        else:
            result.checks.append(missing_check(key, paths[key], "{m}", m=makers[key]))
            ok = False
    if not ok:
        return result
    for derived, source, key in ((paths["metrics"], paths["pool"], "metrics"), (paths["balanced"], paths["metrics"], "balanced")):
        bad = _chain(ctx, derived, source, makers[key])
        if bad is not None:
            result.checks.append(bad)
    if result.checks:
        return result
    inputs = {"metrics": paths["metrics"], "balanced": paths["balanced"]}
    rep, why = reused_report(ctx, result, REPORT, inputs, th.model_dump())
    if rep is None:
        from rc1.data import difficulty as D
        from rc1.data.io import read_jsonl
        from rc1.runtime.errors import ConfigError

        ctx.progress(f"difficulty: recomputing ({why})")
        try:
            m_items, b_items = read_jsonl(ws.path(paths["metrics"])), read_jsonl(ws.path(paths["balanced"]))
            if any("difficulty" not in it or "bucket" not in it for it in b_items):
                raise ConfigError(f"{paths['balanced']}: items lack difficulty/bucket")
        except ConfigError as exc:
            result.checks.append(Check("difficulty inputs readable", None, "valid", False, exc.message))
            return result
        rep = D.build_report(m_items, b_items, th, tokenizer="(see metrics meta)", inputs={})
        result.notes.append(f"recomputed: {why}; run `rc1 data difficulty validate` to save the report")
    result.checks.extend(Check.from_dict(c) for c in rep["checks"])
    result.checks.append(outcome_check(ctx, result))
    return result


def outcome_check(ctx: GateContext, result: GateResult) -> Check:
    """Do the buckets track the base model's outcomes on the dev split? (see the module docstring)"""
    from rc1.data import difficulty as D
    from rc1.data.tokens import get_counter
    from rc1.gates.pool import tokenizer_base
    from rc1.runtime.errors import ConfigError

    th = ctx.gates.difficulty
    name = "buckets vs base-model outcomes (dev split): easy - hard success (pp)"
    threshold = f"CI lower bound > {th.outcome_gap_min_pp:g} ({th.outcome_confidence:.0%} CI)"
    if ctx.config is None:
        return Check.unavailable(name, "needs the run config (dev split and base model)")
    from rc1.rewards.responses import dev_base_outcomes

    try:
        items, outcomes, meta, rel = dev_base_outcomes(ctx.ws, ctx.config)
    except ConfigError as exc:
        return Check(name, None, threshold, False, exc.message)
    for p in (ctx.config.data.eval_path, rel, rel + ".meta.json"):
        result.evidence.append(Evidence.of(ctx.ws, p))
    measured, _ = D.compute_metrics(items, get_counter(tokenizer_base(ctx)))
    gap = D.outcome_gap(measured, outcomes, confidence=th.outcome_confidence, min_successes=th.outcome_min_successes,
                        gap_min_pp=th.outcome_gap_min_pp, seed=len(items))
    rates = "; ".join(f"{t}: " + ", ".join(f"{b} {r['successes']}/{r['answers']}" for b, r in row.items() if r["answers"])
                      for t, row in gap["by_task"].items() if any(r["answers"] for r in row.values()))
    result.notes.append(f"base-model outcomes on the dev split ({rel}, {meta.get('generations')} answers per item): {rates}")
    detail = f"{gap['why']}; successes/answers {rates}"
    if not gap["tasks_compared"] and ctx.config.difficulty_fit.enable:
        # the fitted dev split holds the levels the fit kept, not a draw from the pool's buckets
        return Check.not_applicable(name, "difficulty_fit is on: the dev split holds the fitted levels, of one bucket "
                                          "per task here, so it cannot compare the pool's easy and hard items; training "
                                          "draws no item by those buckets (the curriculum walks the fitted levels), and "
                                          "the fit measured each level's base-model pass rate itself "
                                          f"({FIT_REPORT}); successes/answers {rates}")
    if not gap["measurable"]:
        return Check.not_measurable(name, threshold, detail, measured=gap["gap_pp"])
    lo = gap["ci_pp"][0]
    return Check(name, round(lo, 2), threshold, lo > th.outcome_gap_min_pp, detail)
