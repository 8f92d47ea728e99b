"""Write an example task file: one-operation add/subtract word problems, one JSON object per line.

    python examples/arith/make_arith.py --n 1000 --out data/arith.jsonl

Each line is {"id", "question", "answer"}: what a user of rc1 brings (see docs/own-task.md). The script
uses the standard library only and none of rc1's own generators: it stands for a dataset written
elsewhere. The same --seed writes the same file.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

PEOPLE = ["Amira", "Ben", "Carla", "Dev", "Elif", "Femi", "Greta", "Hugo", "Ines", "Jonas", "Kira", "Luis",
          "Maya", "Nils", "Olga", "Pablo", "Rhea", "Soren", "Tariq", "Uma", "Viktor", "Wanda", "Xiu", "Zeno"]
OBJECTS = ["oranges", "crayons", "paper cranes", "toy cars", "acorns", "envelopes", "cupcakes", "stones",
           "comic books", "balloons", "spoons", "tulips", "puzzles", "socks", "jars", "bricks"]
ADD = [
    "{p} has {a} {o}. A friend gives {p} {b} more. How many {o} does {p} have now?",
    "A basket holds {a} {o}. {p} puts in another {b}. How many {o} are in the basket?",
    "{p} counted {a} {o} on Monday and {b} on Tuesday. How many {o} did {p} count in total?",
    "There are {a} {o} on one shelf and {b} on another. How many {o} are there altogether?",
]
SUBTRACT = [
    "{p} has {a} {o} and gives away {b}. How many {o} does {p} have left?",
    "A box held {a} {o}. {p} took out {b}. How many {o} are still in the box?",
    "{p} baked {a} {o} and sold {b} of them. How many {o} were not sold?",
    "A shop had {a} {o} this morning and sold {b} by noon. How many {o} remain?",
]


def problem(rng: random.Random) -> tuple[str, int]:
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    if rng.random() < 0.5:
        return rng.choice(ADD).format(p=rng.choice(PEOPLE), o=rng.choice(OBJECTS), a=a, b=b), a + b
    a, b = max(a, b), min(a, b)
    return rng.choice(SUBTRACT).format(p=rng.choice(PEOPLE), o=rng.choice(OBJECTS), a=a, b=b), a - b


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1000, help="problems to write (distinct questions)")
    ap.add_argument("--out", default="data/arith.jsonl", help="task file to write")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args(argv)
    rng, seen, lines = random.Random(args.seed), set(), []
    while len(lines) < args.n:
        question, answer = problem(rng)
        if question not in seen:
            seen.add(question)
            lines.append({"id": f"arith-{len(lines):05d}", "question": question, "answer": str(answer)})
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")  # written whole, then renamed: never a half-written task file
    tmp.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    tmp.replace(out)
    print(f"wrote {out} ({len(lines)} problems)")


if __name__ == "__main__":
    main()
