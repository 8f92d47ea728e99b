"""Pool items for tests: arithmetic GSM8K-style items (training) and a HotpotQA item with a wiki corpus (envs)."""

from __future__ import annotations


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


def make_item(**over) -> dict:
    item = {
        "id": "t-1", "task": "hotpotqa", "template": "hotpotqa/t01", "role": "student", "style": "plain",
        "messages": [{"role": "system", "content": "You are careful."},
                     {"role": "user", "content": "Which river flows through the capital of France?"}],
        "question": "Which river flows through the capital of France?", "answer": "Seine", "aliases": [],
        "supporting": ["Paris is the capital of France.", "The Seine flows through Paris."],
        "corpus": [{"title": "Paris", "text": "Paris is the capital and largest city of France.\n\n"
                                              "The Seine flows through Paris, dividing it into banks."},
                   {"title": "Berlin", "text": "Berlin is the capital of Germany. The Spree flows through it."}],
        "needs_clarification": False, "hidden_detail": None, "tools": ["wiki", "calc"], "max_turns": 4, "meta": {},
    }
    item.update(over)
    return item


def mixed_task_items(n: int, seed: int = 0) -> list[dict]:
    """Pool-format items over the three tasks and buckets (test data, built here)."""
    import random

    rng = random.Random(seed)
    items = []
    for i in range(n):
        task = ("gsm8k", "hotpotqa", "strategyqa")[i % 3]
        bucket = ("easy", "medium", "hard")[(i // 3) % 3]
        if task == "gsm8k":
            a, b = rng.randint(2, 50), rng.randint(2, 9)
            q, ans, sup = f"A box has {a} rows of {b} pens. How many pens?", str(a * b), []
        elif task == "hotpotqa":
            city = rng.choice(["Paris", "Lyon", "Turin", "Porto", "Ghent"])
            q, ans, sup = f"Where was the founder of company {i} born?", city, [f"The founder of company {i} was born in {city}."]
        else:
            ans = rng.choice(["yes", "no"])
            q, sup = f"Could item {i} fit in a shoebox?", [f"Item {i} is {'small' if ans == 'yes' else 'large'}."]
        items.append({"id": f"t{i:04d}", "task": task, "question": q, "answer": ans, "aliases": [], "supporting": sup,
                      "messages": [{"role": "user", "content": q}], "needs_clarification": i % 5 == 0,
                      "bucket": bucket, "tools": ["wiki", "calc"], "max_turns": 4})
    return items
