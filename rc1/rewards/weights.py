"""configs/weights.json: read with every constraint checked, write with the previous file kept."""

from __future__ import annotations

import os
from pathlib import Path

from rc1.config.load import load_weights
from rc1.config.names import REWARD_DIMENSIONS
from rc1.config.weights import WeightsFile
from rc1.runtime.atomic import atomic_write_bytes, atomic_write_json
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import sha256_file
from rc1.runtime.workspace import Workspace


def check_weights(weights: dict[str, float], max_weight: float = 0.5, tol: float = 1e-6) -> dict[str, float]:
    """Validate a weights mapping (known keys, >= 0, <= max, sum 1); ConfigError naming every bad key."""
    try:
        wf = WeightsFile(weights=dict(weights))
    except Exception as exc:  # pydantic ValidationError: unknown dimension
        raise ConfigError(f"weights: {exc.errors()[0]['msg'] if hasattr(exc, 'errors') else exc}") from None
    errs = wf.constraint_errors(max_weight=max_weight, tol=tol)
    if errs:
        raise ConfigError(f"weights: {errs[0]}", lines=errs[1:])
    return {d: float(wf.weights.get(d, 0.0)) for d in REWARD_DIMENSIONS}


def read_weights(ws: Workspace | None, path: str | os.PathLike, max_weight: float = 0.5) -> dict[str, float]:
    wf = load_weights(path, ws, max_weight=max_weight)
    return {d: float(wf.weights.get(d, 0.0)) for d in REWARD_DIMENSIONS}


def write_weights(path: Path, weights: dict[str, float], *, version: str, note: str,
                  max_weight: float = 0.5) -> Path | None:
    """Write new weights; the file they replace is kept as `<stem>.<sha12>.json` and named in the new
    file's `previous` (path and sha256), so the shadow run can score with the old reward. Returns that archive."""
    clean = check_weights(weights, max_weight=max_weight)
    archived, previous = None, None
    if path.exists():
        digest = sha256_file(path)
        archived = path.with_name(f"{path.stem}.{digest[:12]}{path.suffix}")
        if not archived.exists():
            atomic_write_bytes(archived, path.read_bytes())
        previous = {"path": archived.name, "sha256": digest}
    atomic_write_json(path, {"version": version, "weights": {k: round(v, 10) for k, v in clean.items()},
                             "note": note, "previous": previous})
    return archived


def previous_weights(ws: Workspace | None, path: str | os.PathLike,
                     max_weight: float = 0.5) -> tuple[dict[str, float], str] | None:
    """(weights, workspace path) of the file the current weights replaced, or None if they replaced none.

    Raises ConfigError when the current file names a previous one that is missing or was edited.
    """
    current = load_weights(path, ws, max_weight=max_weight)
    if current.previous is None:
        return None
    here = ws.path(path) if ws is not None else Path(path)
    prev = here.parent / current.previous.path
    shown = ws.rel(prev) if ws is not None else str(prev)
    if not prev.exists():
        raise ConfigError(f"{path}: its previous weights file {shown} is missing")
    if sha256_file(prev) != current.previous.sha256:
        raise ConfigError(f"{path}: its previous weights file {shown} changed (sha256 differs from the recorded one)")
    return read_weights(None, prev, max_weight=max_weight), shown
