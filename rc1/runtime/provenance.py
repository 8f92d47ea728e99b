"""Code fingerprint: git commit/status and library versions recorded with every run and ticket."""

from __future__ import annotations

import platform
import subprocess
from functools import lru_cache
from importlib import metadata
from pathlib import Path

from rc1.runtime.atomic import atomic_write_json, atomic_write_text
from rc1.runtime.workspace import Workspace

PACKAGE_DIR = Path(__file__).resolve().parents[1]
LIBRARIES = ("torch", "transformers", "trl", "peft", "datasets", "accelerate", "textual", "typer", "transitions")


def _git(cwd: Path, *args: str) -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(cwd), *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def git_root(path: Path) -> Path | None:
    top = _git(path, "rev-parse", "--show-toplevel")
    return Path(top) if top else None


@lru_cache(maxsize=8)
def git_commit(path: Path = PACKAGE_DIR) -> str:
    return _git(path, "rev-parse", "HEAD") or "unknown"


def versions() -> dict[str, str]:
    out = {"python": platform.python_version(), "platform": platform.platform()}
    for lib in LIBRARIES:
        try:
            out[lib] = metadata.version(lib)
        except metadata.PackageNotFoundError:
            out[lib] = "not installed"
    try:
        out["rc1"] = metadata.version("rc1")
    except metadata.PackageNotFoundError:
        from rc1 import __version__

        out["rc1"] = __version__
    return out


def write_code_fingerprint(ws: Workspace) -> dict:
    """reports/rc1/git_commit.txt + git_status.txt (when there is a checkout) and versions.json."""
    out_dir = ws.reports / "rc1"
    root = git_root(ws.root) or git_root(PACKAGE_DIR)
    info = {"git_commit": "unknown", "git_dirty": None, "versions": versions()}
    if root is not None:
        commit = _git(root, "rev-parse", "HEAD") or "unknown"
        status = _git(root, "status", "--porcelain") or ""
        info.update(git_commit=commit, git_dirty=bool(status.strip()))
        atomic_write_text(out_dir / "git_commit.txt", commit + "\n")
        atomic_write_text(out_dir / "git_status.txt", status + ("\n" if status else ""))
    atomic_write_json(out_dir / "versions.json", info)
    return info
