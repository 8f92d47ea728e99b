"""A scale stage's expansion of the training pool (`rc1 scale run --stage S`, gate rc1.gates.scale):
exactly N new items built with the stage's own seed, id prefix and random space, balanced to the task mix
and the bucket target, none of which repeats an earlier pool or the shadow set (id, exact text, question
5-gram near-duplicate, leak)."""

from __future__ import annotations

import math
from typing import Callable

from rc1.config.gates import PoolGate
from rc1.config.names import BUCKETS
from rc1.config.schema import TrainConfig
from rc1.data import difficulty as D
from rc1.data import diversity as DV
from rc1.data.io import write_jsonl
from rc1.data.pool import BuildParams, allocate, build_pool
from rc1.data.tokens import get_counter
from rc1.runtime.errors import Rc1Error
from rc1.runtime.fingerprint import register_artifact
from rc1.runtime.layout import expansion_path
from rc1.runtime.workspace import Workspace

OVERSAMPLE = 2.5      # items built per item wanted: overlaps and the bucket target drop some
MAX_BUILD_ROUNDS = 4  # each round builds twice as many as the last


def builder(ws: Workspace, cfg: TrainConfig, th: PoolGate) -> Callable[..., dict]:
    """The expansion builder `rc1 scale run` hands the scale gate: (stage, idx, n, earlier, shadow) -> its file's
    description (build_expansion)."""
    return lambda stage, idx, n, earlier, shadow: build_expansion(ws, cfg, th, stage, idx, n, earlier, shadow)


def _signatures(items: list[dict]):
    sg = DV.Signatures()
    sets = [DV.shingles(it.get("question", "")) for it in items]
    return sg, sets, (sg.compute(sets) if sets else None)


def overlaps(new: list[dict], earlier: list[dict], shadow: list[dict], near_dup: float, leak: float) -> dict:
    """New items that repeat an earlier pool or the shadow set: by id, exact text, near-dup, leak."""
    old_ids = {str(it["id"]) for it in earlier} | {str(it["id"]) for it in shadow}
    old_keys = {DV.exact_key(it) for it in earlier + shadow}
    out: dict[str, list[dict]] = {"id": [], "exact": [], "near_dup": [], "leak": []}
    out["id"] = [{"id": it["id"]} for it in new if str(it["id"]) in old_ids]
    out["exact"] = [{"id": it["id"]} for it in new if DV.exact_key(it) in old_keys]
    if new:
        sg, sets, sigs = _signatures(new)
        for ref, limit, kind in ((earlier, near_dup, "near_dup"), (shadow, leak, "leak")):
            if ref:
                _, rsets, rsigs = _signatures(ref)
                found, _top = DV.find_leaks(new, sets, sigs, ref, rsets, rsigs, sg, limit)
                out[kind] = [{"id": o["id"], "of": o["shadow_id"], "similarity": o["similarity"]} for o in found]
    return out


def build_expansion(ws: Workspace, cfg: TrainConfig, th: PoolGate, stage: str, idx: int, n: int, earlier: list[dict],
                    shadow: list[dict]) -> dict:
    """Exactly `n` new, balanced items that overlap nothing earlier; written to data/rollouts/rc1_<stage>.jsonl."""
    target = D.parse_target(cfg.pool.difficulty_target)
    mix = dict(cfg.datasets.mix)
    per_task = allocate(n, mix)
    want = {}
    for t, nt in per_task.items():
        w = {"hard": math.ceil(target["hard"] * nt - 1e-9), "easy": math.floor(target["easy"] * nt + 1e-9)}
        w["medium"] = nt - w["hard"] - w["easy"]
        want[t] = w
    seed = cfg.pool.seed + 1000 * (idx + 1)  # a new seed per stage; the id prefix and rng space differ too
    size = math.ceil(n * OVERSAMPLE)
    dropped: dict[str, int] = {}
    for attempt in range(MAX_BUILD_ROUNDS):
        params = BuildParams(n=size, mix=mix, max_turns=cfg.pool.max_turns, clarify_rate=cfg.pool.clarify_rate,
                             tools=list(cfg.pool.tools), templates_dir=ws.path(cfg.pool.templates_dir), seed=seed,
                             space=stage, id_prefix=stage.replace("_", ""))
        built, _tok = D.compute_metrics(build_pool(params), get_counter(cfg.model.base))
        ov = overlaps(built, earlier, shadow, th.near_dup_jaccard, th.leak_sim_max)
        _, sets, sigs = _signatures(built)
        internal = DV.find_duplicates(built, sets, sigs, DV.Signatures(), th.near_dup_jaccard) if built else []
        bad = {o["id"] for kind in ov.values() for o in kind} | {d["id"] for d in internal}
        dropped = {k: len(v) for k, v in ov.items()} | {"within_expansion": len(internal)}
        pools: dict[tuple, list[dict]] = {}
        for it in built:
            if it["id"] not in bad:
                pools.setdefault((it["task"], it["bucket"]), []).append(it)
        short = {f"{t}/{b}": want[t][b] - len(pools.get((t, b), [])) for t in want for b in BUCKETS
                 if len(pools.get((t, b), [])) < want[t][b]}
        if not short:
            chosen_ids = {it["id"] for t in want for b in BUCKETS for it in pools.get((t, b), [])[:want[t][b]]}
            items = [it for it in built if it["id"] in chosen_ids]  # builder order: deterministic
            path = ws.path(expansion_path(stage))
            write_jsonl(path, items)
            ev = register_artifact(ws, path, "scale_pool", stage=stage, n=len(items), seed=seed, built=size,
                                   dropped=dropped)
            return {"path": ev.path, "sha256": ev.sha256, "n": len(items), "seed": seed, "built": size,
                    "dropped_overlap": dropped, "reused": False, "rounds": attempt + 1, "per_task": want}
        size *= 2
    raise Rc1Error(f"could not find {n} new balanced items in {MAX_BUILD_ROUNDS} build rounds "
                   f"(last {size // 2} built; short: {short})")
