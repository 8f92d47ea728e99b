"""Custom-task test data: a generated JSONL task file of arithmetic word problems (bring your own task)."""

from __future__ import annotations

import json
import random
from pathlib import Path

NAMES = ["Ada", "Bruno", "Chen", "Dalia", "Emeka", "Farah", "Goran", "Hana", "Ivo", "Jun", "Kemal", "Lena",
         "Mateo", "Nadia", "Oskar", "Priya", "Quinn", "Rosa", "Sami", "Tove", "Ugo", "Vera", "Wren", "Yusuf"]
THINGS = ["marbles", "stamps", "apples", "pencils", "shells", "coins", "stickers", "books", "cards", "beads",
          "buttons", "tickets", "plums", "candles", "ribbons", "keys", "lemons", "postcards", "bolts", "seeds"]
PLACES = ["at the market", "in the attic", "at school", "on the farm", "at the harbour", "in the library",
          "at the fair", "in the garden", "at the station", "in the workshop", "by the river", "at the bakery"]
# (steps, template, answer): a, b, c are small integers; who/other are names
FRAMES = [
    (1, "{who} keeps {a} {thing} {place} and then finds {b} more next to {other}. How many {thing} does {who} have now?",
     lambda a, b, c: a + b),
    (1, "There were {a} {thing} {place} this morning; {other} sold {b} before noon. How many remain?",
     lambda a, b, c: a - b),
    (1, "{who} gave {other} {b} {thing} yesterday, leaving {who} with {a}. How many did {who} start with?",
     lambda a, b, c: a + b),
    (2, "{who} packs {b} boxes {place}, each holding {c} {thing}, and {other} adds {a} loose ones. "
        "How many {thing} are there altogether?", lambda a, b, c: b * c + a),
    (2, "Every week {who} collects {c} {thing} {place}. After {b} weeks {who} hands {other} {c} of them. "
        "How many are still with {who}?", lambda a, b, c: b * c - c),
    (2, "A shelf {place} has {b} rows of {c} {thing}. {other} removes one whole row and brings {a} extra. "
        "What is the new total?", lambda a, b, c: (b - 1) * c + a),
    (3, "{who} buys {b} bags of {thing} with {c} in each {place}. {other} borrows {b} of them, and then {who} "
        "doubles what is left. How many {thing} does {who} end with?", lambda a, b, c: 2 * (b * c - b)),
    (3, "Three friends share chores {place}: {who} sorts {a} {thing}, {other} sorts {b} times as many, and a "
        "neighbour sorts {c} fewer than {other}. How many were sorted in all?", lambda a, b, c: a + a * b + (a * b - c)),
    (3, "{who} earns {c} {thing} per hour {place}, works {b} hours on Monday and twice as long on Tuesday, "
        "then spends {a}. How many {thing} are left?", lambda a, b, c: c * b * 3 - a if c * b * 3 > a else c * b * 3),
]


def arith_line(i: int, rng: random.Random) -> dict:
    """One task line: a word problem of 1-3 steps; its step count is the declared difficulty."""
    who, other = rng.sample(NAMES, 2)
    steps = 1 + i % 3
    _, text, answer = rng.choice([f for f in FRAMES if f[0] == steps])
    a, b, c = rng.randint(12, 40), rng.randint(2, 9), rng.randint(2, 6)
    if "spends" in text and c * b * 3 <= a:
        a = c * b
    q = text.format(who=who, other=other, thing=rng.choice(THINGS), place=rng.choice(PLACES), a=a, b=b, c=c)
    return {"id": f"arith-{i:04d}", "question": q, "answer": str(answer(a, b, c)),
            "meta": {"difficulty": ("easy", "medium", "hard")[steps - 1], "steps": steps}}


def write_task_file(path: Path, n: int, seed: int = 3, extra: list[dict] | None = None) -> Path:
    rng = random.Random(seed)
    lines = [arith_line(i, rng) for i in range(n)] + list(extra or [])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def custom_gates_yaml(mix: dict[str, float], overrides: dict | None = None) -> str:
    """The laptop gates config with the pool and run-config mixes replaced by `mix` (a merge would keep
    the built-in tasks' shares) and `overrides` merged in."""
    import yaml

    from tests.helpers.configs import gates_yaml

    data = yaml.safe_load(gates_yaml(overrides))
    data["pool"]["mix"] = dict(mix)
    data["run_config"]["mix"] = dict(mix)
    return yaml.safe_dump(data, sort_keys=False)


ARITH_CONFIG = """\
# Run: rc1 advance --to round2 --config configs/arith.yaml  (a custom task: data/arith.jsonl, numeric verifier)
profile: laptop
gates: configs/gates_arith.yaml
target_kl: 0.03
steps: {steps}
finetune: {{method: full}}
datasets:
  mix: {{arith: 1.0}}
  tasks:
    arith: {{path: data/arith.jsonl, verifier: {verifier}, heldout: 0.25}}
seed_pool: data/rollouts/arith.balanced.jsonl
run: {{name: arith, seed: 5, max_steps: {steps}, save_steps: {steps}, device_pref: [cpu], threads: 1}}
data: {{train_path: data/rollouts/arith.balanced.jsonl, eval_path: data/arith_eval.jsonl,
        shadow_path: data/arith_shadow.jsonl, max_length: 384}}
model: {{base: "random:qwen3-tiny", max_new_tokens: 8, gradient_checkpointing: false, lora: {{enable: false}}}}
engine: {{name: pure_pt, lr: 1.0e-4}}
strategy: {{name: grpo, num_generations: 2, prompts_per_step: 2, max_turns: 2}}
callbacks: [logging, checkpoint]
pool: {{out: data/rollouts/arith.jsonl, v1_pool: null, n: {n}, shadow_n: {shadow_n}}}
eval: {{n_shadow: {shadow_n}}}
"""
