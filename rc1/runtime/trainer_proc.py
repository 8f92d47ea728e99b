"""The trainer as a background process: start it detached, stop it with SIGTERM, read its status.

`rc1 train` writes its pid file reports/state/trainer.json {pid, started, config, argv, run_dir}
when it starts and removes it when it exits. `start_trainer` launches `rc1 train` in a new session
(it survives the console or shell that started it) with its output appended to logs/train.log;
`stop_trainer` sends SIGTERM, on which the trainer finishes its step, checkpoints and exits 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import socket
from dataclasses import dataclass, field

from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.errors import ConfigError
from rc1.runtime.metrics import last_metrics
from rc1.runtime.workspace import Workspace

PID_FILE = "reports/state/trainer.json"
STOP_REQUEST_FILE = "reports/state/stop_request.json"


@dataclass
class RankStatus:
    rank: int
    pid: int | None
    host: str | None
    alive: bool | None        # None: on another machine (cannot be checked from here)
    heartbeat_age_s: float | None


@dataclass
class TrainerStatus:
    pid: int | None
    alive: bool
    started: str | None
    step: int | None
    heartbeat_age_s: float | None
    last_error_report: str | None
    ranks: list[RankStatus] = field(default_factory=list)   # a distributed run's ranks (empty: one process)


def read_pid_file(ws: Workspace) -> dict | None:
    p = ws.path(PID_FILE)
    if not p.exists():
        return None
    try:
        return json.loads(p.read_text())
    except (json.JSONDecodeError, OSError):
        return None


def write_pid_file(ws: Workspace, *, config: str | None, argv: list[str], run_dir: str, world_size: int = 1,
                   ranks: list[dict] | None = None, pid: int | None = None, started: str | None = None) -> None:
    """The trainer's pid file. A distributed run: `pid` is the process `rc1 stop` signals (rc1's launcher, or
    rank 0 under a user's own `accelerate launch`) and `ranks` lists every rank's pid and host."""
    doc = {"pid": pid or os.getpid(), "started": started or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "config": config, "argv": argv, "run_dir": run_dir}
    if world_size > 1 or ranks:
        doc.update(world_size=world_size, ranks=ranks or [])
    atomic_write_json(ws.path(PID_FILE), doc)


def remove_pid_file(ws: Workspace) -> None:
    doc = read_pid_file(ws)
    if doc is not None and doc.get("pid") == os.getpid():
        ws.path(PID_FILE).unlink(missing_ok=True)


def pid_alive(pid: int | None) -> bool:
    """True for a running process (a zombie that exited but was not reaped counts as gone)."""
    if not pid:
        return False
    try:
        import psutil

        proc = psutil.Process(pid)
        return proc.status() != psutil.STATUS_ZOMBIE
    except Exception:  # noqa: BLE001 - psutil.NoSuchProcess / AccessDenied / missing psutil
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True


def running_trainer(ws: Workspace) -> dict | None:
    doc = read_pid_file(ws)
    return doc if doc and pid_alive(doc.get("pid")) else None


def start_trainer(ws: Workspace, config_path: str, resume: str | None = None, max_steps: int | None = None,
                  *, extra_args: list[str] | None = None) -> int:
    """Launch `rc1 train` detached (new session); returns its pid. Output is appended to logs/train.log."""
    running = running_trainer(ws)
    if running:
        raise ConfigError(f"a trainer is already running (pid {running['pid']}); `rc1 stop` it first")
    argv = [sys.executable, "-m", "rc1.cli.main", "--workdir", str(ws.root), "train", "--config", config_path]
    if resume:
        argv += ["--resume", resume]
    if max_steps is not None:
        argv += ["--max-steps", str(max_steps)]
    argv += list(extra_args or [])
    ws.logs.mkdir(parents=True, exist_ok=True)
    with open(ws.train_log, "ab") as out:
        proc = subprocess.Popen(argv, cwd=str(ws.root), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    return proc.pid


def stop_trainer(ws: Workspace, timeout: float = 300.0) -> bool:
    """SIGTERM the running trainer and wait (up to `timeout` s) for it to checkpoint and exit.

    Returns True when it has exited (or none was running), False if it is still running.
    """
    doc = running_trainer(ws)
    if doc is None:
        return True
    pid = int(doc["pid"])
    atomic_write_json(ws.path(STOP_REQUEST_FILE), {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                                                   "pid": pid, "by": "operator"})
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return True
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            return True
        time.sleep(0.2)
    return not pid_alive(pid)


def latest_error_report(ws: Workspace) -> str | None:
    reports = sorted(ws.reports.glob("ERROR_*.json")) if ws.reports.exists() else []
    return ws.rel(reports[-1]) if reports else None


def trainer_status(ws: Workspace) -> TrainerStatus:
    doc = read_pid_file(ws) or {}
    pid = doc.get("pid")
    last = last_metrics(ws.metrics_path, 1)
    step = heartbeat_age = None
    now = time.time()
    beats: dict[int, float] = {}
    if last:
        step = last[-1].get("step")
        hb = last[-1].get("heartbeat") or last[-1].get("time")
        heartbeat_age = round(now - float(hb), 3) if hb else None
        beats = {r["rank"]: r["heartbeat"] for r in last[-1].get("ranks") or [] if r.get("heartbeat")}
    here = socket.gethostname()
    ranks = [RankStatus(rank=r["rank"], pid=r.get("pid"), host=r.get("host"),
                        alive=pid_alive(r.get("pid")) if r.get("host") in (None, here) else None,
                        heartbeat_age_s=round(now - beats[r["rank"]], 3) if r["rank"] in beats else None)
             for r in doc.get("ranks") or []]
    return TrainerStatus(pid=pid, alive=pid_alive(pid), started=doc.get("started"), step=step,
                         heartbeat_age_s=heartbeat_age, last_error_report=latest_error_report(ws), ranks=ranks)


def install_sigterm(handler) -> None:
    """SIGTERM (and SIGINT) -> handler(reason): the trainer finishes its step, checkpoints, exits 0."""
    def _on_signal(signum, frame):
        handler("operator" if signum == signal.SIGTERM else "interrupt")
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
