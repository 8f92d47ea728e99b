"""Checkpoint I/O: atomic step directories, a sha256 manifest written last, an atomic `latest`.

Layout (SPEC §6)::

    checkpoints/<run>/
      step_00020/              one complete checkpoint
        model.safetensors      weights (or adapter_model.safetensors with LoRA), apart from trainer state
        trainer_state.pt       optimizer, scheduler, scaler, RNG, pending gradients, strategy state
        meta.json              step, config hash, config, sampler/data position
        manifest.json          sha256 + size of every other file; written LAST
      latest -> step_00020     symlink swapped with os.replace (a pointer file where symlinks fail)
      best/                    copied by eval; never pruned here
      .tmp-step_00030-<pid>/   a write in progress (or one killed mid-write: removed at the next start)

A step directory becomes visible only by `rename` of a complete temp directory whose manifest is
already on disk, so a crash at any moment leaves `latest` on the previous valid checkpoint.
Every checkpoint written is appended to reports/ckpt_manifest.jsonl.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from rc1.runtime.atomic import fsync_dir, append_line
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import sha256_file
from rc1.runtime.workspace import Workspace

log = logging.getLogger("rc1.checkpoint")

# ---- file names inside a step directory
MANIFEST_FILE = "manifest.json"
META_FILE = "meta.json"
MODEL_FILE = "model.safetensors"
ADAPTER_FILE = "adapter_model.safetensors"
TRAINER_STATE_FILE = "trainer_state.pt"
LATEST = "latest"
BEST = "best"
TMP_PREFIX = ".tmp-"
CKPT_MANIFEST_LOG = "reports/ckpt_manifest.jsonl"
STEP_DIR_RE = re.compile(r"^step_(\d{5,})$")

# ---- keys of trainer_state.pt (torch.save'd dict)
KEY_OPTIMIZER = "optimizer"
KEY_SCHEDULER = "scheduler"
KEY_SCALER = "scaler"
KEY_RNG = "rng"
KEY_RNG_PER_RANK = "rng_per_rank"        # every rank's RNG state, in rank order (a distributed run; else None)
KEY_PENDING_GRADS = "pending_grads"      # gradients accumulated inside an unfinished accumulation window
KEY_ACCUM_POSITION = "accum_position"    # micro-steps already accumulated in that window
KEY_STRATEGY = "strategy"                # strategy state (e.g. PPO's adaptive KL coefficient)
KEY_EXTRA_MODULES = "extra_modules"      # trainable modules beside the model (e.g. PPO's value head)
KEY_ENGINE = "engine"                    # engine-specific state (e.g. TRL trainer state)
KEY_CALLBACKS = "callbacks"              # callback name -> its state (early stop's patience, monitors)
KEY_RECIPE = "recipe"                    # the recipe's own loop state (accumulation position, KL control)
# ---- keys of an engine's state_dict that the recipe writes as separate files
KEY_WEIGHTS = "weights"                  # trainable weights -> MODEL_FILE / ADAPTER_FILE (safetensors)
KEY_WEIGHTS_FILE = "weights_file"        # which of the two

# ---- keys of meta.json
META_STEP = "step"
META_CONFIG_HASH = "config_hash"
META_CONFIG = "config"
META_SAMPLER = "sampler"
META_RUN = "run"
META_TIME = "time"
META_WEIGHTS = "weights_file"
META_STOP_REASON = "stop_reason"

FORMAT_VERSION = 1


class CheckpointError(ConfigError):
    """A checkpoint that cannot be used: missing, corrupt, or from a different config (exit 2)."""


@dataclass(frozen=True)
class CheckpointInfo:
    path: str            # workspace-relative
    step: int
    size_bytes: int
    verified: bool
    is_latest: bool
    is_best: bool
    problem: str = ""    # why verification failed ("" when verified)


def step_dir_name(step: int) -> str:
    return f"step_{step:05d}"


def run_dir_of(ws: Workspace, run_dir: str | os.PathLike) -> Path:
    return ws.path(run_dir)


# ----------------------------------------------------------------------------- writing
def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(ws: Workspace, run_dir: str | os.PathLike, step: int,
                     writers: dict[str, Callable[[Path], None]], meta: dict[str, Any], *,
                     keep_last: int | None = None) -> Path:
    """Write one checkpoint atomically and point `latest` at it.

    `writers` maps a file name (a relative path; sub-directories allowed) to a function that writes that file at the given path (weights,
    trainer state...). Order: every file -> fsync -> manifest.json (sha256 of every file) ->
    rename the temp directory to step_XXXXX -> swap `latest` -> append reports/ckpt_manifest.jsonl
    -> prune to `keep_last` step directories (best/ is never touched).
    """
    root = run_dir_of(ws, run_dir)
    root.mkdir(parents=True, exist_ok=True)
    name = step_dir_name(step)
    tmp = root / f"{TMP_PREFIX}{name}-{os.getpid()}"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    try:
        files: dict[str, dict] = {}
        all_writers = dict(writers)
        meta_doc = {**meta, META_STEP: step, META_TIME: time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "format_version": FORMAT_VERSION}
        all_writers[META_FILE] = lambda p: p.write_text(json.dumps(meta_doc, indent=2, default=str) + "\n")
        for fname, write in all_writers.items():
            if fname == MANIFEST_FILE or fname.startswith("/") or ".." in fname.split("/"):
                raise ValueError(f"invalid checkpoint file name {fname!r}")
            target = tmp / fname
            target.parent.mkdir(parents=True, exist_ok=True)
            write(target)
            _fsync_file(target)
            files[fname] = {"sha256": sha256_file(target), "bytes": target.stat().st_size}
        manifest = {"step": step, "format_version": FORMAT_VERSION, "config_hash": meta.get(META_CONFIG_HASH),
                    "time": meta_doc[META_TIME], "files": files}
        (tmp / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        _fsync_file(tmp / MANIFEST_FILE)
        fsync_dir(tmp)
        final = root / name
        if final.exists():  # re-saving a step (e.g. SIGTERM right after a scheduled save)
            old = root / f"{TMP_PREFIX}old-{name}-{os.getpid()}"
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(tmp, final)
        fsync_dir(root)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    set_latest(root, name)
    total = sum(f["bytes"] for f in files.values())
    append_line(ws.path(CKPT_MANIFEST_LOG), json.dumps({
        "time": meta_doc[META_TIME], "run": meta.get(META_RUN), "step": step, "path": ws.rel(final),
        "manifest_sha256": sha256_file(final / MANIFEST_FILE), "bytes": total,
        "config_hash": meta.get(META_CONFIG_HASH), "files": {k: v["sha256"] for k, v in files.items()}}))
    if keep_last:
        prune(root, keep_last)
    return final


def set_latest(root: Path, name: str) -> None:
    """Point root/latest at root/name atomically: a temp symlink renamed over the old one."""
    link = root / LATEST
    tmp = root / f"{TMP_PREFIX}latest-{os.getpid()}"
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    try:
        os.symlink(name, tmp)
        if link.is_dir() and not link.is_symlink():
            raise OSError("latest is a real directory")
        os.replace(tmp, link)
    except OSError:  # filesystems without symlinks: a pointer file, also replaced atomically
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        with open(tmp, "w") as fh:
            fh.write(name + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, link)
    fsync_dir(root)


def read_latest(root: Path) -> Path | None:
    link = root / LATEST
    if link.is_symlink():
        return root / os.readlink(link)
    if link.is_file():
        name = link.read_text().strip()
        return root / name if name else None
    return None


def step_dirs(root: Path) -> list[tuple[int, Path]]:
    if not root.is_dir():
        return []
    out = []
    for p in root.iterdir():
        m = STEP_DIR_RE.match(p.name)
        if m and p.is_dir() and not p.is_symlink():
            out.append((int(m.group(1)), p))
    return sorted(out)


def prune(root: Path, keep_last: int) -> list[Path]:
    """Delete all but the newest `keep_last` step directories; never `latest`'s target or best/."""
    latest = read_latest(root)
    dirs = step_dirs(root)
    removed = []
    for _, p in dirs[:-keep_last] if len(dirs) > keep_last else []:
        if latest is not None and p.name == latest.name:
            continue
        shutil.rmtree(p, ignore_errors=True)
        removed.append(p)
    return removed


def clean_stale_temps(root: Path) -> list[str]:
    """Remove temp directories/links left by a write that was killed. Call at start, before training."""
    removed = []
    if not root.is_dir():
        return removed
    for p in root.iterdir():
        if p.name.startswith(TMP_PREFIX):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            removed.append(p.name)
    if removed:
        log.warning("removed %d stale checkpoint temp file(s) in %s: %s", len(removed), root, ", ".join(removed))
    return removed


# ----------------------------------------------------------------------------- reading / verifying
def verify_checkpoint(path: str | os.PathLike) -> dict:
    """Return the manifest if every file listed hashes as recorded; raise CheckpointError otherwise."""
    p = Path(path)
    if not p.is_dir():
        raise CheckpointError(f"{p}: no such checkpoint directory")
    mpath = p / MANIFEST_FILE
    if not mpath.exists():
        raise CheckpointError(f"{p}: no {MANIFEST_FILE} (incomplete checkpoint)")
    try:
        manifest = json.loads(mpath.read_text())
        files = manifest["files"]
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{mpath}: unreadable manifest ({exc.__class__.__name__})") from None
    if META_FILE not in files:
        raise CheckpointError(f"{p}: manifest does not list {META_FILE}")
    for fname, entry in sorted(files.items()):
        fp = p / fname
        if not fp.exists():
            raise CheckpointError(f"{p}: {fname} is listed in the manifest but missing")
        actual = sha256_file(fp)
        if actual != entry.get("sha256"):
            raise CheckpointError(f"{p}: {fname} is corrupt (sha256 {str(entry.get('sha256'))[:12]} "
                                  f"in the manifest, {actual[:12]} on disk)")
    return manifest


def read_meta(path: str | os.PathLike) -> dict:
    return json.loads((Path(path) / META_FILE).read_text())


def config_differences(saved: dict, current: dict, prefix: str = "") -> list[str]:
    """Dotted paths where two config dumps differ, as 'path: saved -> current'."""
    out = []
    for key in sorted(set(saved) | set(current)):
        dotted = f"{prefix}.{key}" if prefix else str(key)
        a, b = saved.get(key, "<absent>"), current.get(key, "<absent>")
        if isinstance(a, dict) and isinstance(b, dict):
            out.extend(config_differences(a, b, dotted))
        elif a != b:
            out.append(f"{dotted}: {a!r} -> {b!r}")
    return out


def check_config_match(path: Path, meta: dict, config_hash: str, config_dump: dict) -> None:
    if meta.get(META_CONFIG_HASH) == config_hash:
        return
    diffs = config_differences(meta.get(META_CONFIG) or {}, config_dump)
    first = diffs[0] if diffs else "config hash differs"
    raise CheckpointError(f"{path}: checkpoint was written with a different config ({first})", lines=diffs)


def resolve_resume(ws: Workspace, run_dir: str | os.PathLike, spec: str, *, config_hash: str,
                   config_dump: dict, fallback: bool = False) -> Path:
    """The checkpoint directory `--resume spec` means, verified and matching the config.

    spec: 'latest' or a path (workspace-relative or absolute; a run directory means its latest).
    A corrupt or mismatched checkpoint is refused naming the problem; with `fallback` the newest
    older step directory that verifies and matches is used instead (logged loudly).
    """
    root = run_dir_of(ws, run_dir)
    if spec == LATEST:
        target = read_latest(root)
        if target is None:
            raise CheckpointError(f"{ws.rel(root)}: no `latest` checkpoint to resume from")
    else:
        target = ws.path(spec)
        if (target / LATEST).exists() or (target / LATEST).is_symlink():
            root, target = target, read_latest(target)
        else:
            root = target.parent
    assert target is not None
    try:
        verify_checkpoint(target)
        check_config_match(target, read_meta(target), config_hash, config_dump)
        return target
    except CheckpointError as exc:
        if not fallback:
            raise CheckpointError(f"{exc.message}; refusing to resume (use --resume-fallback to use the previous "
                                  "valid checkpoint)", lines=exc.lines) from None
        log.error("checkpoint %s refused: %s; looking for an older valid checkpoint", target, exc.message)
        step = _step_of(target)
        for s, candidate in reversed(step_dirs(root)):
            if step is not None and s >= step:
                continue
            try:
                verify_checkpoint(candidate)
                check_config_match(candidate, read_meta(candidate), config_hash, config_dump)
            except CheckpointError as inner:
                log.error("checkpoint %s refused too: %s", candidate, inner.message)
                continue
            log.warning("FALLBACK: resuming from %s instead of %s", ws.rel(candidate), ws.rel(target))
            return candidate
        raise CheckpointError(f"{exc.message}; and no older valid checkpoint exists in {ws.rel(root)}") from None


def _step_of(path: Path) -> int | None:
    m = STEP_DIR_RE.match(path.name)
    return int(m.group(1)) if m else None


def list_checkpoints(ws: Workspace, run_dir: str | os.PathLike) -> list[CheckpointInfo]:
    """Every step directory (and best/) of a run, oldest first, with its verification status."""
    root = run_dir_of(ws, run_dir)
    latest = read_latest(root)
    entries = [(s, p, False) for s, p in step_dirs(root)]
    best = root / BEST
    if best.is_dir():  # append-only copies: best/step_XXXXX/ (rc1.eval.best.update_best)
        entries += [(s, p, True) for s, p in step_dirs(best)]
    out = []
    for s, p, is_best in entries:
        size = sum(f.stat().st_size for f in p.rglob("*") if f.is_file())
        problem = ""
        try:
            verify_checkpoint(p)
        except CheckpointError as exc:
            problem = exc.message
        out.append(CheckpointInfo(path=ws.rel(p), step=s, size_bytes=size, verified=not problem,
                                  is_latest=latest is not None and not is_best and p.name == latest.name,
                                  is_best=is_best, problem=problem))
    return out


# ----------------------------------------------------------------------------- torch helpers
def torch_writer(obj: Any) -> Callable[[Path], None]:
    def write(path: Path) -> None:
        import torch

        torch.save(obj, path)
    return write


def torch_load(path: Path) -> Any:
    """Load a trainer_state.pt that verify_checkpoint has already hashed (it holds RNG tuples, so
    weights_only=False; only ever used on files whose sha256 the manifest vouched for)."""
    import torch

    return torch.load(path, map_location="cpu", weights_only=False)


def capture_rng() -> dict:
    import random

    import numpy as np
    import torch

    state = {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        state["mps"] = torch.mps.get_rng_state()
    return state


def restore_rng(state: dict) -> None:
    import random

    import numpy as np
    import torch

    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
    if "mps" in state and getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        torch.mps.set_rng_state(state["mps"])
