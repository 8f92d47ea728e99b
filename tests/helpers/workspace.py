"""A tiny training workspace: arithmetic items, reward weights, a gates config and configs/run.yaml.

Plain module (tests import it directly); tests/training/conftest.py re-exports it for older imports."""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers.configs import gates_yaml

WEIGHTS = {"correctness": 0.45, "reasoning": 0.12, "grounding": 0.12, "clarity": 0.07, "conciseness": 0.06,
           "format": 0.08, "clarification": 0.10}


def arithmetic_items(n: int, start: int = 0, prefix: str = "t") -> list[dict]:
    out = []
    for i in range(start, start + n):
        a, b = 2 + i % 7, 3 + (i * 5) % 11
        q = f"What is {a} + {b}?"
        out.append({
            "id": f"{prefix}{i:04d}", "task": "gsm8k", "template": "gsm8k/t01", "role": "student", "style": "plain",
            "messages": [{"role": "user", "content": q}], "question": q, "answer": str(a + b), "aliases": [],
            "supporting": [f"{a} plus {b} is {a + b}."], "corpus": [], "needs_clarification": False,
            "hidden_detail": None, "tools": ["calc"], "max_turns": 2, "meta": {},
            "bucket": ("easy", "medium", "hard")[i % 3]})
    return out


def make_workspace(root: Path, model_dir: Path, *, engine: str = "pure_pt", strategy: str = "grpo",
                   max_steps: int = 4, save_steps: int = 2, grad_accum: int = 1, method: str = "full",
                   extra: dict | None = None, n_items: int = 12) -> Path:
    """A workspace with data, weights and configs/run.yaml; returns the config path (workspace-relative)."""
    import yaml

    (root / "data").mkdir(parents=True, exist_ok=True)
    (root / "configs").mkdir(parents=True, exist_ok=True)
    with open(root / "data/train_min.jsonl", "w") as fh:
        for it in arithmetic_items(n_items):
            fh.write(json.dumps(it) + "\n")
    with open(root / "data/eval_min.jsonl", "w") as fh:
        for it in arithmetic_items(4, start=100, prefix="e"):
            fh.write(json.dumps(it) + "\n")
    (root / "configs/weights.json").write_text(json.dumps({"version": "t", "weights": WEIGHTS}))
    (root / "configs/gates.yaml").write_text(gates_yaml({"run_config": {"min_steps": 1}}))
    cfg = {
        "profile": "laptop",
        "run": {"name": "t", "seed": 7, "max_steps": max_steps, "save_steps": save_steps, "eval_steps": 1000,
                "keep_last": 10, "gradient_accumulation": grad_accum, "device_pref": ["cpu"], "threads": 1},
        "model": {"base": str(model_dir), "max_new_tokens": 8, "gradient_checkpointing": False,
                  "lora": {"enable": method != "full", "r": 4, "alpha": 8, "dropout": 0.0}},
        "finetune": {"method": method},
        "engine": {"name": engine, "lr": 1e-3, "lr_schedule": "linear", "warmup_steps": 1},
        "strategy": {"name": strategy, "num_generations": 3, "prompts_per_step": 2},
        "data": {"max_length": 256},
        "callbacks": ["logging", "checkpoint"],
        "seed_pool": "data/rollouts/none.jsonl",
        "target_kl": 0.03,
    }
    for dotted, value in (extra or {}).items():
        d = cfg
        keys = dotted.split(".")
        for k in keys[:-1]:
            d = d.setdefault(k, {})
        d[keys[-1]] = value
    (root / "configs/run.yaml").write_text(yaml.safe_dump(cfg))
    return Path("configs/run.yaml")
