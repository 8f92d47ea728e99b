"""SYNC export (SPEC §7): reports/sync/SYNC_round<N>.json built from real state only.

- artifacts_produced: every registered artifact whose file still matches its sha256.
- need_from_gemini: inputs the next gate is missing or failing on (from its last run).
- risks_blockers: the failing checks of the next gate, or ["none"].
"""

from __future__ import annotations

import json
from pathlib import Path

from rc1.state import store
from rc1.state.table import STATES, forward_from
from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.fingerprint import ARTIFACTS_MANIFEST, sha256_file
from rc1.runtime.layout import BALANCED_POOL, GATE_REPORTS, POOL, PROBE_REPORT, WEIGHTS
from rc1.runtime.workspace import Workspace

# What each gate area needs, so a failing area can name the artifact to ask for (a table of strings, shaped like
# the console's ACTIONS but sharing nothing with it).
AREA_NEEDS: dict[str, tuple[str, str, str]] = {
    "pool": ("seed_pool", POOL, "30k seed pool passing diversity/dedup/leak/mix checks"),
    "difficulty": ("difficulty_balanced_seed", BALANCED_POOL,
                   "balanced pool + reports/rc1/difficulty_report.json within the difficulty bounds"),
    "reward_weights": ("reward_weights", WEIGHTS, "weights >= 0, sum 1, each <= 0.5"),
    "overclar_penalty": ("overclar_penalty", "configs/", "use_overclar_penalty: true and its checks passing"),
    "scorer": ("live_scorer", PROBE_REPORT, "live judge probe with real latency and billable usage"),
    "shadow_run": ("shadow_run", "reports/shadow_run_pre_run_check.json", "shadow run over the 245-item shadow set"),
    "run_config": ("run_config", "configs/", "run config consistent with the gates profile"),
    "resources": ("disk", ".", "free disk above the gates threshold"),
    "training_start": ("round2_ticket", "reports/preflight/round2_pass.json", "valid round 2 ticket"),
    "training_done": ("checkpoint", "checkpoints/", "a verified checkpoint at the configured steps"),
    "rc1_eval": ("eval_report", "reports/", "eval report meeting the RC1 thresholds"),
    "scale": ("scale_pool", "data/rollouts/", "expanded pool passing before/after checks"),
}


def _round_of(state: str) -> int:
    return STATES.index(state) + 1


def produced_artifacts(ws: Workspace) -> list[dict]:
    p = ws.path(ARTIFACTS_MANIFEST)
    latest: dict[str, dict] = {}
    if p.exists():
        for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                e = json.loads(line)
            except json.JSONDecodeError:
                continue
            latest[e["path"]] = e
    out = []
    for path, e in sorted(latest.items()):
        f = ws.path(path)
        if f.exists() and f.is_file() and sha256_file(f) == e["sha256"]:
            out.append({"name": Path(path).name, "path": path, "sha256": e["sha256"], "kind": e.get("kind", "")})
    return out


def export_sync(ws: Workspace, round_n: int | None = None) -> Path:
    rec = store.load_record(ws)
    nxt = forward_from(rec.state)
    gate = nxt["gate"] if nxt else None
    gate_report = None
    if gate:
        gp = ws.path(f"{GATE_REPORTS}/{gate}.json")
        if gp.exists():
            try:
                gate_report = json.loads(gp.read_text())
            except json.JSONDecodeError:
                gate_report = None
    needs, blockers = [], []
    if gate_report:
        for res in gate_report.get("results", []):
            failing = [c for c in res.get("checks", []) if not c.get("passed")]
            if not failing:
                continue
            name, path, desc = AREA_NEEDS.get(res["gate"], (res["gate"], "", ""))
            needs.append({"name": name, "path": path, "desc": desc})
            for c in failing:
                blockers.append(f"{gate}/{res['gate']}: {c['name']} = {c.get('measured')} "
                                f"(threshold {c.get('threshold')}) {c.get('detail', '')}".strip())
    elif gate:
        blockers.append(f"gate {gate} has not been run yet (rc1 advance --to {nxt['dest']})")
    n = round_n if round_n is not None else _round_of(rec.state)
    doc = {
        "from": "rc1",
        "round": n,
        "state": rec.state,
        "next_gate": gate,
        "need_from_gemini": needs,
        "artifacts_produced": produced_artifacts(ws),
        "risks_blockers": blockers or ["none"],
        "notes": f"state {rec.state}; " + (f"next gate {gate} {'last refused' if blockers else 'not blocking'}"
                                           if gate else "final state reached"),
    }
    return atomic_write_json(ws.reports / "sync" / f"SYNC_round{n}.json", doc)
