"""The two item sets of evaluation, and the rule that keeps them apart.

  held-out  data.shadow_path (eval.n_shadow items): what the RC1 gate and the report judge. Nothing
            that chooses a model ever looks at it.
  dev       data.eval_path (eval_min): what chooses the model — the training-time dev eval
            (callback `eval_dev`, early stop) and `best/` in `rc1 eval`.

A subset of either is stratified over (task, bucket), never the file's head: files are written
stratum by stratum, so a head would be one task. A dev file that is the held-out file, or shares an
item id with it, is refused (ConfigError): selecting on it would leak the held-out set.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from rc1.data.io import read_jsonl
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import sha256_file
from rc1.runtime.workspace import Workspace

if TYPE_CHECKING:  # pragma: no cover
    from rc1.config.schema import TrainConfig

log = logging.getLogger("rc1.eval")

HELDOUT = "shadow"
DEV = "dev"
FITTED = "fitted"
ITEMS = "items"
ROLES = {ITEMS: "a file named with `rc1 eval --items`: reported only; no gate reads it and no model is chosen on it",
         HELDOUT: "held-out: judged by the RC1 gate, never used to choose a model",
         DEV: "dev: chooses the model (best/, eval_dev, early stop)",
         FITTED: "held-out items of the fitted levels (rc1 data fit): judged by the RC1 gate when the fit is on; "
                 "the full-difficulty shadow set is reported beside it"}


@dataclass
class ItemSet:
    name: str                 # HELDOUT or DEV
    path: str                 # workspace-relative
    sha256: str               # of the whole file
    n_file: int               # items in the file
    items: list[dict] = field(default_factory=list)

    def describe(self) -> dict:
        return {"path": self.path, "sha256": self.sha256, "n_file": self.n_file, "n": len(self.items),
                "role": ROLES[self.name]}


def read_items(path: Path) -> list[dict]:
    """Eval items: each needs an id, its task, the messages and the gold answer."""
    return read_jsonl(path, required=("id", "task", "messages", "answer"), what="eval item")


def stratified_head(items: list[dict], n: int) -> list[dict]:
    """The first `n` items of a proportional interleave of the (task, bucket) strata, in file order."""
    if n >= len(items):
        return list(items)
    strata: dict[tuple, list[int]] = {}
    for i, it in enumerate(items):
        strata.setdefault((it.get("task"), it.get("bucket")), []).append(i)
    keyed = []
    for members in strata.values():
        for rank, i in enumerate(members):
            keyed.append(((rank + 0.5) / len(members), i))
    chosen = sorted(i for _, i in sorted(keyed)[:n])
    return [items[i] for i in chosen]


def _load(ws: Workspace, name: str, rel: str, n: int | None) -> ItemSet:
    p = ws.path(rel)
    items = read_items(p)
    if not items:
        raise ConfigError(f"{rel}: no items")
    return ItemSet(name, ws.rel(p), sha256_file(p), len(items), stratified_head(items, n) if n else items)


def named_set(ws: Workspace, rel: str) -> ItemSet:
    """Every item of a file the user names (`rc1 eval --items`): ConfigError when it is missing or malformed."""
    if not ws.path(rel).is_file():
        raise ConfigError(f"--items {rel}: no such file")
    return _load(ws, ITEMS, rel, None)


def heldout_set(ws: Workspace, cfg: "TrainConfig", n: int | None = None) -> ItemSet:
    rel = cfg.data.shadow_path
    if not ws.path(rel).exists():
        raise ConfigError(f"data.shadow_path {rel}: no such file; build it with `rc1 data shadow-set`")
    return _load(ws, HELDOUT, rel, n or cfg.eval.n_shadow)


def fitted_set(ws: Workspace, cfg: "TrainConfig") -> ItemSet:
    """Eval set (a): the difficulty fit's held-out items of the chosen levels (never trained on)."""
    from rc1.runtime.layout import FIT_HELDOUT

    if not ws.path(FIT_HELDOUT).exists():
        raise ConfigError(f"difficulty_fit.enable: no {FIT_HELDOUT}; run `rc1 data fit --config ...` first")
    return _load(ws, FITTED, FIT_HELDOUT, None)


def dev_set(ws: Workspace, cfg: "TrainConfig", n: int | None = None) -> ItemSet | None:
    """The dev split (data.eval_path, `n` stratified items; default eval.n_dev), or None when the file does
    not exist. Refuses a dev file that is, or overlaps, the held-out set."""
    rel = cfg.data.eval_path
    p = ws.path(rel)
    if not p.exists():
        return None
    dev = _load(ws, DEV, rel, n or cfg.eval.n_dev)
    shadow = ws.path(cfg.data.shadow_path)
    if shadow.exists():
        if p.resolve() == shadow.resolve() or dev.sha256 == sha256_file(shadow):
            raise ConfigError(f"data.eval_path {rel} is the held-out set (data.shadow_path): model selection "
                              "must use a dev split such as data/eval_min.jsonl, never the held-out items")
        held_ids = {str(it["id"]) for it in read_items(shadow)}
        shared = sorted(str(it["id"]) for it in read_items(p) if str(it["id"]) in held_ids)
        if shared:
            raise ConfigError(f"data.eval_path {rel} shares {len(shared)} item(s) with the held-out set "
                              f"{cfg.data.shadow_path} (e.g. {shared[0]}): the dev split must not contain held-out items")
    if cfg.difficulty_fit.enable:
        from rc1.runtime.layout import FIT_HELDOUT

        fp = ws.path(FIT_HELDOUT)
        held_ids = {str(it["id"]) for it in read_items(fp)} if fp.exists() else set()
        shared = sorted(str(it["id"]) for it in dev.items if str(it["id"]) in held_ids)
        if shared or (fp.exists() and p.resolve() == fp.resolve()):
            raise ConfigError(f"data.eval_path {rel} shares item(s) with the fitted held-out set {FIT_HELDOUT}: "
                              "the dev split must not contain held-out items")
    return dev
