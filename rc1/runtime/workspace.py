"""The workspace: where logs/, reports/, checkpoints/, data/ and the machine state live.

Resolution order: `--workdir`, then `$RC1_WORKDIR`, then the current directory. Every path
rc1 records (evidence, manifests, tickets) is relative to the workspace root, so a copied
workspace stays valid.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

ENV_WORKDIR = "RC1_WORKDIR"


def _under(rel: str) -> property:
    """A read-only attribute: the workspace root / `rel`."""
    return property(lambda self: self.root / rel, doc=f"<workspace>/{rel}")


@dataclass(frozen=True)
class Workspace:
    root: Path

    # The workspace's fixed places, as Paths under root.
    logs = _under("logs")
    reports = _under("reports")
    checkpoints = _under("checkpoints")
    data = _under("data")
    configs = _under("configs")
    state_dir = _under("reports/state")
    preflight_dir = _under("reports/preflight")
    train_log = _under("logs/train.log")
    metrics_path = _under("reports/metrics.jsonl")

    def path(self, rel: str | os.PathLike) -> Path:
        """Absolute path for a workspace-relative (or already absolute) path."""
        p = Path(rel)
        return p if p.is_absolute() else self.root / p

    def rel(self, path: str | os.PathLike) -> str:
        """Workspace-relative POSIX path; paths outside the workspace stay absolute."""
        p = Path(path)
        if not p.is_absolute():
            return p.as_posix()
        try:
            return p.resolve().relative_to(self.root.resolve()).as_posix()
        except ValueError:
            return p.as_posix()

    def ensure(self) -> "Workspace":
        for d in (self.logs, self.reports, self.checkpoints, self.data):
            d.mkdir(parents=True, exist_ok=True)
        return self


def resolve_workspace(workdir: str | os.PathLike | None = None) -> Workspace:
    raw = workdir or os.environ.get(ENV_WORKDIR) or os.getcwd()
    return Workspace(Path(raw).expanduser().resolve())
