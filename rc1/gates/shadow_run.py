"""Round 2 check: the shadow run (old vs new reward) meets its thresholds and is current.

Reads reports/shadow_run_<tag>.json (tag from the gates config) and verifies that it was made from
the current shadow set, responses file and weights file (sha256) with the run config's penalty
settings; then spearman and top-10 % overlap of the totals, and the improvement of the correlation
with success of the part of the reward that is not the verifier (rc1.rewards.shadow), judged on its
CI's lower bound. That improvement is `not measurable` when the answers hold fewer than
`min_outcomes` successes or failures, or when the new weights are the old ones (calibration did not
change them): there is then nothing that could show an improvement.
"""

from __future__ import annotations

import json

from rc1.gates.base import Check, GateContext, GateResult
from rc1.runtime.fingerprint import Evidence, sha256_file


def evaluate(ctx: GateContext) -> GateResult:
    g = ctx.gates.shadow_run
    rel = f"reports/shadow_run_{g.tag}.json"
    res = GateResult("shadow_run")
    path = ctx.ws.path(rel)
    if not path.exists():
        res.checks.append(Check.unavailable("shadow run report", f"{rel} missing: run `rc1 reward shadow-run --tag {g.tag}`"))
        return res
    res.evidence.append(Evidence.of(ctx.ws, path))
    rep = json.loads(path.read_text())
    inputs = rep.get("inputs", {})
    for label, key, sha_key in (("shadow set", "shadow_set", "shadow_set_sha256"),
                                ("responses", "responses", "responses_sha256"),
                                ("weights", "weights", "weights_sha256")):
        f = inputs.get(key)
        p = ctx.ws.path(f) if f else None
        if p is None or not p.exists():
            res.checks.append(Check(f"{label} file of the report", f, "exists", False))
            continue
        res.evidence.append(Evidence.of(ctx.ws, p))
        now = sha256_file(p)
        res.checks.append(Check(f"{label} unchanged since the shadow run", now[:12], f"== {str(inputs.get(sha_key))[:12]}",
                                now == inputs.get(sha_key), f))
    if ctx.config is not None:
        from rc1.rewards.shadow import penalty_settings

        current = penalty_settings(ctx.config)
        used = {k: rep.get("new_reward", {}).get(k) for k in current}
        res.checks.append(Check("penalty settings match the run config", used, f"== {current}", used == current))
        res.checks.append(Check.equals("weights file is the run config's", inputs.get("weights"), ctx.config.reward.weights))
        res.checks.append(Check.equals("shadow set is the run config's", inputs.get("shadow_set"), ctx.config.data.shadow_path))
    res.checks.append(Check.at_least("spearman(old, new)", rep.get("spearman"), g.spearman_min))
    res.checks.append(Check.at_least("top10_overlap", rep.get("top10_overlap"), g.top10_overlap_min))
    res.checks.append(improvement_check(rep, g))
    return res


def improvement_check(rep: dict, g) -> Check:
    name = "corr_improve_pct (reward beyond the verifier vs success), CI lower bound"
    ci = rep.get("corr_improve_pct_ci") or {}
    threshold = f">= {g.corr_improve_pct_min:g} ({ci.get('confidence', 0.95):.0%} CI)"
    outcomes = min(rep.get("n_success", 0), rep.get("n_failure", 0))
    counts = f"{rep.get('n_success')} solved, {rep.get('n_failure')} failed of {rep.get('n')}"
    detail = (f"median {rep.get('corr_improve_pct')}; corr to success old {rep.get('corr_to_success_old')} new "
              f"{rep.get('corr_to_success_new')} ({rep.get('corr_basis')}); {counts}")
    if "weights_changed" not in rep:
        return Check.unavailable(name, "the shadow run report predates the CI of the improvement: re-run "
                                       "`rc1 reward shadow-run`")
    if outcomes < g.min_outcomes:
        return Check.not_measurable(name, threshold, f"{counts}: a correlation with success needs at least "
                                                     f"{g.min_outcomes} of each (score more shadow items)",
                                    measured=rep.get("corr_improve_pct"))
    if not rep["weights_changed"]:
        return Check.not_measurable(name, threshold, "the new weights are the old ones (calibration did not change "
                                                     "them: see its report), so no improvement can show; " + counts,
                                    measured=rep.get("corr_improve_pct"))
    c = Check.at_least(name, ci.get("lo"), g.corr_improve_pct_min, detail)
    return Check(c.name, c.measured, threshold, c.passed, c.detail)
