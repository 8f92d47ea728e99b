"""The model cache: directories built once, published atomically, verified by a sha256 manifest.

Layout: `<cache root>/<name>/` with `rc1_manifest.json` (every file's size and sha256, plus the
builder's `meta`) written LAST inside a temp directory that is then renamed into place. A
directory without a valid manifest (a crash mid-build, a truncated file) is never used: it is
rebuilt. Builds of the same name are serialized across processes with a file lock. Each use sets the
directory's modification time (its last use), which `evict` orders by.

Cache root: `$RC1_CACHE` when set, else `~/.cache/rc1/models`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Callable

from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.fingerprint import sha256_file

log = logging.getLogger("rc1.models")

MANIFEST = "rc1_manifest.json"
_verified: dict[str, float] = {}  # path -> manifest mtime, fully hashed once per process


def cache_root() -> Path:
    env = os.environ.get("RC1_CACHE")
    root = Path(env).expanduser() if env else Path.home() / ".cache" / "rc1" / "models"
    root.mkdir(parents=True, exist_ok=True)
    return root


def read_manifest(path: Path) -> dict | None:
    try:
        return json.loads((path / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def verify_dir(path: Path, meta: dict | None = None, *, full: bool | None = None) -> str | None:
    """None when `path` is a complete build (matching `meta`), else why not.

    Sizes are checked every time; sha256 of every file once per process (or always with full=True).
    """
    manifest = read_manifest(path)
    if manifest is None:
        return f"{path}: no readable {MANIFEST}"
    if meta is not None and manifest.get("meta") != meta:
        return f"{path}: built with {manifest.get('meta')}, wanted {meta}"
    mtime = (path / MANIFEST).stat().st_mtime
    hash_now = full if full is not None else _verified.get(str(path)) != mtime
    for rel, entry in manifest.get("files", {}).items():
        f = path / rel
        if not f.is_file() or f.stat().st_size != entry["size"]:
            return f"{path}: {rel} missing or wrong size"
        if hash_now and sha256_file(f) != entry["sha256"]:
            return f"{path}: {rel} sha256 mismatch"
    if not manifest.get("files"):
        return f"{path}: empty manifest"
    _verified[str(path)] = mtime
    return None


def write_manifest(path: Path, meta: dict) -> dict:
    files = {}
    for f in sorted(p for p in path.rglob("*") if p.is_file() and p.name != MANIFEST):
        files[f.relative_to(path).as_posix()] = {"size": f.stat().st_size, "sha256": sha256_file(f)}
    manifest = {"meta": meta, "files": files, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    atomic_write_json(path / MANIFEST, manifest)
    return manifest


@contextlib.contextmanager
def _locked(root: Path, name: str):
    fh = open(root / f".{name}.lock", "w")
    try:
        fcntl.flock(fh, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def cached_dir(name: str, build: Callable[[Path], None], meta: dict) -> Path:
    """The verified directory `<root>/<name>`, running `build(tmp_dir)` first if it is missing or invalid."""
    root = cache_root()
    target = root / name
    if verify_dir(target, meta) is None:
        _used(target)
        return target
    with _locked(root, name):
        problem = verify_dir(target, meta)
        if problem is None:  # another process built it while we waited
            _used(target)
            return target
        if target.exists():
            log.warning("rebuilding model cache: %s", problem)
        for stale in root.glob(f".{name}.tmp-*"):  # leftovers of killed builds (we hold the lock)
            shutil.rmtree(stale, ignore_errors=True)
        tmp = root / f".{name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        tmp.mkdir()
        try:
            t0 = time.perf_counter()
            build(tmp)
            write_manifest(tmp, meta)
            if target.exists():
                old = root / f".{name}.tmp-old-{uuid.uuid4().hex[:8]}"
                os.rename(target, old)
                shutil.rmtree(old, ignore_errors=True)
            os.rename(tmp, target)
            log.info("built %s in %.1fs", target, time.perf_counter() - t0)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    problem = verify_dir(target, meta, full=True)
    if problem is not None:
        raise RuntimeError(f"model cache build did not verify: {problem}")
    return target


def _used(path: Path) -> None:
    with contextlib.suppress(OSError):
        os.utime(path)


def evict(prefix: str, evictable: Callable[[dict], bool], budget_bytes: int, keep: int = 2) -> list[str]:
    """Remove the least recently used `<prefix>*` directories whose manifest meta is `evictable` until those
    left take at most `budget_bytes`; the `keep` most recently used always stay. Files beside a directory
    named after it (`<name>.*`, e.g. rc1.generation.verify's check record) go with it. Each removal holds the
    name's build lock and renames the directory away first, so no process sees half of one. Returns the
    names removed."""
    root = cache_root()
    entries = []
    for path in root.glob(f"{prefix}*"):
        manifest = read_manifest(path) if path.is_dir() else None
        if manifest is None or not evictable(manifest.get("meta") or {}):
            continue
        size = sum(int(f.get("size", 0)) for f in manifest.get("files", {}).values())
        with contextlib.suppress(OSError):
            entries.append((path.stat().st_mtime, path.name, size))
    entries.sort(reverse=True)  # most recently used first
    removed, total = [], 0
    for i, (_, name, size) in enumerate(entries):
        total += size
        if i < keep or total <= budget_bytes:
            continue
        with _locked(root, name):
            target = root / name
            if not target.exists():
                continue
            gone = root / f".{name}.tmp-old-{uuid.uuid4().hex[:8]}"
            os.rename(target, gone)
            shutil.rmtree(gone, ignore_errors=True)
            for extra in root.glob(f"{name}.*"):
                if extra.is_file():
                    extra.unlink(missing_ok=True)
        removed.append(name)
    if removed:
        log.info("model cache: removed %d least recently used %s* entries (over %.1f GB): %s", len(removed), prefix,
                 budget_bytes / 1e9, ", ".join(removed))
    return removed
