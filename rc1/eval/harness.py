"""Evaluation harness: greedy episodes on the held-out shadow set (and eval_min), base vs checkpoint.

`run_eval(ws, cfg, checkpoint=...)`:
  1. reads the item sets: data.shadow_path (first eval.n_shadow items, or `n`) — the held-out set
     the RC1 gate judges — and data.eval_path (eval_min);
  2. runs the base model (cfg.model.base), or reuses its cached records: the cache key is the
     base model, the sha256 of the items evaluated, the generation settings and the sha256 of the
     episode/verifier code, so re-evaluating a new checkpoint never regenerates base episodes;
  3. loads the checkpoint (weights or LoRA adapter written by the trainer, manifest verified
     first) and runs it on the same items;
  4. computes rc1.eval.metrics summaries and paired deltas, writes `reports/ppo_eval_<ts>.json`
     (+ sidecar, artifact manifest), and copies the checkpoint into `<run>/best/step_XXXXX/` when
     it beats every earlier best on cfg.eval.metric (append-only: see `update_best`).

Raises ConfigError for missing item files, an unknown metric, or a checkpoint that does not
verify or was trained from a different base model.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from rc1.eval.metrics import EpisodeRecord, compare, flat_split, metric_value, summarize
from rc1.runtime.atomic import _fsync_dir, append_line, atomic_write_json
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import register_artifact, sha256_file, sha256_json, verify_artifact
from rc1.runtime.workspace import Workspace

if TYPE_CHECKING:  # pragma: no cover
    from rc1.config.schema import TrainConfig

log = logging.getLogger("rc1.eval")

REPORT_KIND = "ppo_eval"
REPORT_VERSION = 1
CACHE_DIR = "reports/eval_cache"
BEST_INDEX = "index.jsonl"
HELDOUT = "shadow"
DEFAULT_BATCH = 32
Progress = Callable[[str], None]


# ----------------------------------------------------------------------------- inputs
def read_items(path: Path) -> list[dict]:
    items = []
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{path}:{lineno}: not a JSON line ({exc.msg})") from None
            missing = [k for k in ("id", "task", "messages", "answer") if k not in item]
            if missing:
                raise ConfigError(f"{path}:{lineno}: eval item lacks {missing}")
            items.append(item)
    return items


def stratified_head(items: list[dict], n: int) -> list[dict]:
    """The first `n` items of a proportional interleave of the (task, bucket) strata, in file order.

    A shadow file is written stratum by stratum, so its plain head would be one task only."""
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


def eval_sets(ws: Workspace, cfg: "TrainConfig", n: int | None = None, *, shadow_only: bool = False) -> dict[str, dict]:
    """{set name: {path, sha256 (of the file), n_file, items}}; the shadow set is required."""
    limit = n or cfg.eval.n_shadow
    out: dict[str, dict] = {}
    wanted = ((HELDOUT, cfg.data.shadow_path, True),) + (() if shadow_only else (("eval_min", cfg.data.eval_path, False),))
    for name, rel, required in wanted:
        p = ws.path(rel)
        if not p.exists():
            if required:
                raise ConfigError(f"data.shadow_path {rel}: no such file; build it with `rc1 data shadow-set`")
            log.warning("eval: %s (%s) does not exist; evaluating the shadow set only", name, rel)
            continue
        items = read_items(p)
        if not items:
            raise ConfigError(f"{rel}: no items")
        if limit:
            items = stratified_head(items, limit)
        out[name] = {"path": ws.rel(p), "sha256": sha256_file(p), "n_file": len(read_items(p)) if limit else len(items),
                     "items": items}
    return out


def generation_settings(cfg: "TrainConfig", batch_size: int = DEFAULT_BATCH, dtype=None) -> dict:
    return {"greedy": True, "num_generations": 1, "max_new_tokens": cfg.eval.max_new_tokens or cfg.model.max_new_tokens,
            "seed": cfg.run.seed, "batch_size": batch_size, "max_turns": None,
            "dtype": str(dtype).replace("torch.", "") if dtype is not None else cfg.eval.dtype}


def _code_sha() -> str:
    """sha256 of the code that turns a model into episode records (envs + verifiers + metrics)."""
    root = Path(__file__).resolve().parents[1]
    files = sorted((root / "envs").glob("*.py")) + [root / "rewards" / "verifiers.py", root / "eval" / "metrics.py"]
    return sha256_json({f.relative_to(root).as_posix(): sha256_file(f) for f in files if f.exists()})


def base_cache_key(cfg: "TrainConfig", sets: dict[str, dict], gen: dict) -> tuple[str, dict]:
    material = {"base": cfg.model.base, "revision": cfg.model.revision,
                "items": {k: sha256_json([it["id"] for it in v["items"]] + [v["sha256"]]) for k, v in sets.items()},
                "generation": {k: v for k, v in gen.items() if k != "batch_size"}, "code": _code_sha()}
    return sha256_json(material), material


# ----------------------------------------------------------------------------- models
def _torch_setup(cfg: "TrainConfig"):
    import torch

    from rc1.runtime.device import dtype_for, get_device

    if cfg.run.threads:
        torch.set_num_threads(cfg.run.threads)
    device = get_device(cfg.run.device_pref)
    if cfg.eval.dtype == "bf16":
        # Inference only: about 2x faster prefill on CPUs with AVX512-BF16/AMX, but emulated (measured
        # 3.3x slower than fp32) on CPUs without them, where dtype_for falls back to fp32 with a warning.
        return device, (torch.bfloat16 if device.type != "cpu" else dtype_for(device, "bf16"))
    if cfg.eval.dtype == "fp32":
        return device, torch.float32
    return device, dtype_for(device, cfg.run.mixed_precision)


def load_base(cfg: "TrainConfig", device, dtype):
    from rc1.models.loader import load_model

    return load_model(cfg, device=device, dtype=dtype, for_training=False)


def resolve_checkpoint(ws: Workspace, cfg: "TrainConfig", spec: str) -> Path:
    """'latest' (the run's latest), a run directory (its latest) or a step directory; verified."""
    from rc1.runtime.checkpoint import LATEST, read_latest, verify_checkpoint

    run_root = ws.path(cfg.checkpoint_dir)
    if spec == LATEST:
        target = read_latest(run_root)
        if target is None:
            raise ConfigError(f"{cfg.checkpoint_dir}: no `latest` checkpoint to evaluate (train first)")
    else:
        target = ws.path(spec)
        if (target / LATEST).exists() or (target / LATEST).is_symlink():
            target = read_latest(target)
    if target is None or not target.is_dir():
        raise ConfigError(f"checkpoint {spec}: no such checkpoint directory")
    verify_checkpoint(target)  # CheckpointError (a ConfigError) names the corrupt file
    return target.resolve()


def checkpoint_config(cfg: "TrainConfig", ckpt: Path) -> "TrainConfig":
    """The config the checkpoint was trained with: its model/finetune sections define the weights' layout."""
    from pydantic import ValidationError

    from rc1.config.schema import TrainConfig
    from rc1.runtime.checkpoint import META_CONFIG, read_meta

    saved = read_meta(ckpt).get(META_CONFIG)
    if not isinstance(saved, dict) or not isinstance(saved.get("model"), dict):
        return cfg
    saved_base = saved["model"].get("base")
    if saved_base != cfg.model.base:
        raise ConfigError(f"checkpoint {ckpt.name} was trained from {saved_base!r}, "
                          f"but model.base is {cfg.model.base!r}; evaluate it with the config it was trained with")
    try:
        return TrainConfig.model_validate(saved)
    except ValidationError:  # a dump without the keys the trainer leaves out: take only what shapes the weights
        merged = {**cfg.model_dump(mode="json"), "model": saved["model"],
                  "finetune": saved.get("finetune", cfg.finetune.model_dump(mode="json"))}
        return TrainConfig.model_validate(merged)


def load_checkpoint_model(cfg: "TrainConfig", ckpt: Path, device, dtype):
    """Base model + the checkpoint's trainable weights (full weights or LoRA adapter), ready to generate."""
    import torch
    from safetensors.torch import load_file

    from rc1.models.loader import load_model
    from rc1.runtime.checkpoint import ADAPTER_FILE, MODEL_FILE, CheckpointError
    from rc1.runtime.device import to_device

    ccfg = checkpoint_config(cfg, ckpt)
    files = [f for f in (ADAPTER_FILE, MODEL_FILE) if (ckpt / f).exists()]
    if not files:
        raise CheckpointError(f"{ckpt}: holds neither {MODEL_FILE} nor {ADAPTER_FILE}")
    is_adapter = files[0] == ADAPTER_FILE
    # The trainer saved named_parameters() of the model load_model(for_training=True) builds; build the same
    # model so the names line up (peft-wrapped with LoRA), then copy the saved tensors in.
    model, tok = load_model(ccfg, device=device, dtype=dtype, for_training=is_adapter)
    weights = load_file(str(ckpt / files[0]))
    named = dict(model.named_parameters())
    unknown = sorted(set(weights) - set(named))
    if unknown:
        raise CheckpointError(f"{ckpt}: weights do not fit {ccfg.model.base} (unexpected {unknown[:3]})")
    with torch.no_grad():
        for n, t in weights.items():
            named[n].copy_(to_device(t, named[n].device).to(named[n].dtype))
    if is_adapter and hasattr(model, "merge_and_unload") and ccfg.finetune.method != "qlora":
        model = model.merge_and_unload()
    disable = getattr(model, "activation_checkpointing_disable", None) or getattr(model, "gradient_checkpointing_disable", None)
    if disable is not None:
        disable()  # harmless when it was off; generation needs the KV cache
    model.config.use_cache = True
    model.eval()
    log.info("eval: loaded %s (%d tensors from %s)", ckpt, len(weights), files[0])
    model.rc1_loaded = {"weights_file": files[0], "tensors": len(weights), "merged_adapter": is_adapter}
    return model, tok


# ----------------------------------------------------------------------------- episodes
def run_items(model, tokenizer, items: list[dict], gen: dict, progress: Progress | None = None,
              episodes_out: list | None = None) -> tuple[list[EpisodeRecord], float]:
    """Greedy episodes for `items` in batches of gen['batch_size']; (records, seconds). With
    `episodes_out`, the episodes' reward-relevant fields are appended to it too (for the shadow run)."""
    import torch

    from rc1.envs.rollout import generate_episodes
    from rc1.rewards.responses import episode_dict

    records: list[EpisodeRecord] = []
    bs = max(1, int(gen["batch_size"]))
    t0 = time.perf_counter()
    for start in range(0, len(items), bs):
        chunk = items[start:start + bs]
        with torch.no_grad():
            eps = generate_episodes(model, tokenizer, chunk, num_generations=1, max_turns=gen["max_turns"],
                                    max_new_tokens=gen["max_new_tokens"], greedy=True, seed=gen["seed"],
                                    batch_size=bs)
        if len(eps) != len(chunk):
            raise RuntimeError(f"generate_episodes returned {len(eps)} episodes for {len(chunk)} items")
        records += [EpisodeRecord.of(it, ep) for it, ep in zip(chunk, eps)]
        if episodes_out is not None:
            episodes_out += [episode_dict(ep) for ep in eps]
        if progress:
            progress(f"{min(start + bs, len(items))}/{len(items)} episodes "
                     f"({(time.perf_counter() - t0):.0f} s)")
    return records, time.perf_counter() - t0


def _run_sets(model, tok, sets: dict[str, dict], gen: dict, progress: Progress | None, label: str,
              episodes_out: dict | None = None) -> tuple[dict, dict]:
    """One generation pass over every set's items together (bigger batches); records split back per set
    (and, with `episodes_out`, the episodes per set)."""
    all_items = [it for s in sets.values() for it in s["items"]]
    episodes: list | None = [] if episodes_out is not None else None
    records, secs = run_items(model, tok, all_items, gen, (lambda m: progress(f"{label}: {m}")) if progress else None,
                              episodes)
    out, pos = {}, 0
    for name, s in sets.items():
        out[name] = records[pos:pos + len(s["items"])]
        if episodes_out is not None:
            episodes_out[name] = episodes[pos:pos + len(s["items"])]
        pos += len(s["items"])
    return out, {"episodes": len(records), "seconds": secs, "episodes_per_s": len(records) / secs if secs else None}


def read_base_cache(ws: Workspace, cfg: "TrainConfig", sets: dict[str, dict],
                    gen: dict) -> tuple[Path, str, dict, dict | None]:
    """(path, key, key material, document) of the base model's cached eval pass; the document is None
    unless the file's key and sidecar match."""
    key, material = base_cache_key(cfg, sets, gen)
    path = ws.path(f"{CACHE_DIR}/base_{key[:16]}.json")
    doc = None
    if path.exists() and verify_artifact(ws, path):
        found = json.loads(path.read_text())
        doc = found if found.get("key") == key else None
    return path, key, material, doc


def base_records(ws: Workspace, cfg: "TrainConfig", sets: dict[str, dict], gen: dict, device, dtype,
                 progress: Progress | None = None) -> tuple[dict[str, list[EpisodeRecord]], dict]:
    """The base model's records, from the cache when its key matches and its sidecar verifies.

    The cache also keeps each base episode's reward-relevant fields, so the round 2 shadow run can
    score the same greedy base answers the eval compares against (`base_episodes`)."""
    path, key, material, doc = read_base_cache(ws, cfg, sets, gen)
    if doc is not None:
        log.info("eval: base records from cache %s", ws.rel(path))
        if progress:
            progress(f"base: cached ({ws.rel(path)})")
        recs = {k: [EpisodeRecord.from_dict(r) for r in v] for k, v in doc["records"].items()}
        return recs, {**doc["throughput"], "cached": True, "cache": ws.rel(path)}
    model, tok = load_base(cfg, device, dtype)
    episodes: dict[str, list] = {}
    recs, thr = _run_sets(model, tok, sets, gen, progress, "base", episodes)
    del model
    atomic_write_json(path, {"key": key, "key_material": material, "throughput": thr,
                             "records": {k: [r.to_dict() for r in v] for k, v in recs.items()},
                             "episodes": episodes})
    register_artifact(ws, path, "eval_base_cache", base=cfg.model.base)
    return recs, {**thr, "cached": False, "cache": ws.rel(path)}


def base_episodes(ws: Workspace, cfg: "TrainConfig", *, batch_size: int = DEFAULT_BATCH,
                  progress: Progress | None = None) -> tuple[list[dict], list[dict], dict]:
    """(items, episode dicts, provenance) of the base model's greedy eval pass on the held-out set.

    Runs that pass (or reads its cache) exactly as `rc1 eval --shadow-only` would, so the shadow run
    and the later eval share one generation of the base model."""
    sets = eval_sets(ws, cfg, shadow_only=True)
    device, dtype = _torch_setup(cfg)
    gen = generation_settings(cfg, batch_size, dtype)
    base_records(ws, cfg, sets, gen, device, dtype, progress)
    path, _, _, doc = read_base_cache(ws, cfg, sets, gen)
    if doc is None or HELDOUT not in (doc.get("episodes") or {}):
        raise ConfigError(f"{ws.rel(path)}: the base eval cache holds no episodes (written by an older rc1); "
                          "delete it and run again")
    held = sets[HELDOUT]
    info = {"source": "eval_base", "cache": ws.rel(path), "cache_sha256": sha256_file(path), "generation": gen,
            "shadow_set": held["path"], "shadow_set_sha256": held["sha256"], "n": len(held["items"]),
            "throughput": doc["throughput"]}
    return held["items"], doc["episodes"][HELDOUT], info


# ----------------------------------------------------------------------------- best/
def best_index(ws: Workspace, run_dir: str) -> list[dict]:
    p = ws.path(run_dir) / "best" / BEST_INDEX
    if not p.exists():
        return []
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()]


def update_best(ws: Workspace, run_dir: str, ckpt: Path, metric: str, value: float | None, report_rel: str) -> dict:
    """Copy `ckpt` to <run>/best/<step dir>/ if it beats every earlier best on `metric`. Append-only:
    earlier best copies and index lines are never modified or removed."""
    from rc1.runtime.checkpoint import MANIFEST_FILE, TMP_PREFIX, verify_checkpoint

    entries = best_index(ws, run_dir)
    same = [e for e in entries if e.get("metric") == metric and e.get("value") is not None]
    prev = max((e["value"] for e in same), default=None)
    out = {"metric": metric, "value": value, "previous_best": prev, "updated": False, "path": None}
    if value is None:
        out["reason"] = "metric undefined on this eval"
        return out
    if prev is not None and value <= prev:
        out["reason"] = f"{value:.4g} does not beat the best so far ({prev:.4g})"
        return out
    best_root = ws.path(run_dir) / "best"
    best_root.mkdir(parents=True, exist_ok=True)
    dest = best_root / ckpt.name
    if dest.exists():  # this step was copied before (a re-eval): never overwrite a best copy
        out["reason"] = f"{ws.rel(dest)} already exists (kept as is)"
    else:
        tmp = best_root / f"{TMP_PREFIX}{ckpt.name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(ckpt, tmp, symlinks=False)
        verify_checkpoint(tmp)
        os.replace(tmp, dest)
        _fsync_dir(best_root)
    manifest_sha = sha256_file(dest / MANIFEST_FILE)
    append_line(best_root / BEST_INDEX, json.dumps({
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "step_dir": ckpt.name, "path": ws.rel(dest),
        "source": ws.rel(ckpt), "metric": metric, "value": value, "previous_best": prev,
        "manifest_sha256": manifest_sha, "report": report_rel}))
    out.update(updated=True, path=ws.rel(dest), manifest_sha256=manifest_sha)
    return out


# ----------------------------------------------------------------------------- the eval
def _checkpoint_info(ws: Workspace, ckpt: Path) -> dict:
    from rc1.runtime.checkpoint import MANIFEST_FILE

    manifest = json.loads((ckpt / MANIFEST_FILE).read_text())
    return {"path": ws.rel(ckpt), "step": manifest.get("step"), "manifest_sha256": sha256_file(ckpt / MANIFEST_FILE)}


def run_eval(ws: Workspace, cfg: "TrainConfig", *, checkpoint: str | None = "latest", base_only: bool = False,
             n: int | None = None, batch_size: int = DEFAULT_BATCH, config_path: str | None = None,
             shadow_only: bool = False, progress: Progress | None = None) -> tuple[Path, dict]:
    """Evaluate base and checkpoint; write reports/ppo_eval_<ts>.json. Returns (path, report)."""
    from rc1.config.load import config_hash

    metric_value(cfg.eval.metric, summarize([]))  # unknown metric -> ConfigError before any generation
    sets = eval_sets(ws, cfg, n, shadow_only=shadow_only)
    ckpt = None if base_only else resolve_checkpoint(ws, cfg, checkpoint or "latest")
    device, dtype = _torch_setup(cfg)
    gen = generation_settings(cfg, batch_size, dtype)
    if progress:
        progress(f"items: " + ", ".join(f"{k} {len(v['items'])}" for k, v in sets.items()) + f"; device {device}")
    base, base_thr = base_records(ws, cfg, sets, gen, device, dtype, progress)
    trained, trained_thr, loaded = None, None, {}
    if ckpt is not None:
        model, tok = load_checkpoint_model(cfg, ckpt, device, dtype)
        trained, trained_thr = _run_sets(model, tok, sets, gen, progress, f"checkpoint {ckpt.name}")
        loaded = getattr(model, "rc1_loaded", {})
        del model
    results = {}
    for name in sets:
        sb = summarize(base[name])
        st = summarize(trained[name]) if trained else None
        d = compare(base[name], trained[name]) if trained else None
        results[name] = {"base": sb, "trained": st, "delta": d,
                         "split": {"base": flat_split(sb, None), "trained": flat_split(st, d) if st else None}}
    ts = time.strftime("%Y%m%d_%H%M%S", time.gmtime())
    out = ws.reports / f"ppo_eval_{ts}.json"
    k = 1
    while out.exists():  # two evals in the same second never overwrite each other
        out = ws.reports / f"ppo_eval_{ts}_{k}.json"
        k += 1
    metric = cfg.eval.metric
    held = results[HELDOUT]
    report: dict[str, Any] = {
        "kind": REPORT_KIND, "version": REPORT_VERSION, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "profile": cfg.profile, "config": {"path": config_path, "hash": config_hash(cfg)},
        "model": {"base": cfg.model.base, "revision": cfg.model.revision},
        "checkpoint": {**_checkpoint_info(ws, ckpt), **loaded} if ckpt else None,
        "run_dir": cfg.checkpoint_dir, "device": str(device), "generation": gen, "heldout_set": HELDOUT,
        "sets": {k: {kk: vv for kk, vv in v.items() if kk != "items"} | {"n": len(v["items"])} for k, v in sets.items()},
        "results": results,
        "metric": {"name": metric, "base": metric_value(metric, held["base"]),
                   "trained": metric_value(metric, held["trained"]) if held["trained"] else None},
        "throughput": {"base": base_thr, "trained": trained_thr},
        "records": {k: {"base": [r.to_dict() for r in base[k]],
                        "trained": [r.to_dict() for r in trained[k]] if trained else None} for k in sets},
    }
    if ckpt is not None:
        report["best"] = update_best(ws, cfg.checkpoint_dir, ckpt, metric, report["metric"]["trained"], ws.rel(out))
    atomic_write_json(out, report)
    register_artifact(ws, out, REPORT_KIND, checkpoint=report["checkpoint"]["path"] if ckpt else None,
                      heldout_success=held["trained"]["success"]["rate"] if held["trained"] else None)
    return out, report


def latest_report(ws: Workspace) -> Path | None:
    """The newest reports/ppo_eval_*.json (by its timestamped name)."""
    found = sorted(ws.reports.glob("ppo_eval_*.json"), key=lambda p: (p.stem.split("_", 2)[-1], p.stat().st_mtime))
    return found[-1] if found else None
