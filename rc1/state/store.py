"""Machine persistence: reports/state/machine.json, the append-only audit log, and pass tickets.

A ticket (reports/preflight/<state>.json) is written only here, by gate code, after a gate
passed. It carries the evidence hashes and an HMAC with a key kept in reports/state/; the
machine state records the ticket's sha256. A ticket is valid only if all three agree and
every piece of evidence still hashes the same.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import time
from dataclasses import dataclass, field
from pathlib import Path

from rc1.state.table import STATES
from rc1.runtime.atomic import append_line, atomic_write_json, atomic_write_text, canonical_json
from rc1.runtime.errors import ConfigError, TamperError
from rc1.runtime.fingerprint import Evidence, sha256_file
from rc1.runtime.provenance import git_commit
from rc1.runtime.workspace import Workspace

MACHINE_FILE = "reports/state/machine.json"
AUDIT_FILE = "reports/state/audit.jsonl"
KEY_FILE = "reports/state/ticket.key"


def now_iso() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class MachineRecord:
    state: str = "idle"
    updated: str = ""
    tickets: dict[str, str] = field(default_factory=dict)  # state -> sha256 of its ticket file
    config_path: str | None = None
    config_hash: str | None = None

    def to_dict(self) -> dict:
        return {"state": self.state, "updated": self.updated, "tickets": self.tickets,
                "config_path": self.config_path, "config_hash": self.config_hash}


def load_record(ws: Workspace) -> MachineRecord:
    p = ws.path(MACHINE_FILE)
    if not p.exists():
        return MachineRecord()
    try:
        d = json.loads(p.read_text())
    except (json.JSONDecodeError, OSError) as exc:
        raise ConfigError(f"{MACHINE_FILE}: unreadable machine state ({exc}); restore it or run `rc1 reset`") from None
    if d.get("state") not in STATES:
        raise ConfigError(f"{MACHINE_FILE}: unknown state {d.get('state')!r}")
    return MachineRecord(d["state"], d.get("updated", ""), dict(d.get("tickets", {})), d.get("config_path"),
                         d.get("config_hash"))


def save_record(ws: Workspace, rec: MachineRecord) -> None:
    rec.updated = now_iso()
    atomic_write_json(ws.path(MACHINE_FILE), rec.to_dict())


def append_audit(ws: Workspace, entry: dict) -> None:
    append_line(ws.path(AUDIT_FILE), json.dumps({"time": now_iso(), **entry}, ensure_ascii=False, default=str))


def read_audit(ws: Workspace, last: int | None = None) -> list[dict]:
    p = ws.path(AUDIT_FILE)
    if not p.exists():
        return []
    out = []
    for line in p.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return out[-last:] if last else out


def _key(ws: Workspace) -> bytes:
    p = ws.path(KEY_FILE)
    if not p.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(p, secrets.token_hex(32))
        os.chmod(p, 0o600)
    return bytes.fromhex(p.read_text().strip())


def _sign(ws: Workspace, body: dict) -> str:
    return hmac.new(_key(ws), canonical_json(body).encode(), hashlib.sha256).hexdigest()


def ticket_path(ws: Workspace, state: str) -> Path:
    return ws.preflight_dir / f"{state}.json"


def write_ticket(ws: Workspace, state: str, gate: str, results: list, *,
                 config_path: str | None, config_hash: str | None, profile: str | None) -> tuple[Path, str]:
    """Sign and write the pass ticket of `state`. `results` are the passing gate's GateResults (their
    evidence and checks are recorded; typed loosely so this store sits below rc1.gates)."""
    evidence: dict[str, str] = {}
    for r in results:
        for e in r.evidence:
            evidence[e.path] = e.sha256
    body = {
        "round": state, "gate": gate, "pass": True, "time": now_iso(), "profile": profile,
        "config_path": config_path, "config_hash": config_hash, "git_commit": git_commit(),
        "evidence": [{"path": p, "sha256": h} for p, h in sorted(evidence.items())],
        "checks": [c.to_dict() for r in results for c in r.checks],
    }
    doc = {**body, "hmac": _sign(ws, body)}
    path = atomic_write_json(ticket_path(ws, state), doc)
    return path, sha256_file(path)


def verify_ticket(ws: Workspace, state: str, rec: MachineRecord | None = None) -> dict:
    """Return the ticket body, or raise TamperError naming what is wrong."""
    rec = rec or load_record(ws)
    path = ticket_path(ws, state)
    rel = ws.rel(path)
    if not path.exists():
        raise TamperError(f"{rel}: no pass ticket; run `rc1 advance --to {state}`")
    recorded = rec.tickets.get(state)
    actual = sha256_file(path)
    if recorded is None:
        raise TamperError(f"{rel}: ticket was not written by a passing gate (the machine has no record of it)")
    if actual != recorded:
        raise TamperError(f"{rel}: ticket was edited after the gate wrote it (sha256 {recorded[:12]} -> {actual[:12]})")
    try:
        doc = json.loads(path.read_text())
        body = {k: v for k, v in doc.items() if k != "hmac"}
        good = hmac.compare_digest(doc.get("hmac", ""), _sign(ws, body))
    except (json.JSONDecodeError, AttributeError, ValueError):
        good = False
    if not good:
        raise TamperError(f"{rel}: ticket signature does not match; it was not written by rc1's gate code")
    changed = [why for e in doc.get("evidence", []) if (why := Evidence(e["path"], e["sha256"]).changed(ws))]
    if changed:
        raise TamperError(f"evidence changed after {state} passed: {changed[0]}", lines=changed)
    return body
