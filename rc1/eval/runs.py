"""The training runs an eval judges: one per seed, each with its checkpoints and its end record.

A run's end record (cfg.seed_run(i).end_file, written by the training recipe) says how it ended:
`reason` (completed | operator | early_stop | interrupted | ...), `stopped_early` (absent in older
records: then any reason other than "completed"), `step`, `checkpoint`, `train_dtype`.

A run that stopped early is not judged by the RC1 gate unless the operator accepted it explicitly
(`rc1 advance --to scale_1000 --accept-early-stop "why"`). The acceptance is an audit-log entry
naming the run and the sha256 of its end record, so it never carries over to a later run (which
writes a new end record).
"""

from __future__ import annotations

import getpass
import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import sha256_file
from rc1.runtime.workspace import Workspace

if TYPE_CHECKING:  # pragma: no cover
    from rc1.config.schema import SeedRun, TrainConfig

ACCEPT_EARLY_STOP = "accept_early_stop"
ACCEPT_DIVERGENCE = "accept_divergence"  # the training_done gate: a run's reward/success divergence alerts accepted
DIVERGENCE_ALERT = "reward_success_divergence"  # the kind rc1.training.monitor.DivergenceMonitor gives its alerts
UNKNOWN = "unknown"


@dataclass(frozen=True)
class RunEnd:
    """A run's end record as read from disk (None fields when there is none)."""

    end_file: str
    record: dict | None
    sha256: str | None

    @property
    def reason(self) -> str | None:
        return (self.record or {}).get("reason")

    @property
    def stopped_early(self) -> bool | None:
        if self.record is None:
            return None
        flag = self.record.get("stopped_early")
        return bool(flag) if flag is not None else self.reason != "completed"

    @property
    def train_dtype(self) -> str:
        return str((self.record or {}).get("train_dtype") or UNKNOWN)

    def to_dict(self) -> dict:
        r = self.record or {}
        return {"end_file": self.end_file, "sha256": self.sha256, "exists": self.record is not None,
                "reason": self.reason, "stopped_early": self.stopped_early, "step": r.get("step"),
                "max_steps": r.get("max_steps"), "checkpoint": r.get("checkpoint"), "train_dtype": self.train_dtype,
                "reason_detail": r.get("reason_detail"), "judge": r.get("judge")}


def seed_runs(cfg: "TrainConfig") -> list["SeedRun"]:
    return [cfg.seed_run(i) for i in range(len(cfg.seed_list))]


def read_end(ws: Workspace, end_file: str) -> RunEnd:
    """A run's end record (`SeedRun.end_file`); RunEnd with record None when there is none yet."""
    p = ws.path(end_file)
    if not p.exists():
        return RunEnd(end_file, None, None)
    try:
        record = json.loads(p.read_text())
    except json.JSONDecodeError:
        raise ConfigError(f"{end_file}: not JSON (a damaged training end record)") from None
    if not isinstance(record, dict):
        raise ConfigError(f"{end_file}: not a JSON object")
    return RunEnd(end_file, record, sha256_file(p))


def run_of_checkpoint(ws: Workspace, cfg: "TrainConfig", ckpt: Path) -> "SeedRun | None":
    """The seed run whose checkpoint directory holds `ckpt` (a step dir, or a best/ copy of one)."""
    target = ckpt.resolve()
    for run in sorted(seed_runs(cfg), key=lambda r: -len(r.checkpoint_dir)):  # seed sub-dirs before their parent
        root = ws.path(run.checkpoint_dir).resolve()
        if target == root or root in target.parents:
            return run
    return None


def acceptances(ws: Workspace, trigger: str = ACCEPT_EARLY_STOP) -> list[dict]:
    from rc1.state.store import read_audit

    return [e for e in read_audit(ws) if e.get("trigger") == trigger]


def acceptance_for(ws: Workspace, run_dir: str, end: RunEnd, trigger: str = ACCEPT_EARLY_STOP) -> dict | None:
    """The newest audited acceptance (`trigger`) of exactly this run's current end record, if any."""
    if end.sha256 is None:
        return None
    found = [e for e in acceptances(ws, trigger) if e.get("run_dir") == run_dir
             and e.get("end_record_sha256") == end.sha256]
    return found[-1] if found else None


def _record_acceptances(ws: Workspace, cfg: "TrainConfig", why: str, config_path: str | None, *, flag: str,
                        example: str, trigger: str, describe) -> list[dict]:
    """One audit-log entry per seed run of `cfg` that `describe(run, end)` returns fields for (None: skip it),
    naming the run's end record by sha256 so it never applies to a later run."""
    from rc1.config.load import config_hash
    from rc1.state.store import append_audit, load_record
    from rc1.runtime.provenance import git_commit

    why = (why or "").strip()
    if not why:
        raise ConfigError(f"{flag} needs a reason: {flag} \"{example}\"")
    state = load_record(ws).state
    entries = []
    for run in seed_runs(cfg):
        end = read_end(ws, run.end_file)
        fields = describe(run, end)
        if fields is None:
            continue
        entry = {"from": state, "to": state, "trigger": trigger, "gate": None, "passed": None,
                 "seed_index": run.index, "seed": run.seed, "run_dir": run.checkpoint_dir, "end_record": run.end_file,
                 "end_record_sha256": end.sha256, **fields, "why": why, "operator": getpass.getuser(),
                 "config_path": config_path, "config_hash": config_hash(cfg), "git_commit": git_commit()}
        append_audit(ws, entry)
        entries.append(entry)
    return entries


def accept_early_stop(ws: Workspace, cfg: "TrainConfig", why: str, *, config_path: str | None = None) -> list[dict]:
    """Record the operator's acceptance of every seed run of `cfg` that stopped early (audit log).

    Raises ConfigError when `why` is empty or no run of this config stopped early."""

    def describe(run, end):
        if not end.stopped_early:
            return None
        rec = end.record or {}
        ckpt = rec.get("checkpoint")
        manifest = ws.path(ckpt) / "manifest.json" if ckpt else None
        return {"reason": end.reason, "step": rec.get("step"), "max_steps": rec.get("max_steps"), "checkpoint": ckpt,
                "checkpoint_manifest_sha256": sha256_file(manifest) if manifest and manifest.exists() else None}

    entries = _record_acceptances(ws, cfg, why, config_path, flag="--accept-early-stop",
                                  example="why the shorter run is acceptable", trigger=ACCEPT_EARLY_STOP,
                                  describe=describe)
    if not entries:
        ends = ", ".join(f"{r.end_file}: {read_end(ws, r.end_file).reason or 'no record'}" for r in seed_runs(cfg))
        raise ConfigError(f"--accept-early-stop: no training run of this config stopped early ({ends}); nothing to accept")
    return entries


def divergence_alerts(end_record: dict | None) -> list[dict]:
    """The reward/success divergence alerts a run's end record lists (not its KL alerts)."""
    return [a for a in (end_record or {}).get("alerts") or [] if a.get("kind") == DIVERGENCE_ALERT]


def accept_divergence(ws: Workspace, cfg: "TrainConfig", why: str, *, config_path: str | None = None) -> list[dict]:
    """Record the operator's acceptance of the reward/success divergence alerts of every seed run of `cfg` that
    raised one (audit log; the training_done gate reads it). Raises ConfigError when `why` is empty or no run
    of this config raised an alert."""

    def describe(run, end):
        alerts = divergence_alerts(end.record)
        return {"alerts": len(alerts)} if alerts else None

    entries = _record_acceptances(ws, cfg, why, config_path, flag="--accept-divergence",
                                  example="why the reward rise is genuine", trigger=ACCEPT_DIVERGENCE,
                                  describe=describe)
    if not entries:
        raise ConfigError("--accept-divergence: no training run of this config raised a reward/success divergence "
                          "alert; nothing to accept")
    return entries
