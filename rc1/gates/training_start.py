"""round2_pass -> training: the round 2 ticket is genuine and nothing it vouched for has changed.

Re-hashes every piece of evidence in reports/preflight/round2_pass.json (pool, weights, configs,
reports) and checks the run config is the one that passed.
"""

from __future__ import annotations

from rc1.config.load import config_hash
from rc1.gates.base import Check, GateContext, GateResult
from rc1.state.store import ticket_path, verify_ticket
from rc1.runtime.errors import TamperError
from rc1.runtime.fingerprint import Evidence


def evaluate(ctx: GateContext) -> GateResult:
    return check_ticket(ctx, "round2_pass")


def check_ticket(ctx: GateContext, state: str) -> GateResult:
    res = GateResult("training_start")
    try:
        body = verify_ticket(ctx.ws, state)
    except TamperError as exc:
        res.checks.append(Check(f"{state} ticket", "refused", "genuine and unchanged", False, exc.message))
        for line in exc.lines[1:]:
            res.notes.append(line)
        return res
    n = len(body.get("evidence", []))
    res.checks.append(Check(f"{state} ticket", "valid", "genuine and unchanged", True,
                            f"{n} evidence file(s) re-hashed, all unchanged"))
    res.evidence.append(Evidence.of(ctx.ws, ticket_path(ctx.ws, state)))
    if ctx.config is not None:
        now = config_hash(ctx.config)
        res.checks.append(Check("run config matches the ticket", now[:12], f"== {str(body.get('config_hash'))[:12]}",
                                now == body.get("config_hash"),
                                "" if now == body.get("config_hash") else
                                "the run config differs from the one that passed round 2; re-run the gates"))
    return res
