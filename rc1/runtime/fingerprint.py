"""sha256 fingerprints, sidecar `.sha256` files and the artifact manifest.

Every artifact rc1 produces gets `<file>.sha256` next to it (sha256sum format) and a line in
`reports/rc1/artifacts.jsonl`. Paths are workspace-relative.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from rc1.runtime.atomic import append_line, atomic_write_text, canonical_json
from rc1.runtime.workspace import Workspace

ARTIFACTS_MANIFEST = "reports/rc1/artifacts.jsonl"
_CHUNK = 1 << 20


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_text(text: str) -> str:
    return sha256_bytes(text.encode("utf-8"))


def sha256_json(obj) -> str:
    return sha256_text(canonical_json(obj))


def sha256_file(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            h.update(chunk)
    return h.hexdigest()


def sha256_tree(root: str | os.PathLike) -> str:
    """Hash of a directory: relative path + file hash of every file, in sorted order."""
    root = Path(root)
    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        h.update(p.relative_to(root).as_posix().encode())
        h.update(b"\0")
        h.update(sha256_file(p).encode())
        h.update(b"\n")
    return h.hexdigest()


@dataclass(frozen=True)
class Evidence:
    """A file a gate looked at: workspace-relative path and its sha256 at that time."""

    path: str
    sha256: str

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def of(cls, ws: Workspace, path: str | os.PathLike) -> "Evidence":
        p = ws.path(path)
        digest = sha256_tree(p) if p.is_dir() else sha256_file(p)
        return cls(ws.rel(p), digest)

    def changed(self, ws: Workspace) -> str | None:
        """None if unchanged, else a one-line reason naming the file."""
        p = ws.path(self.path)
        if not p.exists():
            return f"{self.path}: missing (was sha256 {self.sha256[:12]})"
        now = sha256_tree(p) if p.is_dir() else sha256_file(p)
        if now != self.sha256:
            return f"{self.path}: changed after the gate passed (sha256 {self.sha256[:12]} -> {now[:12]})"
        return None


def write_sidecar(path: str | os.PathLike) -> str:
    """Write `<path>.sha256` in sha256sum format and return the digest."""
    p = Path(path)
    digest = sha256_file(p)
    atomic_write_text(p.with_name(p.name + ".sha256"), f"{digest}  {p.name}\n")
    return digest


def read_sidecar(path: str | os.PathLike) -> str | None:
    p = Path(path)
    side = p.with_name(p.name + ".sha256")
    if not side.exists():
        return None
    return side.read_text().split()[0]


def register_artifact(ws: Workspace, path: str | os.PathLike, kind: str, **meta) -> Evidence:
    """Fingerprint an artifact: sidecar sha256 plus an entry in the artifact manifest."""
    p = ws.path(path)
    digest = write_sidecar(p)
    ev = Evidence(ws.rel(p), digest)
    entry = {"time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "kind": kind,
             "path": ev.path, "sha256": digest, "bytes": p.stat().st_size, **meta}
    append_line(ws.path(ARTIFACTS_MANIFEST), json.dumps(entry, ensure_ascii=False, default=str))
    return ev


def verify_artifact(ws: Workspace, path: str | os.PathLike) -> bool:
    p = ws.path(path)
    expected = read_sidecar(p)
    return expected is not None and p.exists() and sha256_file(p) == expected
