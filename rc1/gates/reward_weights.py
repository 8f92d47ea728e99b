"""Round 1/2 check: configs/weights.json exists, every weight >= 0, sum = 1, each <= the maximum."""

from __future__ import annotations

from rc1.config.load import read_mapping, validate
from rc1.config.weights import WeightsFile
from rc1.gates.base import Check, GateContext, GateResult
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import Evidence
from rc1.runtime.layout import WEIGHTS


def evaluate(ctx: GateContext) -> GateResult:
    g = ctx.gates.reward
    rel = ctx.config.reward.weights if ctx.config is not None else WEIGHTS
    res = GateResult("reward_weights")
    path = ctx.ws.path(rel)
    res.checks.append(Check("weights file exists", rel if path.exists() else None, "exists", path.exists()))
    if not path.exists():
        return res
    res.evidence.append(Evidence.of(ctx.ws, path))
    try:
        wf = validate(WeightsFile, read_mapping(path), rel)
    except ConfigError as exc:
        res.checks.append(Check("weights file valid", None, "parses", False, "; ".join([exc.message, *exc.lines])))
        return res
    w = wf.weights
    negative = {k: v for k, v in w.items() if v < 0}
    res.checks.append(Check("all weights >= 0", min(w.values()) if w else None, ">= 0", bool(w) and not negative,
                            ", ".join(f"{k}={v:g}" for k, v in negative.items())))
    total = sum(w.values())
    res.checks.append(Check.within("sum of weights", total, 1 - g.sum_tol, 1 + g.sum_tol))
    top = max(w, key=w.get) if w else None
    res.checks.append(Check.at_most("max weight", w[top] if top else None, g.weight_max,
                                    f"largest: {top}" if top else "no weights"))
    return res
