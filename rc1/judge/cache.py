"""Persistent judge cache and score ledger in one SQLite file (WAL mode).

- `cache`: one row per successful judge sample, keyed on sha256(canonical JSON of endpoint, model,
  messages, sampling params, rubric version, sample index). Errors and unparseable replies are
  never stored, so a later run asks again.
- `ledger`: one row per judge sample ever requested, with its provenance ('live' or 'cache';
  anything else counts as non-live), status, latency, tokens, attempts and 429s. The scorer gate
  and `rc1 reward assert-live` read the last N rows: of training (run ids starting with
  TRAIN_RUN_PREFIX) once training has begun, else of the probe and other callers.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from rc1.runtime.atomic import canonical_json
from rc1.runtime.fingerprint import sha256_text

_SCHEMA = """
CREATE TABLE IF NOT EXISTS cache (
    key TEXT PRIMARY KEY, content TEXT NOT NULL, usage TEXT NOT NULL, created REAL NOT NULL);
CREATE TABLE IF NOT EXISTS ledger (
    id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, run_id TEXT NOT NULL, provider TEXT NOT NULL,
    model TEXT NOT NULL, item_id TEXT, sample INTEGER, key TEXT, provenance TEXT NOT NULL,
    status TEXT NOT NULL, score REAL, latency_s REAL, prompt_tokens INTEGER, completion_tokens INTEGER,
    attempts INTEGER, n429 INTEGER, error TEXT);
CREATE INDEX IF NOT EXISTS ledger_run ON ledger(run_id);
"""


TRAIN_RUN_PREFIX = "train-"  # ledger run ids of the judge in the training loop (rc1.judge.live)


def cache_key(endpoint: str, model: str, messages: list[dict], params: dict, rubric_version: str) -> str:
    return sha256_text(canonical_json({"endpoint": endpoint.rstrip("/"), "model": model, "messages": messages,
                                       "params": params, "rubric_version": rubric_version}))


@dataclass
class LedgerRow:
    """One row of the score ledger table. Its outcome fields repeat rc1.judge.client.SampleResult's on purpose:
    the ledger is the stored schema (it also names run, provider, model, item and key), the sample result the
    in-memory value that carries the reply; the client writes one from the other."""

    run_id: str
    provider: str
    model: str
    item_id: str | None
    sample: int | None
    key: str | None
    provenance: str  # live | cache | (anything else is non-live, e.g. mock)
    status: str  # ok | failed (unparseable reply) | error (request failed)
    score: float | None = None
    latency_s: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    attempts: int = 0
    n429: int = 0
    error: str | None = None
    ts: float = 0.0


class JudgeStore:
    """Thread-safe: one connection guarded by a lock (SQLite serializes writers anyway)."""

    def __init__(self, path: str | Path, *, readonly: bool = False):
        self.path = Path(path)
        self._lock = threading.Lock()
        if readonly:
            self._db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, check_same_thread=False)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            self._db.executescript(_SCHEMA)
            self._db.commit()

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> "JudgeStore":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def journal_mode(self) -> str:
        return self._db.execute("PRAGMA journal_mode").fetchone()[0]

    # ------------------------------------------------------------------ cache
    def get(self, key: str) -> tuple[str, dict] | None:
        with self._lock:
            row = self._db.execute("SELECT content, usage FROM cache WHERE key = ?", (key,)).fetchone()
        return (row[0], json.loads(row[1])) if row else None

    def put(self, key: str, content: str, usage: dict) -> None:
        with self._lock:
            self._db.execute("INSERT OR REPLACE INTO cache(key, content, usage, created) VALUES (?, ?, ?, ?)",
                             (key, content, json.dumps(usage), time.time()))
            self._db.commit()

    def cache_size(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM cache").fetchone()[0]

    # ------------------------------------------------------------------ ledger
    def record(self, row: LedgerRow) -> None:
        d = asdict(row)
        d["ts"] = d["ts"] or time.time()
        cols = ", ".join(d)
        with self._lock:
            self._db.execute(f"INSERT INTO ledger({cols}) VALUES ({', '.join('?' * len(d))})", tuple(d.values()))
            self._db.commit()

    def recent(self, n: int, run_prefix: str | None = None) -> list[dict[str, Any]]:
        """The last n rows, of the runs whose id starts with run_prefix when given."""
        where, args = ("WHERE substr(run_id, 1, ?) = ? ", (len(run_prefix), run_prefix)) if run_prefix else ("", ())
        with self._lock:
            cur = self._db.execute(f"SELECT * FROM ledger {where}ORDER BY id DESC LIMIT ?", (*args, int(n)))
            names = [c[0] for c in cur.description]
            rows = cur.fetchall()
        return [dict(zip(names, r)) for r in rows]

    def run_rows(self, run_id: str) -> list[dict[str, Any]]:
        with self._lock:
            cur = self._db.execute("SELECT * FROM ledger WHERE run_id = ? ORDER BY id", (run_id,))
            names = [c[0] for c in cur.description]
            rows = cur.fetchall()
        return [dict(zip(names, r)) for r in rows]

    def last_run_id(self, run_prefix: str | None = None) -> str | None:
        rows = self.recent(1, run_prefix)
        return rows[0]["run_id"] if rows else None


def liveness_summary(rows: list[dict]) -> dict:
    """Cache hit rate, non-live count, billable tokens and latency over ledger rows."""
    answered = [r for r in rows if r["status"] in ("ok", "failed")]
    cache = sum(r["provenance"] == "cache" for r in answered)
    non_live = [r for r in rows if r["provenance"] not in ("live", "cache")]
    live_ok = [r for r in answered if r["provenance"] == "live"]
    lat = [r["latency_s"] for r in live_ok if r["latency_s"] is not None]
    return {
        "scores": len(rows),
        "answered": len(answered),
        "cache_hits": cache,
        "cache_hit_rate": (cache / len(answered)) if answered else None,
        "live": len(live_ok),
        "non_live": len(non_live),
        "non_live_sources": sorted({r["provenance"] for r in non_live}),
        "billable_tokens": int(sum((r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0) for r in live_ok)),
        "max_latency_s": max(lat) if lat else 0.0,
        "min_latency_s": min(lat) if lat else 0.0,
        "errors": sum(r["status"] == "error" for r in rows),
        "failed": sum(r["status"] == "failed" for r in rows),
    }
