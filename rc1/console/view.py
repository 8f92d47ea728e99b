"""Everything the Overview, Reports and Checkpoints screens show, read in one pass on a worker.

Loaded again whenever a watched file's mtime changes (see `ConsoleBackend.watched_mtimes`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rc1.console.backend import ConsoleBackend, Unavailable
from rc1.runtime.errors import Rc1Error


@dataclass(frozen=True)
class LoadedReport:
    title: str
    pattern: str
    path: str | None          # workspace-relative; None: not produced yet
    sha256: str | None = None
    doc: Any = None           # parsed JSON, or Markdown text
    error: str | None = None  # unreadable


@dataclass(frozen=True)
class WorkspaceView:
    problem: str | None = None
    state: str = "idle"
    gates: dict = field(default_factory=dict)
    audit: list = field(default_factory=list)
    ops: dict = field(default_factory=dict)
    checkpoints: list | None = None
    checkpoints_unavailable: str | None = None
    reports: list[LoadedReport] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # files that could not be read
    present: dict[str, bool] = field(default_factory=dict)  # optional inputs: judge_stats, artifacts
    run_config: str | None = None  # the config the console runs the pipeline and trainer with (None: none found)


def load_view(backend: ConsoleBackend) -> WorkspaceView:
    from rc1.runtime.fingerprint import sha256_file

    problem = backend.workspace_problem()
    if problem:
        return WorkspaceView(problem=problem)
    errors: list[str] = []
    try:
        status = backend.status()
    except Rc1Error as exc:
        return WorkspaceView(problem=None, errors=[exc.message])
    checkpoints, ck_why = None, None
    try:
        checkpoints = backend.checkpoints()
    except Unavailable as exc:
        ck_why = exc.message
    reports = []
    for rf in backend.report_files():
        if rf.path is None:
            reports.append(LoadedReport(rf.title, rf.pattern, None))
            continue
        rel = backend.ws.rel(rf.path)
        try:
            reports.append(LoadedReport(rf.title, rf.pattern, rel, sha256_file(rf.path), backend.read_report(rf.path)))
        except (Rc1Error, OSError) as exc:
            msg = exc.message if isinstance(exc, Rc1Error) else f"{rel}: {exc}"
            reports.append(LoadedReport(rf.title, rf.pattern, rel, error=msg))
            errors.append(msg)
    from rc1.machine.status import JUDGE_STATS
    from rc1.runtime.fingerprint import ARTIFACTS_MANIFEST

    present = {"judge_stats": backend.ws.path(JUDGE_STATS).exists(),
               "artifacts": backend.ws.path(ARTIFACTS_MANIFEST).exists()}
    return WorkspaceView(present=present, state=status["state"], gates=status["gates"], audit=backend.audit(8), ops=status["ops"],
                         checkpoints=checkpoints, checkpoints_unavailable=ck_why, reports=reports, errors=errors,
                         run_config=backend.run_config_path())
