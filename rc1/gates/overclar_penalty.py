"""Round 1/2 check: the over-clarification penalty is on in the run config and behaves as specified.

The behaviour is verified in-process with `rc1.rewards.penalty_check.overclar_penalty_cases` (the same
cases as tests/rewards/test_overclar_penalty.py), using the run config's alpha and cap.
"""

from __future__ import annotations

from rc1.gates.base import Check, GateContext, GateResult
from rc1.runtime.fingerprint import Evidence


def evaluate(ctx: GateContext) -> GateResult:
    from rc1.rewards.penalty_check import overclar_penalty_cases

    res = GateResult("overclar_penalty")
    cfg = ctx.config
    if cfg is None:
        res.checks.append(Check.unavailable("use_overclar_penalty", "no run config"))
        return res
    if ctx.config_path is not None and ctx.config_path.exists():
        res.evidence.append(Evidence.of(ctx.ws, ctx.config_path))
    if ctx.gates.reward.require_overclar_penalty:
        res.checks.append(Check.equals("use_overclar_penalty", cfg.use_overclar_penalty, True))
    alpha, cap = cfg.reward.overclar.alpha, cfg.reward.overclar.cap
    res.checks.append(Check.greater("overclar alpha", alpha, 0.0))
    res.checks.append(Check.at_least("overclar cap", cap, 1))
    for case in overclar_penalty_cases(alpha, cap):
        res.checks.append(Check(f"penalty {case.name}", round(case.measured, 9), f"== {case.expected:g}", case.passed))
    return res
