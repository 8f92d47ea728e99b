"""Round 1 / round 2 pool gate: diversity, duplicates, length, task mix, leaks (SPEC §3).

Reads the raw seed pool (`pool.out`), the shadow set (`data.shadow_path`) and the v1 pool
(`pool.v1_pool`, default data/rollouts/rc1_v1.jsonl), or the standard locations without a config.
A diversity report is reused only when it is provably current: its sha256 sidecar verifies, the
sha256 of every input it records equals the file now, and it was measured with these thresholds.
Otherwise the checks are recomputed in memory (nothing is written). Missing inputs fail, naming
the command that makes them.
"""

from __future__ import annotations

import json

from rc1.config.load import FITTED
from rc1.data.applicability import v1_required
from rc1.gates.base import Check, GateContext, GateResult
from rc1.runtime.fingerprint import Evidence, sha256_file, verify_artifact
from rc1.runtime.layout import BALANCED_POOL, POOL, SHADOW_SET, V1_POOL, metrics_path_for
from rc1.runtime.layout import DIVERSITY_REPORT as REPORT

MAKERS = {
    "pool": "rc1 data build-pool --n 30000 --seed 20250821 --out {path}",
    "shadow": "rc1 data shadow-set --n 245 --seed 20250820 --stratify --out {path}",
    "v1": "rc1 data build-pool --version v1 --out {path}",
    "metrics": "rc1 data difficulty metrics --in {pool} --out {path}",
    "balanced": "rc1 data difficulty bucketize --metrics {metrics} --out {path}",
}


def data_paths(ctx: GateContext) -> dict[str, str]:
    cfg = ctx.config
    if cfg is None:
        pool, shadow, v1, balanced = POOL, SHADOW_SET, V1_POOL, BALANCED_POOL
    else:
        pool, shadow, balanced = cfg.pool.out, cfg.data.shadow_path, cfg.seed_pool
        v1 = cfg.pool.v1_pool or V1_POOL
    return {"pool": pool, "shadow": shadow, "v1": v1, "metrics": metrics_path_for(pool), "balanced": balanced}


def tokenizer_base(ctx: GateContext) -> str | None:
    """The base model whose tokenizer counts length - only when it can load offline (local dir,
    embedded or random bases); a hub id falls back to the embedded SmolLM2 tokenizer (the report says which)."""
    if ctx.config is None:
        return None
    base = ctx.config.model.base
    if base.startswith(("embedded:", "random:")) or ctx.ws.path(base).is_dir():
        return base
    return None


def missing_check(name: str, path: str, maker: str, **fmt) -> Check:
    return Check(f"{name} file", None, "exists", False, f"{path} is missing: make it with `{maker.format(path=path, **fmt)}`")


def reused_report(ctx: GateContext, result: GateResult, report: str, inputs: dict, thresholds: dict):
    """(report, "") when `report` was written from these inputs and thresholds (it becomes evidence of `result`);
    else (None, why it must be recomputed)."""
    rep, why = fresh_report(ctx, report, inputs, thresholds)
    if rep is not None:
        result.evidence.append(Evidence.of(ctx.ws, report))
        result.notes.append(f"checks from {report} (inputs and thresholds verified by sha256)")
    return rep, why


def fresh_report(ctx: GateContext, report: str, inputs: dict[str, str | None], thresholds: dict) -> tuple[dict | None, str]:
    """(report, '') if the report is current for these inputs and thresholds, else (None, why not)."""
    p = ctx.ws.path(report)
    if not p.exists():
        return None, f"{report} does not exist"
    if not verify_artifact(ctx.ws, p):
        return None, f"{report} does not match its sha256 sidecar"
    try:
        rep = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return None, f"{report} unreadable ({exc})"
    recorded = rep.get("inputs") or {}
    for key, path in inputs.items():
        rec = recorded.get(key)
        if path is None:
            if rec is not None:
                return None, f"{report} was measured with a {key} file that is now absent"
            continue
        if not rec or rec.get("sha256") != sha256_file(ctx.ws.path(path)) or rec.get("path") != ctx.ws.rel(ctx.ws.path(path)):
            return None, f"{report} is stale: {path} changed (or is not the file it measured)"
    if rep.get("thresholds") != thresholds:
        return None, f"{report} was measured with other thresholds"
    return rep, ""


def evaluate(ctx: GateContext) -> GateResult:
    ws, th = ctx.ws, ctx.gates.pool
    paths = data_paths(ctx)
    result = GateResult("pool")
    result.notes += [f"thresholds {part}" for part in ctx.gates.note.split("; ") if part.startswith(FITTED)]
    present = {k: ws.path(paths[k]).exists() for k in ("pool", "shadow", "v1")}
    for key in ("pool", "shadow", "v1"):
        if present[key]:
            result.evidence.append(Evidence.of(ws, paths[key]))
        elif key != "v1" or v1_required(ctx.config):  # else the report says whether the KL check applies
            result.checks.append(missing_check(key, paths[key], MAKERS[key]))
    if not present["pool"]:
        return result
    inputs = {"pool": paths["pool"], "shadow": paths["shadow"] if present["shadow"] else None,
              "v1": paths["v1"] if present["v1"] else None}
    rep, why = reused_report(ctx, result, REPORT, inputs, th.model_dump())
    if rep is None:
        from rc1.data import diversity as DV
        from rc1.data.io import check_items, read_jsonl
        from rc1.data.tokens import get_counter
        from rc1.runtime.errors import ConfigError

        ctx.progress(f"pool: recomputing ({why})")
        try:
            items = read_jsonl(ws.path(paths["pool"]))
            check_items(ws.path(paths["pool"]), items)
            shadow = read_jsonl(ws.path(paths["shadow"])) if present["shadow"] else None
            v1 = read_jsonl(ws.path(paths["v1"])) if present["v1"] else None
        except ConfigError as exc:
            result.checks.append(Check("pool readable", None, "valid JSONL", False, exc.message))
            return result
        rep = DV.validate(items, shadow, v1, th, counter=get_counter(tokenizer_base(ctx)))
        result.notes.append(f"recomputed: {why}; run `rc1 data validate-pool {paths['pool']}` to save the report")
    result.notes.append(f"tokenizer: {rep.get('tokenizer')}")
    result.checks.extend(Check.from_dict(c) for c in rep["checks"])
    return result
