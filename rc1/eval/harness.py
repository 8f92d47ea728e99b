"""Evaluation harness: greedy episodes of the base model and the trained run(s) on the held-out and dev splits.

`run_eval(ws, cfg, checkpoint=..., seed_index=...)`:
  1. reads the item sets (rc1.eval.splits): the held-out set (data.shadow_path, eval.n_shadow stratified
     items) that the RC1 gate and the report judge, and the dev split (data.eval_path, eval.n_dev
     stratified items) that chooses `best/`;
  2. runs the base model, or reuses its cached records: one cache file per set, keyed on the base model,
     the items, the generation settings (dtype included) and the sha256 of the episode/verifier code, so
     the round-2 shadow run's held-out pass is reused and every seed's run is compared with one base pass;
  3. evaluates each training run: an explicit checkpoint, or the `latest` checkpoint of every seed run
     that has one (cfg.seed_run(i); one run per seed), manifest verified, on the same items;
  4. computes summaries, paired deltas vs base, the majority-class baseline (its answer chosen on the
     training split, scored on the same items; each model's paired delta to it), the minimum detectable
     effect, what each set can measure by construction (`set_measures`), the seeds' runs pooled per set
     (`pooled`: mean delta, two-level bootstrap over seeds and items; what the RC1 gate judges), the eval
     and training dtypes and how each run ended; copies a run's checkpoint into its `best/` when its DEV result beats every earlier best
     (never on the held-out result); writes `reports/eval_<ts>.json` (+ sidecar, artifact manifest).

The device, dtype and checkpoint loading live in rc1.eval.loading, the best/ choice in rc1.eval.best.
Episodes come from rc1.generation (generation.backend: llama.cpp on the same weights when it agrees with torch);
the report's throughput names the backend that sampled each pass.

Raises ConfigError for missing item files, a dev split that is or overlaps the held-out set, an unknown
metric, or a checkpoint that does not verify or was trained from a different base model.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rc1.eval.best import selection_of, update_best
from rc1.eval.loading import dtype_info, load_checkpoint_model, resolve_checkpoint, torch_setup
from rc1.eval.metrics import (EpisodeRecord, compare, flat_split, majority_baseline, mde_table, metric_value,
                              pooled_compare, spread, summarize, versus_baseline)
from rc1.eval.runs import RunEnd, read_end, run_of_checkpoint, seed_runs
from rc1.eval.splits import DEV, FITTED, HELDOUT, ITEMS, ItemSet, dev_set, fitted_set, heldout_set, named_set
from rc1.runtime.atomic import atomic_write_json
from rc1.runtime import layout
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import register_artifact, sha256_file, sha256_json, verify_artifact
from rc1.runtime.workspace import Workspace

if TYPE_CHECKING:  # pragma: no cover
    from rc1.config.schema import SeedRun, TrainConfig

log = logging.getLogger("rc1.eval")

REPORT_KIND = "eval"
REPORT_VERSION = 3  # 3: pooled (over seeds), sets[*].measures, the majority baseline chosen on training items
CACHE_DIR = "reports/eval_cache"
ITEMS_KIND = "eval_items"          # `rc1 eval --items FILE`: a user's own item file, reported only
ITEMS_DIR = "reports/eval_items"
DEFAULT_BATCH = 32
Progress = Callable[[str], None]


# ----------------------------------------------------------------------------- inputs
def eval_sets(ws: Workspace, cfg: "TrainConfig", n: int | None = None, *, shadow_only: bool = False) -> dict[str, ItemSet]:
    """{set name: ItemSet}: the held-out set (required; `n` overrides eval.n_shadow) and, unless
    `shadow_only`, the dev split when its file exists."""
    out = {FITTED: fitted_set(ws, cfg)} if cfg.difficulty_fit.enable and not shadow_only else {}
    out[HELDOUT] = heldout_set(ws, cfg, n)
    if not shadow_only:
        dev = dev_set(ws, cfg)
        if dev is None:
            log.warning("eval: the dev split %s does not exist: best/ cannot be chosen (never on the held-out set)",
                        cfg.data.eval_path)
        else:
            out[DEV] = dev
    return out


def generation_settings(cfg: "TrainConfig", batch_size: int = DEFAULT_BATCH, dtype=None) -> dict:
    return {"greedy": True, "num_generations": 1, "max_new_tokens": cfg.eval.max_new_tokens or cfg.model.max_new_tokens,
            # the training episodes' turn limit: an eval that allowed more turns than training would judge
            # episodes the policy was never trained to finish
            "seed": cfg.run.seed, "batch_size": batch_size, "max_turns": cfg.strategy.max_turns,
            "dtype": str(dtype).replace("torch.", "") if dtype is not None else cfg.eval.dtype,
            "backend": cfg.generation.backend}


def _code_sha() -> str:
    """sha256 of the code that turns a model into episode records (envs + verifiers + metrics)."""
    root = Path(__file__).resolve().parents[1]
    files = sorted((root / "envs").glob("*.py")) + [root / "rewards" / "verifiers.py", root / "eval" / "metrics.py"]
    return sha256_json({f.relative_to(root).as_posix(): sha256_file(f) for f in files if f.exists()})


def base_cache_key(cfg: "TrainConfig", item_set: ItemSet, gen: dict) -> tuple[str, dict]:
    material = {"base": cfg.model.base, "revision": cfg.model.revision,
                "items": sha256_json([it["id"] for it in item_set.items] + [item_set.sha256]),
                "generation": {k: v for k, v in gen.items() if k != "batch_size"}, "code": _code_sha()}
    return sha256_json(material), material


def training_items(ws: Workspace, cfg: "TrainConfig") -> tuple[str | None, list[dict]]:
    """(workspace-relative path, items with a gold answer) of the split the run trains on: the difficulty
    fit's training items when the fit is on, else data.train_path; (None, []) when the file is absent."""
    from rc1.data.io import read_jsonl

    rel = layout.FIT_TRAIN if cfg.difficulty_fit.enable else cfg.data.train_path
    p = ws.path(rel)
    if not p.exists():
        log.warning("eval: no training split %s: the majority-class baseline is chosen on the evaluated items", rel)
        return None, []
    return ws.rel(p), [it for it in read_jsonl(p) if "task" in it and "answer" in it]


def set_measures(items: list[dict], max_turns: int | None) -> dict:
    """What an item set can measure by construction: items needing clarification (the clarification checks),
    items whose episodes may take more than one turn (the turns check), hard hotpotqa/strategyqa items."""
    from rc1.envs.env import is_single_turn
    from rc1.eval.metrics import HARD_TASKS

    multi = 0 if (max_turns or 0) == 1 else sum(not is_single_turn(it) and it.get("max_turns", 2) != 1 for it in items)
    return {"needs_clarification": sum(bool(it.get("needs_clarification")) for it in items), "multi_turn": multi,
            "hard_hq_sq": sum(it.get("bucket") == "hard" and it.get("task") in HARD_TASKS for it in items)}


# ----------------------------------------------------------------------------- episodes
def checkpoint_ref(cfg: "TrainConfig", ckpt: Path):
    """(rc1.generation ModelRef of a checkpoint's weights (identity: its manifest), what loading it reported:
    filled when a backend loads it)."""
    from rc1.generation import ModelRef
    from rc1.generation.serve import checkpoint_ref_name
    from rc1.models.loader import resolve_base
    from rc1.runtime.checkpoint import MANIFEST_FILE

    loaded: dict = {}

    def load(device, dtype):
        model, tok = load_checkpoint_model(cfg, ckpt, device, dtype)
        loaded.update(getattr(model, "rc1_loaded", {}))
        return model, tok

    config = resolve_base(cfg.model.base, cfg.model.revision) / "config.json"
    arch = json.loads(config.read_text(encoding="utf-8")).get("model_type")
    return ModelRef(name=checkpoint_ref_name(ckpt.name), identity=sha256_file(ckpt / MANIFEST_FILE), load=load,
                    architecture=arch), loaded


def run_items(sampler, items: list[dict], gen: dict, progress: Progress | None = None,
              episodes_out: list | None = None) -> tuple[list[EpisodeRecord], float]:
    """Greedy episodes for `items` in batches of gen['batch_size']; (records, seconds). With
    `episodes_out`, the episodes' reward-relevant fields are appended to it too (for the shadow run)."""
    from rc1.envs.episode import episode_dict
    from rc1.generation import SamplingParams

    records: list[EpisodeRecord] = []
    bs = max(1, int(gen["batch_size"]))
    params = SamplingParams(greedy=True, max_new_tokens=gen["max_new_tokens"], max_turns=gen["max_turns"],
                            seed=gen["seed"], batch_size=bs)
    t0 = time.perf_counter()
    for start in range(0, len(items), bs):
        chunk = items[start:start + bs]
        eps = sampler.episodes(chunk, num_generations=1, params=params)
        if len(eps) != len(chunk):
            raise RuntimeError(f"{sampler.backend} returned {len(eps)} episodes for {len(chunk)} items")
        records += [EpisodeRecord.of(it, ep) for it, ep in zip(chunk, eps)]
        if episodes_out is not None:
            episodes_out += [{**episode_dict(ep), "backend": ep.backend} for ep in eps]
        if progress:
            progress(f"{min(start + bs, len(items))}/{len(items)} episodes "
                     f"({(time.perf_counter() - t0):.0f} s, {sampler.backend})")
    return records, time.perf_counter() - t0


def _run_sets(cfg: "TrainConfig", ref, sets: dict[str, ItemSet], gen: dict, device, dtype, progress: Progress | None,
              label: str, episodes_out: dict | None = None) -> tuple[dict, dict]:
    """One generation pass of `ref` over every set's items together (bigger batches); records split back per
    set (and, with `episodes_out`, the episodes per set). The throughput names the backend that sampled."""
    from rc1.generation import open_sampler

    all_items = [it for s in sets.values() for it in s.items]
    episodes: list | None = [] if episodes_out is not None else None
    sampler, note, check = open_sampler(cfg, ref, device=device, dtype=dtype)
    try:
        records, secs = run_items(sampler, all_items, gen,
                                  (lambda m: progress(f"{label}: {m}")) if progress else None, episodes)
    finally:
        sampler.close()
    out, pos = {}, 0
    for name, s in sets.items():
        out[name] = records[pos:pos + len(s.items)]
        if episodes_out is not None:
            episodes_out[name] = episodes[pos:pos + len(s.items)]
        pos += len(s.items)
    thr = {"episodes": len(records), "seconds": secs, "episodes_per_s": len(records) / secs if secs else None,
           "backend": sampler.backend, "backend_note": note or None, "backend_check": check or None}
    return out, thr


def read_base_cache(ws: Workspace, cfg: "TrainConfig", item_set: ItemSet,
                    gen: dict) -> tuple[Path, str, dict, dict | None]:
    """(path, key, key material, document) of the base model's cached pass over one item set; the document
    is None unless the file's key and sidecar match."""
    key, material = base_cache_key(cfg, item_set, gen)
    path = ws.path(f"{CACHE_DIR}/base_{key[:16]}.json")
    doc = None
    if path.exists() and verify_artifact(ws, path):
        found = json.loads(path.read_text())
        doc = found if found.get("key") == key else None
    return path, key, material, doc


def base_records(ws: Workspace, cfg: "TrainConfig", sets: dict[str, ItemSet], gen: dict, device, dtype,
                 progress: Progress | None = None) -> tuple[dict[str, list[EpisodeRecord]], dict]:
    """The base model's records per set: each set from its cache when the key matches and the sidecar
    verifies; the sets without one are generated together and cached one file per set.

    A cache file also keeps each base episode's reward-relevant fields, so the round 2 shadow run can
    score the same greedy base answers the eval compares against (`base_episodes`)."""
    recs: dict[str, list[EpisodeRecord]] = {}
    caches: dict[str, str] = {}
    missing: dict[str, ItemSet] = {}
    cached_thr = {"episodes": 0, "seconds": 0.0}
    for name, item_set in sets.items():
        path, _, _, doc = read_base_cache(ws, cfg, item_set, gen)
        caches[name] = ws.rel(path)
        if doc is None:
            missing[name] = item_set
            continue
        log.info("eval: base records for %s from cache %s", name, ws.rel(path))
        if progress:
            progress(f"base, {name}: cached ({ws.rel(path)})")
        recs[name] = [EpisodeRecord.from_dict(r) for r in doc["records"]]
        cached_thr["episodes"] += doc["throughput"]["episodes"]
        cached_thr["seconds"] += doc["throughput"]["seconds"] or 0.0
    thr = {"episodes": cached_thr["episodes"], "seconds": cached_thr["seconds"], "cached": not missing,
           "cached_sets": sorted(set(sets) - set(missing)), "cache": caches[HELDOUT] if HELDOUT in caches else None,
           "caches": caches}
    if missing:
        from rc1.generation import base_ref

        episodes: dict[str, list] = {}
        new, run_thr = _run_sets(cfg, base_ref(cfg), missing, gen, device, dtype, progress, "base", episodes)
        for name, item_set in missing.items():
            path, key, material, _ = read_base_cache(ws, cfg, item_set, gen)
            share = len(item_set.items) / max(1, run_thr["episodes"])
            atomic_write_json(path, {"key": key, "key_material": material, "set": name,
                                     "throughput": {"episodes": len(item_set.items), "seconds": run_thr["seconds"] * share,
                                                    "backend": run_thr["backend"]},
                                     "records": [r.to_dict() for r in new[name]], "episodes": episodes[name]})
            register_artifact(ws, path, "eval_base_cache", base=cfg.model.base, set=name)
            recs[name] = new[name]
        thr["episodes"] += run_thr["episodes"]
        thr["seconds"] += run_thr["seconds"]
        thr["generated"] = run_thr
    thr["episodes_per_s"] = thr["episodes"] / thr["seconds"] if thr["seconds"] else None
    return {name: recs[name] for name in sets}, thr


def base_episodes(ws: Workspace, cfg: "TrainConfig", *, batch_size: int = DEFAULT_BATCH,
                  progress: Progress | None = None) -> tuple[list[dict], list[dict], dict]:
    """(items, episode dicts, provenance) of the base model's greedy eval pass on the held-out set.

    Runs that pass (or reads its cache) exactly as `rc1 eval` does, so the shadow run and the later
    eval share one generation of the base model."""
    sets = eval_sets(ws, cfg, shadow_only=True)
    device, dtype = torch_setup(cfg)
    gen = generation_settings(cfg, batch_size, dtype)
    _, thr = base_records(ws, cfg, sets, gen, device, dtype, progress)
    held = sets[HELDOUT]
    path, _, _, doc = read_base_cache(ws, cfg, held, gen)
    if doc is None or not doc.get("episodes"):
        raise ConfigError(f"{ws.rel(path)}: the base eval cache holds no episodes (written by an older rc1); "
                          "delete it and run again")
    info = {"source": "eval_base", "cache": ws.rel(path), "cache_sha256": sha256_file(path), "generation": gen,
            "shadow_set": held.path, "shadow_set_sha256": held.sha256, "n": len(held.items),
            "throughput": doc["throughput"]}
    return held.items, doc["episodes"], info


# ----------------------------------------------------------------------------- the runs evaluated
@dataclass
class Target:
    """One training run's checkpoint to evaluate; `run` is None for a checkpoint outside every seed run."""

    run: "SeedRun | None"
    checkpoint: Path

    def run_dir(self, ws: Workspace) -> str:
        if self.run is not None:
            return self.run.checkpoint_dir
        parent = self.checkpoint.parent
        return ws.rel(parent.parent if parent.name == "best" else parent)


def eval_targets(ws: Workspace, cfg: "TrainConfig", checkpoint: str | None = "latest",
                 seed_index: int | None = None) -> list[Target]:
    """An explicit checkpoint, else the `latest` of the chosen seed run (`seed_index`) or of every seed run
    that has one (one training run per seed, cfg.seed_run(i))."""
    from rc1.runtime.checkpoint import LATEST, read_latest

    runs = seed_runs(cfg)
    if seed_index is not None:
        if not 0 <= seed_index < len(runs):
            raise ConfigError(f"--seed-index {seed_index}: the config has {len(runs)} seed(s) {cfg.seed_list}")
        runs = [runs[seed_index]]
    if checkpoint not in (None, LATEST):
        ck = resolve_checkpoint(ws, cfg, checkpoint)
        run = run_of_checkpoint(ws, cfg, ck)
        if seed_index is not None and (run is None or run.index != seed_index):
            raise ConfigError(f"checkpoint {checkpoint} is not a checkpoint of seed run {seed_index} ({runs[0].checkpoint_dir})")
        return [Target(run, ck)]
    found = [Target(r, resolve_checkpoint(ws, cfg, LATEST, run_dir=r.checkpoint_dir)) for r in runs
             if read_latest(ws.path(r.checkpoint_dir)) is not None]
    if not found:
        where = ", ".join(r.checkpoint_dir for r in runs)
        raise ConfigError(f"{where}: no `latest` checkpoint to evaluate (train first)")
    return found


# ----------------------------------------------------------------------------- the eval
def _checkpoint_info(ws: Workspace, ckpt: Path) -> dict:
    from rc1.runtime.checkpoint import MANIFEST_FILE

    manifest = json.loads((ckpt / MANIFEST_FILE).read_text())
    return {"path": ws.rel(ckpt), "step": manifest.get("step"), "manifest_sha256": sha256_file(ckpt / MANIFEST_FILE)}


def _report_path(ws: Workspace, rel_of: Callable[[str], str] = layout.eval_report_path) -> Path:
    """A new report's path from its timestamp (`rel_of(ts)`, workspace-relative)."""
    ts = time.strftime("%Y%m%d_%H%M%S", time.gmtime())
    out = ws.path(rel_of(ts))
    k = 1
    while out.exists():  # two evals in the same second never overwrite each other
        out = ws.path(rel_of(f"{ts}_{k}"))
        k += 1
    return out


def _evaluate_run(ws: Workspace, cfg: "TrainConfig", target: Target, sets: dict[str, ItemSet], gen: dict, device,
                  dtype, base: dict, majority: dict, report_rel: str, progress: Progress | None) -> tuple[dict, dict]:
    """(the run's report entry, its records per set)."""
    ckpt = target.checkpoint
    label = f"checkpoint {ckpt.name}" + (f" (seed {target.run.index})" if target.run is not None and
                                         len(cfg.seed_list) > 1 else "")
    ref, loaded = checkpoint_ref(cfg, ckpt)
    trained, thr = _run_sets(cfg, ref, sets, gen, device, dtype, progress, label)
    results = {}
    for name in sets:
        st, d = summarize(trained[name]), compare(base[name], trained[name])
        results[name] = {"trained": st, "delta": d, "vs_majority": versus_baseline(trained[name], majority[name]["items"]),
                         "split": flat_split(st, d)}
    metric = cfg.eval.metric
    value = metric_value(metric, results[DEV]["trained"]) if DEV in sets else None
    run_dir = target.run_dir(ws)
    end = read_end(ws, target.run.end_file) if target.run is not None else RunEnd("", None, None)
    entry = {"seed_index": target.run.index if target.run is not None else None,
             "seed": target.run.seed if target.run is not None else None, "run_dir": run_dir,
             "checkpoint": {**_checkpoint_info(ws, ckpt), **loaded}, "training": end.to_dict(),
             "results": results, "metric": {"name": metric, "split": DEV if DEV in sets else None, "value": value},
             "throughput": thr}
    entry["best"] = update_best(ws, run_dir, ckpt, metric, value, report_rel, selection_of(sets[DEV]) if DEV in sets else None)
    return entry, trained


def runs_spread(runs: list[dict], set_name: str) -> dict:
    per_seed = [{"seed_index": r["seed_index"], "seed": r["seed"],
                 "trained_success": r["results"][set_name]["trained"]["success"]["rate"],
                 "delta_pp": r["results"][set_name]["delta"]["success"]["delta_pp"],
                 "ci95_pp": r["results"][set_name]["delta"]["success"]["ci95_pp"]} for r in runs]
    return {"per_seed": per_seed, "delta_pp": spread([p["delta_pp"] for p in per_seed]),
            "trained_success": spread([p["trained_success"] for p in per_seed])}


def run_eval(ws: Workspace, cfg: "TrainConfig", *, checkpoint: str | None = "latest", base_only: bool = False,
             n: int | None = None, batch_size: int = DEFAULT_BATCH, config_path: str | None = None,
             shadow_only: bool = False, seed_index: int | None = None,
             progress: Progress | None = None) -> tuple[Path, dict]:
    """Evaluate base and the run(s); write reports/eval_<ts>.json. Returns (path, report)."""
    from rc1.config.load import config_hash

    metric_value(cfg.eval.metric, summarize([]))  # unknown metric -> ConfigError before any generation
    sets = eval_sets(ws, cfg, n, shadow_only=shadow_only)
    targets = [] if base_only else eval_targets(ws, cfg, checkpoint, seed_index)
    device, dtype = torch_setup(cfg)
    gen = generation_settings(cfg, batch_size, dtype)
    dtypes = dtype_info(cfg, device, dtype)
    if progress:
        progress("items: " + ", ".join(f"{k} {len(v.items)}" for k, v in sets.items())
                 + f"; device {device}, dtype {dtypes['eval']}")
    base, base_thr = base_records(ws, cfg, sets, gen, device, dtype, progress)
    items = {name: s.items for name, s in sets.items()}
    train_rel, train = training_items(ws, cfg)
    majority = {name: majority_baseline(items[name], train, train_source=train_rel) for name in sets}
    results = {}
    for name in sets:
        sb = summarize(base[name])
        results[name] = {"base": sb, "majority": majority[name],
                         "base_vs_majority": versus_baseline(base[name], majority[name]["items"]),
                         "mde": mde_table(base[name]), "split": flat_split(sb, None)}
    out = _report_path(ws)
    runs, run_records, run_records_of = [], [], []
    for target in targets:
        entry, recs = _evaluate_run(ws, cfg, target, sets, gen, device, dtype, base, majority, ws.rel(out), progress)
        runs.append(entry)
        run_records_of.append(recs)
        run_records.append({k: [r.to_dict() for r in v] for k, v in recs.items()})
    dtypes["train"] = sorted({r["training"]["train_dtype"] for r in runs}) or None
    report: dict[str, Any] = {
        "kind": REPORT_KIND, "version": REPORT_VERSION, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "profile": cfg.profile, "config": {"path": config_path, "hash": config_hash(cfg)},
        "model": {"base": cfg.model.base, "revision": cfg.model.revision},
        # the evaluated checkpoint when one run was evaluated (runs[i]["checkpoint"] in general)
        "checkpoint": runs[0]["checkpoint"] if len(runs) == 1 else None,
        "run_dir": runs[0]["run_dir"] if len(runs) == 1 else cfg.checkpoint_dir,
        "device": str(device), "dtype": dtypes, "generation": gen,
        "heldout_set": FITTED if FITTED in sets else HELDOUT,
        "dev_set": DEV if DEV in sets else None, "seeds": cfg.seed_list,
        "sets": {k: {**v.describe(), "measures": set_measures(v.items, gen["max_turns"])} for k, v in sets.items()},
        "results": results, "runs": runs,
        "pooled": {name: pooled_compare(base[name], [rr[name] for rr in run_records_of], majority[name]["items"])
                   for name in sets} if runs else None,
        "spread": {name: runs_spread(runs, name) for name in sets} if len(runs) > 1 else None,
        "throughput": {"base": base_thr, "runs": [r["throughput"] for r in runs]},
        "records": {"base": {k: [r.to_dict() for r in v] for k, v in base.items()}, "runs": run_records},
    }
    atomic_write_json(out, report)
    held = [r["results"][FITTED if FITTED in sets else HELDOUT]["trained"]["success"]["rate"] for r in runs]
    register_artifact(ws, out, REPORT_KIND, checkpoints=[r["checkpoint"]["path"] for r in runs],
                      heldout_success=held or None)
    return out, report


def run_items_eval(ws: Workspace, cfg: "TrainConfig", items_path: str, *, checkpoint: str | None = "latest",
                   base_only: bool = False, seed_index: int | None = None, batch_size: int = DEFAULT_BATCH,
                   progress: Progress | None = None) -> tuple[Path, dict]:
    """The base model and the trained run(s) on one item file the user names (their own test set, items rc1 never
    generated): greedy episodes, verified success, each run's paired delta and the majority-class baseline with
    their CIs, pooled over seeds. Writes reports/eval_items/<file stem>_<ts>.json, which no gate reads; best/ is
    untouched. Returns (path, report)."""
    item_set = named_set(ws, items_path)
    sets = {ITEMS: item_set}
    targets = [] if base_only else eval_targets(ws, cfg, checkpoint, seed_index)
    device, dtype = torch_setup(cfg)
    gen = generation_settings(cfg, batch_size, dtype)
    base, base_thr = base_records(ws, cfg, sets, gen, device, dtype, progress)
    train_rel, train = training_items(ws, cfg)
    majority = majority_baseline(item_set.items, train, train_source=train_rel)
    runs, trained_runs = [], []
    for target in targets:
        ref, loaded = checkpoint_ref(cfg, target.checkpoint)
        label = f"checkpoint {target.checkpoint.name}"
        trained, thr = _run_sets(cfg, ref, sets, gen, device, dtype, progress, label)
        recs = trained[ITEMS]
        trained_runs.append(recs)
        runs.append({"seed_index": target.run.index if target.run is not None else None,
                     "seed": target.run.seed if target.run is not None else None,
                     "checkpoint": {**_checkpoint_info(ws, target.checkpoint), **loaded},
                     "trained": summarize(recs), "delta": compare(base[ITEMS], recs),
                     "vs_majority": versus_baseline(recs, majority["items"]), "throughput": thr,
                     "records": [r.to_dict() for r in recs]})
    out = _report_path(ws, lambda ts: f"{ITEMS_DIR}/{Path(items_path).stem}_{ts}.json")
    report: dict[str, Any] = {
        "kind": ITEMS_KIND, "version": 1, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "model": {"base": cfg.model.base, "revision": cfg.model.revision}, "device": str(device),
        "generation": gen, "set": {**item_set.describe(), "measures": set_measures(item_set.items, gen["max_turns"])},
        "base": summarize(base[ITEMS]), "majority": majority,
        "base_vs_majority": versus_baseline(base[ITEMS], majority["items"]), "runs": runs,
        "pooled": pooled_compare(base[ITEMS], trained_runs, majority["items"]) if runs else None,
        "throughput": {"base": base_thr}, "base_records": [r.to_dict() for r in base[ITEMS]],
    }
    atomic_write_json(out, report)
    register_artifact(ws, out, ITEMS_KIND, items=item_set.path, checkpoints=[r["checkpoint"]["path"] for r in runs])
    return out, report


def run_view(report: dict, run: dict | None, set_name: str) -> dict:
    """One run's results on one set with the base side beside them: base, trained, delta, majority,
    vs_majority, base_vs_majority, mde (trained/delta/vs_majority None for a base-only report)."""
    shared = report["results"][set_name]
    mine = (run or {}).get("results", {}).get(set_name) or {}
    return {"base": shared["base"], "majority": shared["majority"], "base_vs_majority": shared["base_vs_majority"],
            "mde": shared["mde"], "trained": mine.get("trained"), "delta": mine.get("delta"),
            "vs_majority": mine.get("vs_majority")}


def latest_report(ws: Workspace) -> Path | None:
    """The newest reports/eval_*.json (by its timestamped name)."""
    found = sorted(ws.root.glob(layout.EVAL_REPORTS), key=lambda p: (layout.eval_report_stamp(p), p.stat().st_mtime))
    return found[-1] if found else None
