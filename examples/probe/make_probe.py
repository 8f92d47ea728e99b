"""Write a probe file for `rc1 eval --items`: 160 items in four kinds, 40 each, from templates of its own.

    python examples/probe/make_probe.py --out data/probe.jsonl
    rc1 eval --config configs/local.yaml --items data/probe.jsonl

Kinds (the id says which: probe-<kind>-NNN):
  word1  one-step add/subtract word problems, numbers 2-19 (the skill make run trains, worded otherwise)
  bare   bare add/subtract, numbers 2-19, phrased "Add a and b" / "Take b away from a"
  word2  two-step word problems (add, then subtract)
  yesno  a stated colour, then a yes/no question about it (half yes, half no)

It uses the standard library only and none of rc1's generators, so it checks a trained checkpoint on items
rc1 never wrote: the gain on the fitted held-out set against what carries over to other wordings, and what
the training may have cost elsewhere. The same --seed writes the same file.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

NAMES = ["Sara", "Omar", "Lina", "Ben", "Mia", "Ravi", "Tom", "Yuki", "Ana", "Leo"]
THINGS = ["apples", "pencils", "marbles", "stickers", "books", "coins", "shells", "cards"]
COLORS = ["red", "blue", "green", "yellow", "black", "white"]
OBJECTS = ["car", "door", "kite", "cup", "hat", "bag"]
NUMBER = "Reply with only the final number."
YES_NO = "Answer yes or no."
PER_KIND = 40


def _word1(rng):
    n, t = rng.choice(NAMES), rng.choice(THINGS)
    a, b = rng.randint(2, 19), rng.randint(2, 19)
    if rng.random() < 0.5:
        return f"{n} has {a} {t}. A friend gives {n} {b} more {t}. How many {t} does {n} have now?", a + b
    a, b = max(a, b), min(a, b)
    if a == b:
        return None
    return f"{n} had {a} {t} and gave away {b} of them. How many {t} are left?", a - b


def _bare(rng):
    a, b = rng.randint(2, 19), rng.randint(2, 19)
    if rng.random() < 0.5:
        return f"Add {a} and {b}. What do you get?", a + b
    a, b = max(a, b), min(a, b)
    return f"Take {b} away from {a}. What is left?", a - b


def _word2(rng):
    n, t = rng.choice(NAMES), rng.choice(THINGS)
    a, b, c = rng.randint(5, 19), rng.randint(2, 9), rng.randint(2, 9)
    if b + c > a + b:
        return None
    return f"{n} starts with {a} {t}, buys {b} more, then loses {c}. How many {t} does {n} have at the end?", a + b - c


def _yesno(rng, yes: bool):
    n, o, c = rng.choice(NAMES), rng.choice(OBJECTS), rng.choice(COLORS)
    asked = c if yes else rng.choice([x for x in COLORS if x != c])
    return f"{n}'s {o} is {c}. Is {n}'s {o} {asked}?", "yes" if yes else "no"


def make(seed: int = 777) -> list[dict]:
    rng = random.Random(seed)
    out: list[dict] = []
    seen: set[str] = set()

    def fill(kind: str, task: str, suffix: str, draw) -> None:
        count = 0
        while count < PER_KIND:
            got = draw(count)
            if got is None or got[0] in seen:
                continue
            q, answer = got
            seen.add(q)
            out.append({"id": f"probe-{kind}-{count:03d}", "task": task,
                        "messages": [{"role": "user", "content": f"{q}\n{suffix}"}], "question": q,
                        "answer": str(answer), "aliases": [], "max_turns": 1, "single_turn": True,
                        "needs_clarification": False})
            count += 1

    fill("word1", "gsm8k", NUMBER, lambda i: _word1(rng))
    fill("bare", "gsm8k", NUMBER, lambda i: _bare(rng))
    fill("word2", "gsm8k", NUMBER, lambda i: _word2(rng))
    fill("yesno", "strategyqa", YES_NO, lambda i: _yesno(rng, i % 2 == 0))
    return out


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seed", type=int, default=777)
    args = ap.parse_args(argv)
    items = make(args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("".join(json.dumps(it) + "\n" for it in items))
    print(f"wrote {len(items)} items to {args.out}")


if __name__ == "__main__":
    main()
