"""`rc1 bench eval`: eval throughput (episodes/s, generated tokens/s) of greedy episodes, or, with
`--checkpoint`, the held-out eval of a checkpoint timed on each generation backend.

Default: the embedded SmolLM2-135M on 16 items (the shadow set's first items when the workspace
has one, else freshly generated pool items), at batch size 16, max_new_tokens 48 (as
configs/local.yaml). `--quick`: 8 items, batch size 8. Options: --model, --n, --batch-size
(repeatable), --max-new-tokens, --threads, --dtype (fp32 | bf16).

`--checkpoint latest|<dir>|base` (with `--config`, default configs/local.yaml): the eval's own work on the
workspace's eval sets (rc1.eval.harness: the same sets, greedy settings, batch and sampler opening as `rc1
eval`), once per `--backend` (`torch`, `llamacpp`, `llamacpp:f16`, ...; default torch then llamacpp:f32): the
seconds to open the sampler (load, or GGUF export + agreement check) and to generate, the successes, each
backend's speed-up over the first, and every item whose success or final answer differs from the first's. A
backend that falls back (llama.cpp failing its check) is timed as what ran, and the row says so. `--batch-size`
and `--threads` override the eval's batch and the config's run.threads; `--backend` without `--checkpoint` is
refused.
"""

from __future__ import annotations

import time
from pathlib import Path

from rc1.runtime.workspace import Workspace

DEFAULT_MODEL = "embedded:smollm2-135m-instruct"


def _items(ws: Workspace, n: int) -> tuple[list[dict], str]:
    from rc1.eval.splits import read_items

    shadow = ws.path("data/shadow_eval_245.jsonl")
    if shadow.exists():
        return read_items(shadow)[:n], ws.rel(shadow)
    from rc1.data.pool import BuildParams, build_pool

    tpl = ws.path("templates/pack_v2")
    if not tpl.exists():
        tpl = Path(__file__).resolve().parents[2] / "templates" / "pack_v2"
    return build_pool(BuildParams(n=n, seed=4242, templates_dir=tpl, id_prefix="bench")), f"generated (seed 4242, {tpl.name})"


def run(ws: Workspace, quick: bool = False, *, model: str = DEFAULT_MODEL, n: int | None = None,
        batch_sizes: list[int] | None = None, max_new_tokens: int = 48, threads: int | None = None,
        dtype: str = "fp32", checkpoint: str | None = None, config: str = "configs/local.yaml",
        backends: list[str] | None = None, **_ignored) -> dict:
    if checkpoint is not None:
        return run_checkpoint(ws, checkpoint, config=config, backends=backends,
                              batch_size=batch_sizes[0] if batch_sizes else None, threads=threads)
    if backends:
        from rc1.runtime.errors import ConfigError

        raise ConfigError("--backend times the held-out eval of a checkpoint: it needs --checkpoint (latest, a dir, or base)")
    import torch

    from rc1.config.schema import TrainConfig
    from rc1.envs.rollout import generate_episodes
    from rc1.models.loader import load_model

    n = n or (8 if quick else 16)
    batch_sizes = batch_sizes or ([8] if quick else [16])
    if threads:
        torch.set_num_threads(int(threads))
    cfg = TrainConfig.model_validate({"model": {"base": model, "lora": {"enable": False}}, "finetune": {"method": "full"}})
    t0 = time.perf_counter()
    if dtype not in ("fp32", "bf16"):
        from rc1.runtime.errors import ConfigError

        raise ConfigError(f"--dtype {dtype!r}: expected fp32 or bf16")
    torch_dtype = torch.bfloat16 if dtype == "bf16" else torch.float32
    mdl, tok = load_model(cfg, device=torch.device("cpu"), dtype=torch_dtype, for_training=False)
    load_s = time.perf_counter() - t0
    items, source = _items(ws, n)
    rows = []
    for bs in batch_sizes:
        t0 = time.perf_counter()
        eps = []
        with torch.no_grad():
            for start in range(0, len(items), bs):
                eps += generate_episodes(mdl, tok, items[start:start + bs], max_new_tokens=max_new_tokens, greedy=True,
                                         seed=1, batch_size=bs)
        secs = time.perf_counter() - t0
        gen_tokens = sum(e.completion_tokens for e in eps)
        rows.append({"batch_size": bs, "episodes": len(eps), "seconds": round(secs, 3),
                     "episodes_per_s": round(len(eps) / secs, 3), "generated_tokens": gen_tokens,
                     "tokens_per_s": round(gen_tokens / secs, 1),
                     "mean_turns": round(sum(e.turns for e in eps) / len(eps), 3),
                     "truncated": sum(bool(e.truncated) for e in eps)})
    result = {"area": "eval", "model": model, "items": len(items), "source": source, "max_new_tokens": max_new_tokens,
              "dtype": dtype, "threads": torch.get_num_threads(), "device": "cpu", "model_load_s": round(load_s, 2), "runs": rows}
    print(f"eval throughput: {model} ({dtype}), {len(items)} items ({source}), max_new_tokens {max_new_tokens}, "
          f"{result['threads']} threads, model load {load_s:.1f} s")
    print(f"{'batch':>6} {'episodes':>9} {'seconds':>8} {'ep/s':>7} {'tok/s':>7} {'turns':>6} {'trunc':>6}")
    for r in rows:
        print(f"{r['batch_size']:>6} {r['episodes']:>9} {r['seconds']:>8.1f} {r['episodes_per_s']:>7.2f} "
              f"{r['tokens_per_s']:>7.1f} {r['mean_turns']:>6.2f} {r['truncated']:>6}")
    return result


DEFAULT_BACKENDS = ("torch", "llamacpp:f32")


def parse_backend(spec: str) -> tuple[str, str | None]:
    """'backend[:gguf_dtype]' -> (backend, gguf dtype or None); a ConfigError names what is wrong."""
    from rc1.generation import BACKENDS
    from rc1.runtime.errors import ConfigError

    backend, _, gguf_dtype = spec.partition(":")
    if backend not in (*BACKENDS, "auto"):
        raise ConfigError(f"--backend {spec!r}: unknown backend {backend!r}; expected auto or one of {', '.join(BACKENDS)}")
    if gguf_dtype and (backend not in ("llamacpp", "auto") or gguf_dtype not in ("f32", "f16", "bf16")):
        raise ConfigError(f"--backend {spec!r}: a GGUF type (f32, f16, bf16) goes only with llamacpp or auto")
    return backend, gguf_dtype or None


def run_checkpoint(ws: Workspace, checkpoint: str, *, config: str = "configs/local.yaml",
                   backends: list[str] | None = None, batch_size: int | None = None,
                   threads: int | None = None) -> dict:
    """The held-out eval of `checkpoint` ('base' for the base model) once per backend; see the module docstring.
    `threads` overrides the config's run.threads (torch and llama.cpp alike)."""
    from rc1.config.load import load_train_config
    from rc1.eval import harness
    from rc1.eval.loading import resolve_checkpoint, torch_setup
    from rc1.generation import base_ref, open_sampler

    specs = list(backends or DEFAULT_BACKENDS)
    parsed = [parse_backend(s) for s in specs]  # every spec is checked before anything runs
    cfg = load_train_config(config, ws)
    if threads:
        cfg = cfg.model_copy(update={"run": cfg.run.model_copy(update={"threads": int(threads)})})
    sets = harness.eval_sets(ws, cfg)
    ckpt = None if checkpoint == "base" else resolve_checkpoint(ws, cfg, checkpoint)
    device, dtype = torch_setup(cfg)
    gen = harness.generation_settings(cfg, batch_size or harness.DEFAULT_BATCH, dtype)
    items = [(name, it) for name, s in sets.items() for it in s.items]
    rows, first = [], None
    for spec, (backend, gguf_dtype) in zip(specs, parsed):
        update = {"backend": backend, **({"gguf_dtype": gguf_dtype} if gguf_dtype else {})}
        c = cfg.model_copy(update={"generation": cfg.generation.model_copy(update=update)})
        ref = base_ref(c) if ckpt is None else harness.checkpoint_ref(c, ckpt)[0]
        t0 = time.perf_counter()
        sampler, note, check = open_sampler(c, ref, device=device, dtype=dtype)
        open_s = time.perf_counter() - t0
        try:
            records, gen_s = harness.run_items(sampler, [it for _, it in items], gen)
        finally:
            sampler.close()
        row = {"backend": spec, "ran": sampler.backend, "note": note or None,
               "check_max_logprob_diff": check.get("max_logprob_diff"), "open_s": round(open_s, 2),
               "generation_s": round(gen_s, 2), "total_s": round(open_s + gen_s, 2),
               "successes": sum(r.success for r in records), "episodes": len(records),
               "per_set": {name: sum(r.success for (n_, _), r in zip(items, records) if n_ == name) for name in sets}}
        if first is None:
            first = (row, records)
        else:
            ref_row, ref_records = first
            row["speedup_generation"] = round(ref_row["generation_s"] / gen_s, 3) if gen_s else None
            row["speedup_total"] = round(ref_row["total_s"] / row["total_s"], 3) if row["total_s"] else None
            row["differs_from_first"] = [
                {"set": name, "item": a.item_id, "success": [a.success, b.success],
                 "final_answer": [a.final_answer, b.final_answer]}
                for (name, _), a, b in zip(items, ref_records, records)
                if a.success != b.success or a.final_answer != b.final_answer]
            row["success_flips"] = sum(1 for d in row["differs_from_first"] if d["success"][0] != d["success"][1])
        rows.append(row)
    result = {"area": "eval", "mode": "checkpoint", "checkpoint": "base" if ckpt is None else ws.rel(ckpt),
              "config": config, "sets": {name: len(s.items) for name, s in sets.items()},
              "generation": gen, "threads": cfg.run.threads, "rows": rows}
    print(f"held-out eval of {result['checkpoint']}: {len(items)} items "
          f"({', '.join(f'{k} {v}' for k, v in result['sets'].items())}), greedy, {gen['max_new_tokens']} new tokens, "
          f"batch {gen['batch_size']}")
    print(f"{'backend':<16} {'ran':<9} {'open s':>7} {'gen s':>7} {'total s':>8} {'x gen':>6} {'x total':>8} "
          f"{'successes':>10} {'differ':>7}")
    for r in rows:
        print(f"{r['backend']:<16} {r['ran']:<9} {r['open_s']:>7.1f} {r['generation_s']:>7.1f} {r['total_s']:>8.1f} "
              f"{r.get('speedup_generation') or 1:>6.2f} {r.get('speedup_total') or 1:>8.2f} "
              f"{r['successes']:>4} / {r['episodes']:<3} {len(r.get('differs_from_first', [])):>7}")
        if r["note"]:
            print(f"  {r['backend']}: {r['note']}")
    return result
