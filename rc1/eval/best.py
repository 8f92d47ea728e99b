"""best/: the checkpoint chosen on the dev split, copied append-only into <run>/best/<step dir>/ with an
index line per choice (never chosen on the held-out set)."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from rc1.eval.splits import DEV, ItemSet
from rc1.runtime.atomic import append_line, fsync_dir
from rc1.runtime.fingerprint import sha256_file, sha256_json
from rc1.runtime.workspace import Workspace

BEST_INDEX = "index.jsonl"


def best_index(ws: Workspace, run_dir: str) -> list[dict]:
    p = ws.path(run_dir) / "best" / BEST_INDEX
    if not p.exists():
        return []
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def selection_of(dev: ItemSet) -> dict:
    """What a best/ choice was measured on: the dev split's file and items (comparable only to the same)."""
    return {"split": DEV, "path": dev.path, "n": len(dev.items),
            "key": sha256_json([dev.sha256] + [str(it["id"]) for it in dev.items])}


def update_best(ws: Workspace, run_dir: str, ckpt: Path, metric: str, value: float | None, report_rel: str,
                selection: dict | None) -> dict:
    """Copy `ckpt` to <run>/best/<step dir>/ if it beats every earlier best on `metric` measured on the same
    dev items (`selection`, from `selection_of`). Without a dev result nothing is chosen: best/ is never
    chosen on the held-out set. Append-only: earlier best copies and index lines are never modified."""
    from rc1.runtime.checkpoint import MANIFEST_FILE, TMP_PREFIX, verify_checkpoint

    out = {"metric": metric, "value": value, "selection": selection, "previous_best": None, "updated": False,
           "path": None}
    if selection is None:
        out["reason"] = "no dev split evaluated: best/ is chosen on the dev split only, never on the held-out set"
        return out
    entries = best_index(ws, run_dir)
    same = [e for e in entries if e.get("metric") == metric and e.get("value") is not None
            and (e.get("selection") or {}).get("key") == selection["key"]]
    prev = max((e["value"] for e in same), default=None)
    out["previous_best"] = prev
    if value is None:
        out["reason"] = "metric undefined on this eval's dev split"
        return out
    if prev is not None and value <= prev:
        out["reason"] = f"dev {metric} {value:.4g} does not beat the best so far ({prev:.4g})"
        return out
    best_root = ws.path(run_dir) / "best"
    best_root.mkdir(parents=True, exist_ok=True)
    dest = best_root / ckpt.name
    if dest.exists():  # this step was copied before (a re-eval): never overwrite a best copy
        out["reason"] = f"{ws.rel(dest)} already exists (kept as is)"
    else:
        tmp = best_root / f"{TMP_PREFIX}{ckpt.name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(ckpt, tmp, symlinks=False)
        verify_checkpoint(tmp)
        os.replace(tmp, dest)
        fsync_dir(best_root)
    manifest_sha = sha256_file(dest / MANIFEST_FILE)
    append_line(best_root / BEST_INDEX, json.dumps({
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "step_dir": ckpt.name, "path": ws.rel(dest),
        "source": ws.rel(ckpt), "metric": metric, "value": value, "previous_best": prev, "selection": selection,
        "manifest_sha256": manifest_sha, "report": report_rel}))
    out.update(updated=True, path=ws.rel(dest), manifest_sha256=manifest_sha)
    return out
