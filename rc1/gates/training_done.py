"""training -> eval: the run reached its configured steps (or the operator stopped it) and a
verified checkpoint exists.

Reads reports/state/training_end.json (written by the recipe when a run ends: reason, step,
max_steps, checkpoint) and re-verifies that checkpoint's sha256 manifest. The steps check passes
when the checkpoint's step reaches the config's run.max_steps, or when the run ended on an
operator stop (`rc1 stop`, SIGTERM) or early stop — the stop marker is that file's `reason`.
"""

from __future__ import annotations

import json

from rc1.gates.base import Check, GateContext, GateResult
from rc1.runtime.checkpoint import (CheckpointError, META_STEP, read_latest, read_meta, verify_checkpoint)
from rc1.runtime.fingerprint import Evidence

from rc1.config.schema import TRAINING_END_FILE  # noqa: E402  (one seed; cfg.seed_run(i).end_file in general)
OPERATOR_STOPS = ("operator", "early_stop", "interrupt")


def evaluate(ctx: GateContext) -> GateResult:
    res = GateResult("training_done")
    ws = ctx.ws
    if ctx.config is None:
        res.checks.append(Check.unavailable("run config", "no run config known to the machine"))
        return res
    end_path = ws.path(TRAINING_END_FILE)
    end = None
    if end_path.exists():
        try:
            end = json.loads(end_path.read_text())
        except json.JSONDecodeError:
            end = None
        res.evidence.append(Evidence.of(ws, end_path))
    run_dir = ws.path(ctx.config.checkpoint_dir)
    latest = read_latest(run_dir)
    if latest is None:
        res.checks.append(Check("verified checkpoint", None, "exists and verifies", False,
                                f"no `latest` checkpoint in {ws.rel(run_dir)}"))
        return res
    try:
        verify_checkpoint(latest)
        step = int(read_meta(latest)[META_STEP])
        res.checks.append(Check("verified checkpoint", ws.rel(latest), "exists and verifies", True,
                                "every file matches its sha256 in manifest.json"))
        res.evidence.append(Evidence.of(ws, latest / "manifest.json"))
    except CheckpointError as exc:
        res.checks.append(Check("verified checkpoint", ws.rel(latest), "exists and verifies", False, exc.message))
        return res
    target = ctx.config.run.max_steps
    reason = (end or {}).get("reason")
    stopped = reason in OPERATOR_STOPS and (end or {}).get("step") == step
    res.checks.append(Check("steps reached", step, f">= {target} (or stopped by the operator)",
                            step >= target or stopped,
                            f"run ended: {reason}" if reason else "no training_end record"))
    return res
