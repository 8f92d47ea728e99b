"""Resources: free disk in the workspace."""

from __future__ import annotations

import shutil

from rc1.gates.base import Check, GateContext, GateResult


def evaluate(ctx: GateContext) -> GateResult:
    root = ctx.ws.root
    probe = root if root.exists() else next((p for p in root.parents if p.exists()), root)
    free_gb = shutil.disk_usage(probe).free / 1e9
    return GateResult("resources", [Check.greater("free disk (GB)", round(free_gb, 2), ctx.gates.resources.min_free_disk_gb,
                                                 f"at {ctx.ws.rel(probe) or '.'}")])
