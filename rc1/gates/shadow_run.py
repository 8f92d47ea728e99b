"""Round 2 check: the shadow run (old vs new reward) meets its thresholds and is current.

Reads reports/shadow_run_<tag>.json (tag from the gates config) and verifies that it was made from
the current shadow set, responses file and weights file (sha256) with the run config's penalty
settings; then spearman, top-10 % overlap and correlation-to-success improvement vs thresholds.
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
    outcomes = min(rep.get("n_success", 0), rep.get("n_failure", 0))
    res.checks.append(Check.at_least(
        "solved and failed answers (fewer of the two)", outcomes, g.min_outcomes,
        f"{rep.get('n_success')} solved, {rep.get('n_failure')} failed of {rep.get('n')}: the correlation with "
        "success needs both" + ("" if outcomes >= g.min_outcomes else "; score more shadow items (eval.n_shadow)")))
    res.checks.append(Check.at_least("spearman(old, new)", rep.get("spearman"), g.spearman_min))
    res.checks.append(Check.at_least("top10_overlap", rep.get("top10_overlap"), g.top10_overlap_min))
    res.checks.append(Check.at_least("corr_improve_pct", rep.get("corr_improve_pct"), g.corr_improve_pct_min,
                                     f"corr to success old {rep.get('corr_to_success_old')} new {rep.get('corr_to_success_new')}"))
    return res
