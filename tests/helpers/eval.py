"""Eval test helpers: tiny item sets, a tiny-model config, trainer-format checkpoints, end records, and
crafted eval reports built with the real metrics code."""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

BUCKET_CYCLE = ("easy", "medium", "hard")


def make_items(n: int, seed: int = 7) -> list[dict]:
    """Real generated pool items (rc1.data) with difficulty buckets assigned in a fixed cycle."""
    from rc1.data.pool import BuildParams, build_pool

    items = build_pool(BuildParams(n=n, seed=seed, id_prefix=f"ev{seed}",
                                   templates_dir=REPO / "templates" / "pack_v2"))
    for i, it in enumerate(items):
        it["bucket"] = BUCKET_CYCLE[i % 3]
    return items


def write_jsonl(path, items) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(it) + "\n" for it in items))


TINY_CONFIG = """\
profile: laptop
gates: configs/gates_local.yaml
run: {{name: evt, seed: 1, threads: 1, device_pref: [cpu]}}
data: {{shadow_path: data/shadow.jsonl, eval_path: data/eval_min.jsonl}}
model: {{base: "random:qwen3-tiny", max_new_tokens: 6, lora: {{enable: false}}}}
finetune: {{method: full}}
eval: {{metric: {metric}}}
"""


def write_trainer_checkpoint(ws, cfg, step: int, *, scale: float = 1.0, run_dir: str | None = None):
    """A checkpoint in the trainer's format (rc1.runtime.checkpoint.write_checkpoint): full weights,
    optionally scaled so the model differs from the base."""
    import torch
    from safetensors.torch import save_file

    from rc1.config.load import config_hash
    from rc1.models.loader import load_model
    from rc1.runtime.checkpoint import MODEL_FILE, write_checkpoint

    model, _ = load_model(cfg, device=torch.device("cpu"), dtype=torch.float32, for_training=True)
    weights = {n: (p.detach() * scale).contiguous() for n, p in model.named_parameters() if p.requires_grad}
    return write_checkpoint(ws, run_dir or cfg.checkpoint_dir, step,
                            {MODEL_FILE: lambda p: save_file(weights, str(p))},
                            {"config_hash": config_hash(cfg), "config": cfg.model_dump(mode="json"),
                             "run": cfg.run.name})


def write_end_record(ws, end_file: str, ckpt, *, reason: str = "completed", step: int = 10, max_steps: int = 10,
                     stopped_early: bool | None = None, train_dtype: str | None = "fp32", run_dir: str | None = None):
    """The training recipe's end record (reports/state/training_end*.json) for a run that ended at `ckpt`."""
    from rc1.runtime.atomic import atomic_write_json

    rec = {"time": "2026-01-01T00:00:00Z", "reason": reason, "step": step, "max_steps": max_steps,
           "run_dir": run_dir or ws.rel(Path(ckpt).parent), "checkpoint": ws.rel(ckpt)}
    if stopped_early is not None:
        rec["stopped_early"] = stopped_early
    if train_dtype is not None:
        rec["train_dtype"] = train_dtype
    return atomic_write_json(ws.path(end_file), rec)


# ----------------------------------------------------------------------------- crafted eval reports
def recs(n: int = 100, *, ok_need: int, overclar: int, ok_hard: int, turns=lambda i: 2 + i % 2,
         task: str = "hotpotqa"):
    """n items: the first half need clarification (ok_need of them solved), the second half do not and are
    hard (ok_hard solved, the first `overclar` of them asked anyway). Needing items always ask."""
    from rc1.eval.metrics import EpisodeRecord

    half = n // 2
    out = []
    for i in range(n):
        need = i < half
        ok = (i < ok_need) if need else (i - half < ok_hard)
        clar = 1 if need or (i - half < overclar) else 0
        out.append(EpisodeRecord(f"i{i}", task, "easy" if need else "hard", need, ok, float(ok), clar, turns(i), 0, False))
    return out


def items_for(records, answer=lambda i: f"unique answer {i}") -> list[dict]:
    """Minimal items behind crafted records, with gold answers from `answer(index)` (for the majority baseline)."""
    return [{"id": r.item_id, "task": r.task, "answer": answer(i), "aliases": []} for i, r in enumerate(records)]


def crafted_report(ws, base, runs, *, items=None, profile: str = "laptop",
                   name: str = "eval_20261122_000001.json", sets: dict | None = None, heldout_set: str = "shadow",
                   train_items=None):
    """An eval report (the harness's layout) from records; `runs` = [(ckpt, trained records, end_file,
    run_dir)], end_file/run_dir may be None. Written atomically with its sidecar, as `rc1 eval` does.

    `sets` (optional) = {set name: {"base": records, "trained": [records per run], "items": items or None,
    "measures": what the set measures by construction (rc1.eval.harness.set_measures) or None, "n": items}}:
    several sets (e.g. fitted + shadow); the runs' own trained records are then ignored. `train_items`: the
    training split the majority-class baseline is chosen on."""
    from rc1.eval.harness import REPORT_VERSION, runs_spread
    from rc1.eval.metrics import (compare, flat_split, majority_baseline, mde_table, pooled_compare, summarize,
                                  versus_baseline)
    from rc1.eval.runs import read_end
    from rc1.runtime.atomic import atomic_write_json
    from rc1.runtime.fingerprint import register_artifact, sha256_file

    if sets is None:
        sets = {"shadow": {"base": base, "trained": [r[1] for r in runs], "items": items}}
    results, pooled, described, per_run = {}, {}, {}, [dict() for _ in runs]
    for set_name, spec in sets.items():
        b = spec["base"]
        maj = majority_baseline(spec.get("items") or items_for(b), train_items,
                                train_source="data/train.jsonl" if train_items else None)
        sb = summarize(b)
        results[set_name] = {"base": sb, "majority": maj, "base_vs_majority": versus_baseline(b, maj["items"]),
                             "mde": mde_table(b), "split": flat_split(sb, None)}
        pooled[set_name] = pooled_compare(b, spec["trained"], maj["items"])
        described[set_name] = {"path": f"data/{set_name}.jsonl", "n": spec.get("n", len(b)), "n_file": len(b),
                               "sha256": "0" * 64, "role": set_name,
                               **({"measures": spec["measures"]} if spec.get("measures") else {})}
        for i, trained in enumerate(spec["trained"]):
            st, d = summarize(trained), compare(b, trained)
            per_run[i][set_name] = {"trained": st, "delta": d, "vs_majority": versus_baseline(trained, maj["items"]),
                                    "split": flat_split(st, d)}
    entries = []
    for i, (ckpt, trained, end_file, run_dir) in enumerate(runs):
        end = read_end(ws, end_file).to_dict() if end_file else {"end_file": "", "exists": False, "reason": None,
                                                                  "stopped_early": None, "train_dtype": "unknown"}
        n = len(next(iter(sets.values()))["base"])
        entries.append({"seed_index": i, "seed": 100 + i, "run_dir": run_dir or ws.rel(Path(ckpt).parent),
                        "checkpoint": {"path": ws.rel(ckpt), "step": 10,
                                       "manifest_sha256": sha256_file(Path(ckpt) / "manifest.json")},
                        "training": end, "results": per_run[i],
                        "metric": {"name": "success", "split": None, "value": None}, "best": None,
                        "throughput": {"episodes": n, "seconds": 1.0, "episodes_per_s": n}})

    doc = {"kind": "eval", "version": REPORT_VERSION, "profile": profile, "heldout_set": heldout_set, "dev_set": None,
           "run_dir": entries[0]["run_dir"] if len(entries) == 1 else None,
           "checkpoint": entries[0]["checkpoint"] if len(entries) == 1 else None,
           "dtype": {"eval": "fp32", "requested": "auto", "device": "cpu", "cpu_native_bf16": False,
                     "train": sorted({e["training"]["train_dtype"] for e in entries})},
           "sets": described, "model": {"base": "random:qwen3-tiny"}, "generation": {"max_new_tokens": 8},
           "results": results, "runs": entries, "pooled": pooled if entries else None,
           "spread": {s: runs_spread(entries, s) for s in sets} if len(entries) > 1 else None,
           "throughput": {"base": {"episodes": len(base or []), "cached": True, "cached_sets": list(sets)},
                          "runs": [e["throughput"] for e in entries]}}
    p = atomic_write_json(ws.reports / name, doc)
    register_artifact(ws, p, "eval")
    return p
