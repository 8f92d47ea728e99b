"""Round 1/2 check: the scorer is a real, live model that tells correct answers from wrong ones.

Reads reports/scorer_probe.json (written by `rc1 reward probe --live`) and the judge's score
ledger: the probe passed with real latency and billable usage on the configured provider; the
judge's discrimination (AUC of its grades vs verified correctness on known-correct and known-wrong
answers) has a CI whose lower bound reaches `scorer.auc_min`, measured at `scorer.auc_confidence`;
over the last `window` scores there is billable usage, no score from a mock/non-live source, and
the cache hit rate is below the round's threshold (round1: cache_hit_lt_round1, later: _round2). Those
scores are the training-time scoring window once the judge has graded in the training loop
(reward.source judge | hybrid), the probe's before: repeated fresh-nonce probes cannot vouch for a
training run whose grades all came from the cache.
"""

from __future__ import annotations

import json

from rc1.gates.base import Check, GateContext, GateResult
from rc1.runtime.fingerprint import Evidence
from rc1.runtime.layout import JUDGE_STATS


def evaluate(ctx: GateContext) -> GateResult:
    from rc1.config.schema import ScorerSection
    from rc1.judge.probe import PROBE_REPORT, liveness

    g = ctx.gates.scorer
    scorer = ctx.config.scorer if ctx.config is not None else ScorerSection()
    threshold = g.cache_hit_lt_round1 if ctx.round == "round1" else g.cache_hit_lt_round2
    res = GateResult("scorer")
    probe_path = ctx.ws.path(PROBE_REPORT)
    if not probe_path.exists():
        res.checks.append(Check.unavailable("live probe", f"{PROBE_REPORT} missing: run `rc1 reward probe --n "
                                                          f"{g.probe_n} --live`"))
    else:
        res.evidence.append(Evidence.of(ctx.ws, probe_path))
        probe = json.loads(probe_path.read_text())
        res.checks.append(Check.equals("probe provider", probe.get("provider"), scorer.provider))
        res.checks.append(Check.at_least("probe items", probe.get("n"), g.probe_n))
        if g.require_live:
            res.checks.append(Check.equals("probe was live", bool(probe.get("live_required")) and
                                           probe.get("cache_samples") == 0, True))
        res.checks.append(discrimination_check(probe, g))
        res.checks.append(Check.equals("probe passed", probe.get("passed"), True, "; ".join(probe.get("problems", []))))
        res.checks.append(Check.greater("probe latency p50 (s)", probe.get("latency_p50_s"), 0.0))
        res.checks.append(Check.at_least("probe billable tokens", probe.get("billable_tokens"), 1))
    stats_path = ctx.ws.path(JUDGE_STATS)
    if stats_path.exists():
        res.evidence.append(Evidence.of(ctx.ws, stats_path))
    live = liveness(ctx.ws, scorer.cache_path, cache_hit_lt=threshold, window=g.window)
    if not live.window:
        res.checks.append(Check.unavailable("judge ledger", live.problems[0]))
        return res
    w = live.window
    scope = f"last {g.window} {'training-time ' if live.source == 'training' else ''}scores"
    res.checks.append(Check.at_least(f"billable tokens in {scope}", w["billable_tokens"], 1))
    res.checks.append(Check.greater(f"max live latency in {scope} (s)", w["max_latency_s"], 0.0))
    res.checks.append(Check.equals("scores from mock/non-live sources", w["non_live"], 0,
                                   ", ".join(w["non_live_sources"])))
    res.checks.append(Check.less(f"cache hit rate, {scope}", w["cache_hit_rate"], threshold))
    last_run = "last training judge run" if live.source == "training" else "last judge run"
    res.checks.append(Check.less(f"cache hit rate, {last_run}", live.last_run.get("cache_hit_rate"), threshold,
                                 live.last_run_id or ""))
    return res


def discrimination_check(probe: dict, g) -> Check:
    """The judge's AUC on the probe, judged on its CI's lower bound (constant/chance/inverted judges named)."""
    name = "judge discrimination: AUC CI lower bound"
    threshold = f">= {g.auc_min:g} ({g.auc_confidence:.0%} CI)"
    d = probe.get("discrimination")
    if not isinstance(d, dict):
        return Check.unavailable(name, "the probe report has no discrimination (made by an older rc1): re-run "
                                       "`rc1 reward probe --live`")
    if d.get("confidence") != g.auc_confidence:
        return Check(name, None, threshold, False, f"the probe measured a {d.get('confidence')} CI, the gates "
                                                   f"config asks for {g.auc_confidence}: re-run the probe")
    tasks = ", ".join(f"{t} {v.get('auc'):.3f}" for t, v in (probe.get("by_task") or {}).items()
                      if v.get("auc") is not None)
    detail = f"method {probe.get('method')}: {d.get('why')}; per task {tasks}"
    if d.get("verdict") == "not measurable":
        return Check.not_measurable(name, threshold, d.get("why", ""))
    lo = (d.get("ci") or [None])[0]
    c = Check.at_least(name, lo, g.auc_min, detail)
    return Check(c.name, c.measured, threshold, c.passed, c.detail)
