"""`rc1 status` as data: state, last gate results, recent metrics, checkpoints, operations figures.

The CLI prints it; the console shows it. Nothing here changes any file.
"""

from __future__ import annotations

import json
from pathlib import Path

from rc1.state import store
from rc1.state.table import forward_from
from rc1.runtime.fingerprint import ARTIFACTS_MANIFEST
from rc1.runtime.layout import GATE_REPORTS, JUDGE_STATS
from rc1.runtime.metrics import last_metrics
from rc1.runtime.workspace import Workspace

CACHE_ALERT = 0.95


def _load_json(p: Path) -> dict | None:
    try:
        return json.loads(p.read_text())
    except (OSError, json.JSONDecodeError):
        return None


def _checkpoints(ws: Workspace) -> list[dict]:
    from rc1.runtime.checkpoint import list_checkpoints

    out = []
    root = ws.checkpoints
    if not root.exists():
        return out
    for run_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        for c in list_checkpoints(ws, run_dir):
            out.append({"run": run_dir.name, "path": ws.rel(c.path), "step": c.step, "size_bytes": c.size_bytes,
                        "verified": c.verified, "latest": c.is_latest, "best": c.is_best})
    return out


def _fingerprint_coverage(ws: Workspace) -> dict:
    p = ws.path(ARTIFACTS_MANIFEST)
    paths = set()
    if p.exists():
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                paths.add(json.loads(line)["path"])
            except (json.JSONDecodeError, KeyError):
                continue
    existing = [q for q in paths if ws.path(q).exists()]
    with_sha = [q for q in existing if ws.path(q + ".sha256").exists()]
    return {"artifacts": len(existing), "with_sha256": len(with_sha),
            "coverage": (len(with_sha) / len(existing)) if existing else None}


def collect_status(ws: Workspace, n_metrics: int = 20) -> dict:
    rec = store.load_record(ws)
    nxt = forward_from(rec.state)
    gates = {}
    gdir = ws.path(GATE_REPORTS)
    if gdir.exists():
        for p in sorted(gdir.glob("*.json")):
            doc = _load_json(p)
            if doc:
                gates[p.stem] = doc
    judge = _load_json(ws.path(JUDGE_STATS)) or {}
    ckpts = _checkpoints(ws)
    ops = {
        "judge_cache_hit_rate": judge.get("cache_hit_rate"),
        "judge_cache_alert": (judge.get("cache_hit_rate") or 0) >= CACHE_ALERT if judge else False,
        "judge_429_rate": judge.get("rate_429"),
        "judge_latency_avg_s": judge.get("latency_avg_s", judge.get("latency_p50_s")),
        "checkpoints_verified": sum(1 for c in ckpts if c["verified"]),
        "checkpoints_written": len(ckpts),
        "fingerprints": _fingerprint_coverage(ws),
    }
    return {
        "workspace": str(ws.root),
        "state": rec.state,
        "updated": rec.updated,
        "next": {"state": nxt["dest"], "gate": nxt["gate"]} if nxt else None,
        "config_path": rec.config_path,
        "tickets": sorted(rec.tickets),
        "gates": gates,
        "audit_tail": store.read_audit(ws, last=5),
        "metrics_tail": last_metrics(ws.metrics_path, n_metrics),
        "checkpoints": ckpts,
        "ops": ops,
    }
