"""Step-based learning check of generation.rollout_dtype (docs/generation.md): fp32 training, rollouts from the
fp32 policy (auto) or from a bf16 copy (bf16), on `rc1 bench learn`'s task and work (its items, WORK, reward),
the same training seed for both; greedy held-out accuracy (100 items, fp32 weights) at step 0 and every 40 steps.

    .venv/bin/python docs/experiments/rollout_dtype_learning.py auto|bf16 SEED STEPS

prints one JSON line: the eval points, wall time, generation time and tokens, the mean sampler mismatch KL, the
mean reward of the last 40 steps.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import torch

from rc1.bench.learn import _EQUAL_WEIGHTS, WORK, _setup_process, greedy_accuracy, rc1_config, split_items
from rc1.callbacks.base import BaseCallback
from rc1.config.schema import TrainConfig
from rc1.rewards.reward import RewardModel
from rc1.runtime.workspace import Workspace
from rc1.training.base import make_recipe

EVAL_EVERY = 40


def main(rollout_dtype: str, seed: int, steps: int) -> dict:
    _setup_process(None)
    train, held_out = split_items(100)
    root = Path(tempfile.mkdtemp())
    ws = Workspace(root)
    (root / "data").mkdir(parents=True)
    (root / "data/train.jsonl").write_text("".join(json.dumps(it) + "\n" for it in train))
    conf = rc1_config({"seed": seed, "threads": None, "model": "embedded:smollm2-135m-instruct"})
    conf["run"].update(mixed_precision="fp32", max_steps=steps)
    conf["generation"] = {"rollout_dtype": rollout_dtype}
    cfg = TrainConfig.model_validate(conf)
    reward = RewardModel(_EQUAL_WEIGHTS, cfg.reward, use_overclar_penalty=False)
    recipe = make_recipe(ws, cfg, checkpoints=False, reward_model=reward)
    recipe.setup()
    engine = recipe.engine
    points = []

    def evaluate(step: int) -> None:
        with torch.no_grad():
            acc = greedy_accuracy(engine.model, engine.tokenizer, held_out, WORK["max_new_tokens"])
        points.append({"step": step, "accuracy": acc})

    class Eval(BaseCallback):
        def on_step_end(self, r, record):
            if r.step % EVAL_EVERY == 0:
                evaluate(r.step)

    evaluate(0)
    recipe.callbacks.insert(0, Eval())
    t0 = time.perf_counter()
    recipe.train()
    wall = time.perf_counter() - t0
    records = [json.loads(line) for line in ws.metrics_path.read_text().splitlines()]
    generate_s = sum(r.get("time/generate_s", 0.0) for r in records)
    tokens = sum(r.get("completion_tokens") or 0 for r in records)
    kl = [r["sampler_mismatch_kl"] for r in records if r.get("sampler_mismatch_kl") is not None]
    return {"dtype": rollout_dtype, "seed": seed, "steps": steps, "points": points, "wall_s": round(wall, 1),
            "generate_s": round(generate_s, 1), "completion_tokens": tokens,
            "gen_tok_s": round(tokens / generate_s, 1) if generate_s else None,
            "mismatch_kl_mean": sum(kl) / len(kl) if kl else None,
            "reward_last40": sum(r.get("reward", 0.0) for r in records[-40:]) / 40}


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]))), flush=True)
