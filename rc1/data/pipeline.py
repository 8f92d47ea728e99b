"""The data commands as functions (the CLI, the gates and the benchmark call these).

Every file written here is written atomically and registered as an artifact (sha256 sidecar +
a line in reports/rc1/artifacts.jsonl). Derived files carry a `<file>.meta.json` naming the input
they came from and its sha256, so a gate can tell a stale derivative from a fresh one.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from rc1.config.gates import DifficultyGate, PoolGate
from rc1.config.names import BUCKETS, DEFAULT_MIX, TASKS
from rc1.data import difficulty as D
from rc1.data import diversity as DV
from rc1.data.generic import TaskData, check_disjoint
from rc1.data.io import check_items, dumps_item, iter_jsonl, read_jsonl, write_jsonl
from rc1.data.pool import BuildParams, allocate, build_pool, make_item, parse_mix
from rc1.data.templates import load_pack
from rc1.data.tokens import counts_for_file, get_counter, prompt_text
from rc1.runtime.atomic import atomic_output, atomic_write_json
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import register_artifact, sha256_file
from rc1.runtime.layout import DIFFICULTY_REPORT, DIVERSITY_REPORT, EVAL_MIN, SHADOW_MANIFEST, SHADOW_SET, TRAIN_MIN, V1_POOL
from rc1.runtime.workspace import Workspace

log = logging.getLogger("rc1.data")

PARALLEL_FROM = 4000
VALIDATE_FIELDS = ("id", "task", "template", "role", "style", "messages", "question", "answer")


def meta_path(path: Path) -> Path:
    return path.with_name(path.name + ".meta.json")


def _write_meta(ws: Workspace, path: Path, source: Path | None, **extra) -> None:
    body = {"file": ws.rel(path), "sha256": sha256_file(path), **extra}
    if source is not None:
        body.update({"source": ws.rel(source), "source_sha256": sha256_file(source)})
    atomic_write_json(meta_path(path), body)


def _workers(n: int) -> int:
    env = os.environ.get("RC1_WORKERS")
    if env:
        return max(1, int(env))
    return 1 if n < PARALLEL_FROM else max(1, min(2, os.cpu_count() or 1))


def _lines_chunk(params: BuildParams, version: str, start: int, stop: int) -> str:
    items = _build(params, version, start, stop)
    return "".join(dumps_item(it) + "\n" for it in items)


def _build(params: BuildParams, version: str, start: int = 0, stop: int | None = None) -> list[dict]:
    if version == "v1":
        from rc1.data.v1 import build_v1_pool
        items = build_v1_pool(params)
        return items[start:stop]
    return build_pool(params, start=start, stop=stop)


def build_pool_file(ws: Workspace, params: BuildParams, out: str | Path, *, version: str = "v2",
                    tasks: "dict[str, TaskData] | None" = None, heldout: str | Path | None = None) -> dict:
    """Build a pool and write it atomically (byte-identical per seed, whatever the worker count).

    `tasks`: custom tasks the mix may name (their training items); a pool that would share an item
    with the held-out file `heldout` (when it exists) is refused."""
    if version not in ("v1", "v2"):
        raise ConfigError(f"--version must be v1 or v2 (got {version!r})")
    if tasks:
        params.custom = {name: t.train for name, t in tasks.items()}
    params.validate()
    custom_used = {t: tasks[t] for t, w in params.mix.items() if w > 0 and t not in TASKS} if tasks else {}
    if custom_used and version == "v1":
        raise ConfigError(f"--version v1: the v1 generator builds the built-in tasks only, not {sorted(custom_used)}")
    held_p = ws.path(heldout) if heldout else None
    if custom_used and held_p is not None and held_p.exists():
        check_disjoint([it for t in custom_used.values() for it in t.train], read_jsonl(held_p),
                       f"the training items of {', '.join(sorted(custom_used))}", ws.rel(held_p))
    generated = tuple(t for t, w in params.mix.items() if w > 0 and t in TASKS)
    if version == "v2" and generated:
        load_pack(params.templates_dir, tasks=generated)  # fail early
    out_p = ws.path(out)
    t0 = time.perf_counter()
    workers = _workers(params.n)
    with atomic_output(out_p) as fh:
        if workers == 1 or version == "v1":
            for it in _build(params, version):
                fh.write(dumps_item(it) + "\n")
        else:
            step = -(-params.n // (workers * 4))
            bounds = [(s, min(s + step, params.n)) for s in range(0, params.n, step)]
            import multiprocessing as mp
            ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else None
            with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as ex:
                for text in ex.map(_lines_chunk, [params] * len(bounds), [version] * len(bounds),
                                   [b[0] for b in bounds], [b[1] for b in bounds]):
                    fh.write(text)
    seconds = time.perf_counter() - t0
    ev = register_artifact(ws, out_p, "pool", version=version, n=params.n, seed=params.seed, mix=params.mix,
                           max_turns=params.max_turns, clarify_rate=params.clarify_rate, tools=params.tools,
                           templates_dir=str(params.templates_dir),
                           **({"levels": {t: list(r) for t, r in params.levels.items()}} if params.levels else {}),
                           **({"custom_tasks": {t: d.provenance() for t, d in custom_used.items()}} if custom_used else {}))
    return {"path": ev.path, "sha256": ev.sha256, "n": params.n, "seconds": round(seconds, 3), "workers": workers,
            "version": version}


def make_min(ws: Workspace, templates_dir: str | Path = "templates/pack_v2", seed: int = 20250823,
             n_train: int = 120, n_eval: int = 40) -> dict:
    """Small train/eval files from the same builder (separate id/seed spaces: never the same items)."""
    out = {}
    for rel, n, space in ((TRAIN_MIN, n_train, "train_min"), (EVAL_MIN, n_eval, "eval_min")):
        p = BuildParams(n=n, templates_dir=ws.path(templates_dir), seed=seed, space=space, id_prefix=space)
        items = build_pool(p)
        path = ws.path(rel)
        write_jsonl(path, items)
        ev = register_artifact(ws, path, "pool", role=space, n=n, seed=seed)
        out[space] = {"path": ev.path, "sha256": ev.sha256, "n": n}
    return out


def make_shadow_set(ws: Workspace, *, n: int | None = 245, seed: int = 20250820, stratify: bool = True,
                    out: str | Path = SHADOW_SET, manifest: str | Path = SHADOW_MANIFEST,
                    templates_dir: str | Path = "templates/pack_v2", mix: dict | None = None,
                    target: dict | None = None, base: str | None = None,
                    tasks: "dict[str, TaskData] | None" = None, pool: str | Path | None = None) -> dict:
    """Shadow eval set: its own seed/id space ("shadow"), stratified by task x measured difficulty bucket.

    Custom tasks (`tasks`, named in `mix`) contribute held-out items of their task files instead of
    generated ones; n=None takes all of them (custom-only mix). A set that shares an item with the
    training pool file `pool` (when it exists) is refused."""
    custom = dict(tasks or {})
    mix = parse_mix(mix or DEFAULT_MIX, custom=custom)
    custom_mix = {t: w for t, w in mix.items() if t not in TASKS and w > 0}
    if n is None:
        if any(t in TASKS and w > 0 for t, w in mix.items()):
            n = 245
        else:
            n = int(min(len(custom[t].heldout) / w for t, w in custom_mix.items()) + 1e-9)
    if n < 1:
        raise ConfigError(f"--n must be >= 1 (got {n})" if not custom_mix else
                          f"shadow set: no held-out items in {sorted(custom_mix)} (raise the task's heldout share, or "
                          "give heldout_path)")
    target = D.parse_target(target or D.DEFAULT_TARGET)
    counter = get_counter(base)
    counts = allocate(n, mix)
    n_generated = sum(c for t, c in counts.items() if t in TASKS)
    items = []
    if n_generated:
        gen_mix = {t: w for t, w in mix.items() if t in TASKS}
        if custom_mix:
            gen_mix = {t: w / sum(gen_mix.values()) for t, w in gen_mix.items()}
        items += _generated_shadow_items(ws, n_generated, seed, stratify, templates_dir, gen_mix, target, counter)
    for task in sorted(custom_mix):
        items += _heldout_shadow_items(custom[task], counts.get(task, 0), seed, stratify, counter)
    pool_p = ws.path(pool) if pool else None
    if custom_mix and pool_p is not None and pool_p.exists():
        check_disjoint(read_jsonl(pool_p), items, ws.rel(pool_p), str(out))
    out_p = ws.path(out)
    write_jsonl(out_p, items)
    ev = register_artifact(ws, out_p, "shadow_set", n=n, seed=seed, stratify=stratify,
                           **({"custom_tasks": {t: custom[t].provenance() for t in custom_mix}} if custom_mix else {}))
    strata = {}
    for it in items:
        strata.setdefault(it["task"], {}).setdefault(it["bucket"], 0)
        strata[it["task"]][it["bucket"]] += 1
    space = "shadow (pool items use the 'pool' space: no shared seeds or ids)"
    if custom_mix:
        space += "; custom tasks: held-out items of their task files, disjoint from the training items"
    body = {"path": ev.path, "sha256": ev.sha256, "n": len(items), "seed": seed, "stratify": stratify,
            "strata": strata, "id_space": space, "mix": mix, "difficulty_target": target, "tokenizer": counter.name,
            "templates_dir": str(templates_dir), "ids": [it["id"] for it in items],
            **({"custom_tasks": {t: custom[t].provenance() for t in custom_mix}} if custom_mix else {}),
            "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    man_p = ws.path(manifest)
    atomic_write_json(man_p, body)
    register_artifact(ws, man_p, "shadow_manifest", shadow=ev.path)
    return body


def _generated_shadow_items(ws: Workspace, n: int, seed: int, stratify: bool, templates_dir, mix: dict,
                            target: dict, counter) -> list[dict]:
    """n generated items of the built-in tasks, stratified by task x measured bucket (or by task only)."""
    import random

    from rc1.data import generators as G
    from rc1.data.pool import CLARIFY_WEIGHT, LEVEL_WEIGHTS
    pack = load_pack(ws.path(templates_dir), tasks=tuple(t for t, w in mix.items() if w > 0))
    params = BuildParams(n=n, mix=mix, templates_dir=ws.path(templates_dir), seed=seed, space="shadow",
                         id_prefix="shadow")
    params.validate()
    if stratify:
        cells = allocate(n, {f"{t}|{b}": mix[t] * target[b] for t in TASKS for b in BUCKETS if mix.get(t, 0) > 0})
    else:
        cells = {f"{t}|any": c for t, c in allocate(n, mix).items()}
    items = []
    for cell in sorted(cells):
        task, bucket = cell.split("|")
        want, k, tries = cells[cell], 0, 0
        level_mean = sum(w * CLARIFY_WEIGHT[lv] for w, lv in zip(LEVEL_WEIGHTS[task], G.LEVELS))
        while k < want:
            tries += 1
            if tries > 200 * max(want, 1):
                raise ConfigError(f"shadow set: could not fill stratum {task}/{bucket} ({k}/{want} after {tries} draws)")
            rng = random.Random(f"shadow:{seed}:{task}:{bucket}:{tries}")
            it = make_item(task, rng, params, pack[task], f"shadow-{seed}-{task}-{bucket}-{k:04d}", level_mean,
                           level=None if bucket == "any" else bucket)
            [m], _ = D.compute_metrics([it], counter)
            if bucket != "any" and m["bucket"] != bucket:
                continue
            items.append(m)
            k += 1
    return items


def _heldout_shadow_items(task: "TaskData", n: int, seed: int, stratify: bool, counter) -> list[dict]:
    """n held-out items of a custom task, with difficulty metrics; a seeded sample stratified by bucket
    (in proportion to the buckets of the held-out items) when it is not all of them."""
    import random

    if n > len(task.heldout):
        raise ConfigError(f"shadow set: {task.name} needs {n} held-out items, its task file holds out "
                          f"{len(task.heldout)} (raise heldout, give heldout_path, or lower --n / pool.shadow_n)")
    measured, _ = D.compute_metrics(task.heldout, counter)
    if n == len(measured):
        return measured
    rng = random.Random(f"shadow:{seed}:{task.name}")
    if not stratify:
        picked = rng.sample(measured, n)
    else:
        by_bucket = {b: [m for m in measured if m["bucket"] == b] for b in BUCKETS}
        quota = allocate(n, {b: len(v) / len(measured) for b, v in by_bucket.items() if v})
        picked = [m for b, q in quota.items() for m in rng.sample(by_bucket[b], q)]
    position = {m["id"]: i for i, m in enumerate(measured)}
    return sorted(picked, key=lambda m: position[m["id"]])  # file order


def _input(ws: Workspace, p: Path | None) -> dict | None:
    return None if p is None else {"path": ws.rel(p), "sha256": sha256_file(p)}


def validate_pool_file(ws: Workspace, pool: str | Path, *, shadow: str | Path | None = SHADOW_SET,
                       v1: str | Path | None = V1_POOL, report: str | Path | None = DIVERSITY_REPORT,
                       th: PoolGate | None = None, base: str | None = None) -> dict:
    th = th or PoolGate()
    pool_p = ws.path(pool)
    # only the fields the checks read: keeps 300k-item pools within memory
    items = [{k: it[k] for k in VALIDATE_FIELDS if k in it} for it in iter_jsonl(pool_p)]
    check_items(pool_p, items)
    shadow_p = ws.path(shadow) if shadow else None
    shadow_items = read_jsonl(shadow_p) if shadow_p is not None and shadow_p.exists() else None
    v1_p = ws.path(v1) if v1 else None
    v1_items = read_jsonl(v1_p) if v1_p is not None and v1_p.exists() else None
    t0 = time.perf_counter()
    counter = get_counter(base)
    pool_sha = sha256_file(pool_p)
    lengths = counts_for_file(counter, [prompt_text(it) for it in items], pool_sha)
    rep = DV.validate(items, shadow_items, v1_items, th, counter=counter, lengths=lengths,
                      inputs={"pool": {"path": ws.rel(pool_p), "sha256": pool_sha},
                              "shadow": _input(ws, shadow_p) if shadow_items is not None else None,
                              "v1": _input(ws, v1_p) if v1_items is not None else None})
    rep["seconds"] = round(time.perf_counter() - t0, 3)
    if report:
        rp = ws.path(report)
        atomic_write_json(rp, rep)
        register_artifact(ws, rp, "diversity_report", pool=ws.rel(pool_p), passed=rep["passed"])
    return rep


def difficulty_metrics_file(ws: Workspace, pool: str | Path, out: str | Path, *, base: str | None = None) -> dict:
    pool_p, out_p = ws.path(pool), ws.path(out)
    items = read_jsonl(pool_p)
    check_items(pool_p, items)
    counter = get_counter(base)
    lengths = counts_for_file(counter, [prompt_text(it) for it in items], sha256_file(pool_p))
    metrics, tok = D.compute_metrics(items, counter, lengths)
    write_jsonl(out_p, metrics)
    _write_meta(ws, out_p, pool_p, tokenizer=tok, n=len(metrics))
    ev = register_artifact(ws, out_p, "difficulty_metrics", source=ws.rel(pool_p), tokenizer=tok)
    return {"path": ev.path, "sha256": ev.sha256, "n": len(metrics), "tokenizer": tok}


def bucketize_file(ws: Workspace, metrics: str | Path, out: str | Path, *, target=None, seed: int = 20250821,
                   mix=None) -> dict:
    from rc1.data.pool import parse_mix

    m_p, out_p = ws.path(metrics), ws.path(out)
    target = D.parse_target(target or D.DEFAULT_TARGET)
    items = read_jsonl(m_p)
    mix = parse_mix(mix, custom={it["task"] for it in items} - set(TASKS)) if mix else None  # custom: those present
    balanced, summary = D.balance(items, target, seed, mix)
    write_jsonl(out_p, balanced)
    _write_meta(ws, out_p, m_p, target=target, seed=seed, mix=mix, balance=summary, n=len(balanced))
    ev = register_artifact(ws, out_p, "balanced_pool", source=ws.rel(m_p), target=target, seed=seed, mix=mix)
    return {"path": ev.path, "sha256": ev.sha256, "n": len(balanced), "balance": summary}


def validate_difficulty_file(ws: Workspace, metrics: str | Path, balanced: str | Path, *,
                             report: str | Path | None = DIFFICULTY_REPORT, th: DifficultyGate | None = None) -> dict:
    th = th or DifficultyGate()
    m_p, b_p = ws.path(metrics), ws.path(balanced)
    m_items, b_items = read_jsonl(m_p), read_jsonl(b_p)
    for path, its in ((m_p, m_items), (b_p, b_items)):
        for lineno, it in enumerate(its, 1):
            if "difficulty" not in it or "bucket" not in it:
                raise ConfigError(f"{path}:{lineno}: item has no difficulty metrics/bucket "
                                  "(run `rc1 data difficulty metrics` then `bucketize`)")
    import json

    meta, bmeta = meta_path(m_p), meta_path(b_p)
    tok = json.loads(meta.read_text()).get("tokenizer") if meta.exists() else None
    balance_summary = json.loads(bmeta.read_text()).get("balance") if bmeta.exists() else None
    rep = D.build_report(m_items, b_items, th, tokenizer=tok or "unknown",
                         inputs={"metrics": _input(ws, m_p), "balanced": _input(ws, b_p)},
                         balance_summary=balance_summary)
    if report:
        rp = ws.path(report)
        atomic_write_json(rp, rep)
        register_artifact(ws, rp, "difficulty_report", passed=rep["passed"])
    return rep
