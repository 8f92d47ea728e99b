"""Shadow-set responses to score: item selection, base-model generation, and the saved file.

`data/shadow_responses_<tag>.jsonl` holds one line per (item, generation): the episode fields the
reward reads and a sha256 of that line's content; `<file>.meta.json` says what produced it (model,
shadow set sha256, seed, items). Both are registered artifacts. A later command reuses the file
only when the meta matches what it asked for and the file still has its recorded sha256.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections import defaultdict

from rc1.config.schema import TrainConfig
from rc1.data.io import read_jsonl
from rc1.envs.episode import EpisodeOutcome, episode_dict
from rc1.runtime.atomic import atomic_output, atomic_write_json, canonical_json
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import register_artifact, sha256_file, sha256_json, verify_artifact
from rc1.runtime.layout import DEV_BASE_TAG, responses_path
from rc1.runtime.workspace import Workspace

log = logging.getLogger("rc1.rewards.responses")


def load_shadow_set(ws: Workspace, cfg: TrainConfig) -> tuple[list[dict], str, str]:
    """(items, workspace-relative path, sha256) of the shadow eval set."""
    p = ws.path(cfg.data.shadow_path)
    if not p.exists():
        raise ConfigError(f"shadow set {cfg.data.shadow_path} not found: build it with `rc1 data shadow-set`")
    return load_item_file(ws, cfg.data.shadow_path, "shadow set")


def load_item_file(ws: Workspace, rel: str, label: str = "items file") -> tuple[list[dict], str, str]:
    """(items, workspace-relative path, sha256) of a JSONL item file."""
    p = ws.path(rel)
    if not p.exists():
        raise ConfigError(f"{label} {rel} not found")
    items = read_jsonl(p)
    if not items:
        raise ConfigError(f"{label} {rel} is empty")
    return items, ws.rel(p), sha256_file(p)


def check_dev_tasks(cfg: TrainConfig, items: list[dict], rel: str) -> None:
    """A dev split must hold the run's own tasks: base-model answers to other tasks' items (data/eval_min.jsonl
    of the built-in tasks, for a run on a custom task) would judge difficulty and fit the reward on items
    the run never trains on."""
    run_tasks = {t for t, w in cfg.datasets.mix.items() if w > 0}
    held = {str(it.get("task")) for it in items}
    foreign = sorted(held - run_tasks)
    # `rc1 data make-min --config` writes a run on custom tasks its own split; a run that mixes built-in tasks
    # in keeps data/eval_min.jsonl as long as it holds some of the run's tasks
    if foreign and (run_tasks <= set(cfg.datasets.tasks) or not held & run_tasks):
        raise ConfigError(f"dev split {rel}: holds items of task(s) {foreign}, which this run does not train on "
                          f"(datasets.mix {sorted(run_tasks)}): draw it from the run's tasks with `rc1 data make-min "
                          "--config CONFIG`, or set data.eval_path")


def select_items(items: list[dict], n: int, seed: int, stratify: bool) -> list[dict]:
    """n items; stratified by (task, bucket) with proportional allocation (largest remainder), seeded."""
    if n < 1:
        raise ConfigError(f"--n must be >= 1 (got {n})")
    if n >= len(items):
        return list(items)
    rng = random.Random(seed)
    if not stratify:
        return rng.sample(items, n)
    strata: dict[tuple, list[dict]] = defaultdict(list)
    for it in items:
        strata[(it.get("task"), it.get("bucket"))].append(it)
    keys = sorted(strata, key=str)
    quotas = {k: n * len(strata[k]) / len(items) for k in keys}
    alloc = {k: int(q) for k, q in quotas.items()}
    for k in sorted(keys, key=lambda k: (-(quotas[k] - alloc[k]), str(k)))[: n - sum(alloc.values())]:
        alloc[k] += 1
    picked = []
    for k in keys:
        picked += rng.sample(strata[k], alloc[k])
    order = {id(it): i for i, it in enumerate(items)}
    return sorted(picked, key=lambda it: order[id(it)])


def generate_responses(cfg: TrainConfig, items: list[dict], *, generations: int, seed: int,
                       max_turns: int | None = None, batch_size: int = 8) -> list[dict]:
    """Run the base model (cfg.model.base) through the episode environment on `items`, on the configured
    generation backend (rc1.generation); each episode dict names its `backend`."""
    from rc1.generation import base_ref, sample_episodes

    gen = sample_episodes(cfg, base_ref(cfg), items, greedy=False, n_per_item=generations, seed=seed,
                          max_turns=max_turns, max_length=cfg.data.max_length, batch_size=batch_size)
    log.info("generated %d episodes in %.1fs (%s)", len(gen.episodes), gen.seconds, gen.backend)
    return [{**episode_dict(ep), "backend": ep.backend} for ep in gen.episodes]


def obtain_responses(ws: Workspace, cfg: TrainConfig, *, n: int, seed: int, stratify: bool, tag: str,
                     generations: int = 1, regenerate: bool = False, max_turns: int | None = None,
                     batch_size: int = 8, items_path: str | None = None) -> tuple[list[dict], list[dict], dict]:
    """(items, response rows, meta): reuse the responses file when it matches, else generate.

    Items come from the shadow set (data/shadow_responses_<tag>.jsonl) or, with `items_path`, from
    another item file such as a calibration split (data/responses_<tag>.jsonl). The meta's
    `shadow_set` / `shadow_set_sha256` name whichever item file was used.
    """
    if items_path is None:
        source, source_rel, source_sha = load_shadow_set(ws, cfg)
    else:
        source, source_rel, source_sha = load_item_file(ws, items_path)
        if tag == DEV_BASE_TAG:
            check_dev_tasks(cfg, source, source_rel)
    items = select_items(source, n, seed, stratify)
    want = {"model_base": cfg.model.base, "shadow_set": source_rel, "shadow_set_sha256": source_sha, "seed": seed,
            "stratify": stratify, "n": len(items), "generations": generations,
            "max_new_tokens": cfg.model.max_new_tokens, "temperature": cfg.model.temperature,
            "max_turns": max_turns, "item_ids": [it["id"] for it in items],
            "generation_backend": cfg.generation.backend}
    rel = responses_path(tag, shadow=items_path is None)
    path, meta_path = ws.path(rel), ws.path(rel + ".meta.json")
    if not regenerate and path.exists() and meta_path.exists() and verify_artifact(ws, path):
        meta = json.loads(meta_path.read_text())
        if {k: meta.get(k) for k in want} == want and meta.get("sha256") == sha256_file(path):
            rows = read_jsonl(path)
            log.info("reusing %s (%d responses)", rel, len(rows))
            return items, rows, meta
    t0 = time.time()
    episodes = generate_responses(cfg, items, generations=generations, seed=seed, max_turns=max_turns,
                                  batch_size=batch_size)
    gen_seconds = time.time() - t0
    rows = []
    for i, ep in enumerate(episodes):
        item = items[i // generations]
        row = {"item_id": item["id"], "gen": i % generations, "item_sha256": sha256_json(item), "episode": ep,
               "backend": ep.get("backend")}
        row["sha256"] = sha256_json(row)
        rows.append(row)
    with atomic_output(path) as fh:
        for row in rows:
            fh.write(canonical_json(row) + "\n")
    digest = register_artifact(ws, path, "shadow_responses", tag=tag, model=cfg.model.base, n=len(rows)).sha256
    meta = {**want, "sha256": digest, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "generation_seconds": round(gen_seconds, 2), "backends": sorted({str(ep.get("backend")) for ep in episodes})}
    atomic_write_json(meta_path, meta)
    register_artifact(ws, meta_path, "shadow_responses_meta", tag=tag)
    return items, rows, meta


def load_responses_file(ws: Workspace, rel: str) -> list[dict]:
    p = ws.path(rel)
    if not p.exists():
        raise ConfigError(f"responses file {rel} not found: run `rc1 reward shadow-run` first or pass --responses")
    rows = read_jsonl(p)
    bad = [r.get("item_id") for r in rows if r.get("sha256") != sha256_json({k: v for k, v in r.items() if k != "sha256"})]
    if bad:
        raise ConfigError(f"{rel}: {len(bad)} response line(s) do not match their sha256 (first: {bad[0]})")
    return rows


def pair_rows(items_by_id: dict[str, dict], rows: list[dict]) -> list[tuple[dict, EpisodeOutcome]]:
    out = []
    for r in rows:
        item = items_by_id.get(r["item_id"])
        if item is None:
            raise ConfigError(f"response for item {r['item_id']!r} has no item in the shadow set")
        out.append((item, EpisodeOutcome.from_dict(r["episode"])))
    return out


def dev_base_outcomes(ws: Workspace, cfg: TrainConfig) -> tuple[list[dict], dict[str, list[bool]], dict, str]:
    """(dev items, verified successes per item id, meta, responses path) of the base model's answers to the
    dev split (`rc1 reward base-answers`). ConfigError naming the command when they are missing, were made
    from another dev split or another base model, or changed since."""
    from rc1.envs.verifiers import verify_episode

    rel = responses_path(DEV_BASE_TAG, shadow=False)
    path, meta_path = ws.path(rel), ws.path(rel + ".meta.json")
    remake = f"rc1 reward base-answers --items {cfg.data.eval_path}"
    if not path.exists() or not meta_path.exists():
        raise ConfigError(f"{rel} is missing: make the base model's answers to the dev split with `{remake}`")
    meta = json.loads(meta_path.read_text())
    items, items_rel, items_sha = load_item_file(ws, cfg.data.eval_path, "dev split")
    check_dev_tasks(cfg, items, items_rel)
    if meta.get("shadow_set") != items_rel or meta.get("shadow_set_sha256") != items_sha:
        raise ConfigError(f"{rel} answers {meta.get('shadow_set')}, not the current {items_rel}: remake it with `{remake}`")
    if meta.get("model_base") != cfg.model.base:
        raise ConfigError(f"{rel} holds answers of {meta.get('model_base')}, not of {cfg.model.base}: remake it "
                          f"with `{remake}`")
    if meta.get("sha256") != sha256_file(path):
        raise ConfigError(f"{rel} changed after it was written: remake it with `{remake}`")
    by_id = {it["id"]: it for it in items}
    outcomes: dict[str, list[bool]] = {}
    for item, ep in pair_rows(by_id, load_responses_file(ws, rel)):
        outcomes.setdefault(str(item["id"]), []).append(bool(verify_episode(item, ep).success))
    return [by_id[i] for i in meta.get("item_ids", []) if i in by_id], outcomes, meta, rel
