"""`rc1 bench grpo`: the pure PyTorch engine vs TRL's GRPOTrainer on identical GRPO work.

Work: the embedded SmolLM2-135M-Instruct, full parameters, 8 prompts x 4 completions x <= 32 new
tokens per step (`--quick`: 4 x 4 x 16), single-turn (TRL generates one turn; the pure engine's episodes are capped at one
turn for a like-for-like comparison), the same config, data, rewards and seeds. Each engine runs
in its own fresh process (clean peak memory), `warmup` untimed steps then `steps` timed ones,
through the same TrainingRecipe `rc1 train` uses.

Reported per engine: seconds per step (median), completion tokens per second (of the whole step, and of
the rollout alone: its `time/generate_s`), peak memory (CUDA allocator peak on a GPU, peak RSS on CPU),
and which backend sampled the rollouts (`--rollout-backend`: torch, llamacpp or paged; `sampled_by` says
torch where one fell back). Target: pure sec/step <= 0.5 x TRL.

Option `learning`: accuracy (greedy, exact answer) on 200 held-out arithmetic items before
and after `budget_s` seconds of pure-engine GRPO on disjoint training items.

Other bases and methods (`base`, `finetune`, `engines`, `prompts`, `generations`, `max_new_tokens`):
e.g. `rc1 bench grpo --base random:qwen3-4b --finetune qlora --engines pure_pt --steps 20` times
20 GRPO steps of a random-weight model of Qwen3-4B's exact shape (rc1.models.shapes) on whatever
device is there (cuda first), and reports s/step and peak memory.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import shutil
import statistics
import tempfile
import time
from pathlib import Path

BASE = "embedded:smollm2-135m-instruct"
DEFAULT_WEIGHTS = {"correctness": 0.45, "reasoning": 0.12, "grounding": 0.12, "clarity": 0.07,
                   "conciseness": 0.06, "format": 0.08, "clarification": 0.10}


def arithmetic_items(n: int, *, seed: int, prefix: str, exclude: set[tuple] | None = None) -> list[dict]:
    """Single-step arithmetic prompts (a + b, a - b, a * b) with exact gold answers."""
    import random

    rng = random.Random(seed)
    out, seen = [], set(exclude or ())
    while len(out) < n:
        op = rng.choice("+-*")
        a, b = (rng.randint(10, 99), rng.randint(10, 99)) if op != "*" else (rng.randint(2, 12), rng.randint(2, 12))
        if (a, op, b) in seen:
            continue
        seen.add((a, op, b))
        gold = a + b if op == "+" else a - b if op == "-" else a * b
        q = f"What is {a} {op} {b}? Reply with the number."
        out.append({"id": f"{prefix}{len(out):04d}", "task": "gsm8k", "template": "bench/arith", "role": "student",
                    "style": "plain", "messages": [{"role": "user", "content": q}], "question": q,
                    "answer": str(gold), "aliases": [], "supporting": [], "corpus": [], "needs_clarification": False,
                    "hidden_detail": None, "tools": [], "max_turns": 1, "meta": {"key": [a, op, b]},
                    "bucket": "easy"})
    return out


def _workspace(root: Path, items: list[dict], cfg_over: dict) -> Path:
    import yaml

    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "configs").mkdir(parents=True, exist_ok=True)
    with open(root / "data/train_min.jsonl", "w") as fh:
        for it in items:
            fh.write(json.dumps(it) + "\n")
    (root / "configs/weights.json").write_text(json.dumps({"version": "bench", "weights": DEFAULT_WEIGHTS}))
    cfg = {"profile": "laptop", "seed_pool": "data/none.jsonl", "callbacks": ["logging"],
           "run": {"name": "bench", "seed": 11, "save_steps": 100000, "eval_steps": 100000, "device_pref": ["cuda", "mps", "cpu"]},
           "model": {"base": BASE, "max_new_tokens": 32, "gradient_checkpointing": False, "temperature": 1.0},
           "finetune": {"method": "full"}, "priority_sampling": {"enable": False},
           "engine": {"lr": 1e-5}, "strategy": {"name": "grpo", "num_generations": 4, "prompts_per_step": 8,
                                                 "kl_coef": 0.04}}
    for section, values in cfg_over.items():
        if isinstance(values, dict):
            cfg.setdefault(section, {}).update(values)
        else:
            cfg[section] = values
    (root / "configs/bench.yaml").write_text(yaml.safe_dump(cfg))
    return Path("configs/bench.yaml")


TRAIN_PHASES = ("plan", "backward", "optimizer")  # the recipe's spans after the rollout (rc1.training.recipe)


def _rollout_backends() -> tuple[str, ...]:
    import typing

    from rc1.config.schema import GenerationSection

    return typing.get_args(GenerationSection.model_fields["rollout_backend"].annotation)


ROLLOUT_BACKENDS = _rollout_backends()  # generation.rollout_backend's choices, read from the schema


def _peak_mb(device) -> float:
    from rc1.runtime.device import peak_memory_mb

    return peak_memory_mb(device)


def _run_engine(engine: str, steps: int, warmup: int, threads: int | None, work: dict) -> dict:
    """Child process: train warmup+steps GRPO steps with `engine`; timings from metrics.jsonl."""
    import torch

    from rc1.config.load import load_train_config
    from rc1.training.base import make_recipe
    from rc1.runtime.workspace import Workspace

    root = Path(tempfile.mkdtemp(prefix=f"rc1-bench-{engine}-"))
    try:
        items = arithmetic_items(64, seed=3, prefix="b")
        conf = _workspace(root, items, {"engine": {"name": engine},
                                        "run": {"max_steps": warmup + steps, "threads": threads,
                                                "micro_batch_size": work.get("micro_batch_size")},
                                        "model": {"base": work["model"], "max_new_tokens": work["max_new_tokens"]},
                                        "finetune": {"method": work["finetune"]},
                                        # engine trl samples with its own generate(): the option is pure_pt's
                                        "generation": {"rollout_backend": work.get("rollout_backend", "torch")
                                                       if engine == "pure_pt" else "torch"},
                                        "strategy": {"num_generations": work["completions_per_prompt"],
                                                     "prompts_per_step": work["prompts"]}})
        ws = Workspace(root)
        cfg = load_train_config(conf, ws)
        recipe = make_recipe(ws, cfg, config_path=str(conf), checkpoints=False)
        recipe.setup()
        device = getattr(recipe.engine, "device", torch.device("cpu"))
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        recipe.train()
        recs = [json.loads(l) for l in ws.metrics_path.read_text().splitlines()][warmup:]
        secs = [r["sec_per_step"] for r in recs]
        phases = {k: statistics.median(r.get(f"time/{k}_s", 0.0) for r in recs)
                  for k in ("sync", "generate", *TRAIN_PHASES)}
        train = [sum(r.get(f"time/{k}_s", 0.0) for k in TRAIN_PHASES) for r in recs]
        n_completions = work["prompts"] * work["completions_per_prompt"]
        tokens = [r["completion_len"] * n_completions for r in recs]  # mean completion length x completions
        generate_s = sum(r.get("time/generate_s", 0.0) for r in recs)
        return {"engine": engine, "device": str(device), "steps": len(recs), "sec_per_step": statistics.median(secs),
                "sec_per_step_all": secs, "train_s_all": train, "completion_tokens_per_s": sum(tokens) / sum(secs),
                "rollout_tokens_per_s": sum(tokens) / generate_s if generate_s > 0 else None,
                "rollout_backend": cfg.generation.rollout_backend,
                "sampled_by": getattr(recipe.engine, "sampled_by", None),  # torch where a backend fell back
                "peak_memory_mb": _peak_mb(device), "mean_reward": statistics.fmean(r["reward"] for r in recs),
                "median_phase_s": phases,
                "sampler_mismatch_kl": statistics.fmean(r.get("sampler_mismatch_kl", 0.0) for r in recs)}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _accuracy(model, tokenizer, items: list[dict], batch_size: int = 50) -> float:
    from rc1.envs.rollout import generate_episodes
    from rc1.envs.verifiers import verify_episode

    correct = 0
    for i in range(0, len(items), batch_size):
        chunk = items[i:i + batch_size]
        eps = generate_episodes(model, tokenizer, chunk, greedy=True, max_new_tokens=32, max_turns=1,
                                batch_size=batch_size)
        correct += sum(verify_episode(it, ep).success for it, ep in zip(chunk, eps))
    return correct / len(items)


def _learning_check(budget_s: float, threads: int | None) -> dict:
    """Child process: held-out accuracy before / after `budget_s` seconds of pure-engine GRPO."""
    from rc1.callbacks.base import BaseCallback
    from rc1.config.load import load_train_config
    from rc1.training.base import make_recipe
    from rc1.runtime.workspace import Workspace

    held_out = arithmetic_items(200, seed=101, prefix="h")
    train = arithmetic_items(400, seed=202, prefix="tr", exclude={tuple(it["meta"]["key"]) for it in held_out})
    root = Path(tempfile.mkdtemp(prefix="rc1-bench-learn-"))
    try:
        conf = _workspace(root, train, {"run": {"max_steps": 100000, "threads": threads},
                                        "engine": {"name": "pure_pt", "lr": 2e-5}})
        ws = Workspace(root)
        recipe = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf), checkpoints=False)
        recipe.setup()
        model, tok = recipe.engine.model, recipe.engine.tokenizer
        before = _accuracy(model, tok, held_out)

        class Budget(BaseCallback):
            def __init__(self):
                self.t0 = time.monotonic()

            def on_step_end(self, r, record):
                if time.monotonic() - self.t0 >= budget_s:
                    r.request_stop("budget")

        recipe.callbacks.insert(0, Budget())
        t0 = time.monotonic()
        recipe.train()
        trained_s = time.monotonic() - t0
        after = _accuracy(model, tok, held_out)
        recs = [json.loads(l) for l in ws.metrics_path.read_text().splitlines()]
        return {"held_out_items": len(held_out), "accuracy_before": before, "accuracy_after": after,
                "delta_pp": round(100 * (after - before), 2), "train_steps": recipe.step,
                "train_seconds": round(trained_s, 1), "budget_s": budget_s,
                "train_reward_first5": statistics.fmean(r["reward"] for r in recs[:5]),
                "train_reward_last5": statistics.fmean(r["reward"] for r in recs[-5:])}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _in_child(fn, *args):
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, args)


def run(ws, quick: bool = False, steps: int | None = None, warmup: int = 1, learning: bool = False,
        budget_s: float = 600.0, threads: int | None = None, base: str | None = None, finetune: str = "full",
        engines: list[str] | tuple[str, ...] = ("pure_pt", "trl"), prompts: int | None = None,
        generations: int | None = None, max_new_tokens: int | None = None, rollout_backend: str = "torch") -> dict:
    """The full work is 8 prompts x 4 completions x 32 tokens; --quick runs 4 x 4 x 16 for one timed step
    (a smoke run on a slow or shared CPU; the report says which work was measured)."""
    from rc1.runtime.atomic import atomic_write_json
    from rc1.runtime.errors import ConfigError

    unknown = sorted(set(engines) - {"pure_pt", "trl"})
    if unknown or not engines:
        raise ConfigError(f"--engines {','.join(engines)}: expected pure_pt and/or trl")
    if finetune not in ("full", "lora", "qlora"):
        raise ConfigError(f"--finetune {finetune!r}: expected full, lora or qlora")
    steps = steps or (1 if quick else 4)
    work = ({"prompts": 4, "completions_per_prompt": 4, "max_new_tokens": 16} if quick else
            {"prompts": 8, "completions_per_prompt": 4, "max_new_tokens": 32})
    work.update({k: v for k, v in (("prompts", prompts), ("completions_per_prompt", generations),
                                   ("max_new_tokens", max_new_tokens)) if v is not None})
    if rollout_backend not in ROLLOUT_BACKENDS:
        raise ConfigError(f"--rollout-backend {rollout_backend!r}: expected one of {', '.join(ROLLOUT_BACKENDS)}")
    work.update(model=base or BASE, finetune=finetune, rollout_backend=rollout_backend)
    result: dict = {"work": {**work, "single_turn": True, "quick": quick, "timed_steps": steps,
                             "warmup_steps": warmup}}
    partial = ws.reports / "bench" / "grpo.partial.json"  # survives a run killed half-way
    runs = {}
    for engine in engines:
        runs[engine] = _in_child(_run_engine, engine, steps, warmup, threads, work)
        atomic_write_json(partial, {**result, **{("pure" if k == "pure_pt" else k): v for k, v in runs.items()}})
    result.update({("pure" if k == "pure_pt" else k): v for k, v in runs.items()})
    print(f"{'engine':8} {'device':6} {'sec/step':>9} {'tok/s':>8} {'rollout tok/s':>13} {'peak MB':>9} {'reward':>7}")
    for r in runs.values():
        rollout_tps = r.get("rollout_tokens_per_s")
        print(f"{r['engine']:8} {r['device']:6} {r['sec_per_step']:9.2f} {r['completion_tokens_per_s']:8.1f} "
              f"{rollout_tps if rollout_tps is None else round(rollout_tps, 1)!s:>13} "
              f"{r['peak_memory_mb']:9.0f} {r['mean_reward']:7.3f}")
    if "pure_pt" in runs and "trl" in runs:
        ratio = runs["pure_pt"]["sec_per_step"] / runs["trl"]["sec_per_step"]
        result.update(pure_over_trl_sec_per_step=round(ratio, 3), target="<= 0.5", target_met=ratio <= 0.5)
        print(f"pure / trl sec/step = {ratio:.3f} (target <= 0.5: {'met' if ratio <= 0.5 else 'NOT met'})")
    if learning:
        lc = _in_child(_learning_check, float(budget_s), threads)
        result["learning"] = lc
        print(f"learning check: held-out accuracy {lc['accuracy_before']:.3f} -> {lc['accuracy_after']:.3f} "
              f"({lc['delta_pp']:+.1f} pp) after {lc['train_steps']} GRPO steps in {lc['train_seconds']}s")
    return result
