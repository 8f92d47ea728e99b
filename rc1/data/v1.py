"""The v1 pool: the previous, deliberately simpler generator and template set (pack v1).

It exists as the reference distribution of the "3-gram KL vs the previous (v1) pool" check:
one sentence frame per task, a 20-name vocabulary, one template per task with a single role and
style, no paraphrase, no distractor variety. Build it with
`rc1 data build-pool --version v1 --out data/rollouts/rc1_v1.jsonl`.
"""

from __future__ import annotations

import random

from rc1.config.names import TASKS
from rc1.data.pool import BuildParams, allocate

NAMES = ["Anna", "Ben", "Carl", "Dora", "Eva", "Finn", "Gina", "Hugo", "Iris", "Jack",
         "Kate", "Liam", "Mia", "Nora", "Omar", "Paul", "Rosa", "Sam", "Tina", "Uri"]
TOWNS = ["Northtown", "Southville", "Eastport", "Westfield", "Lakeside", "Hillcrest"]
ORGS = ["City Library", "Town Museum", "Old Mill", "River Bank", "Art School", "Main Theatre"]
SYSTEM = "You are a helpful assistant. Tools: {tools}. Answer in at most {max_turns} turns."
USER = {"gsm8k": "Solve: {q}", "hotpotqa": "Context:\n{c}\nQuestion: {q}", "strategyqa": "Answer yes or no: {q}"}


def _item(task: str, rng: random.Random, p: BuildParams, item_id: str) -> dict:
    name, town, org = rng.choice(NAMES), rng.choice(TOWNS), rng.choice(ORGS)
    context, corpus, supporting = "", [], []
    if task == "gsm8k":
        a, b = rng.randint(2, 50), rng.randint(1, 30)
        q = f"{name} has {a} apples. {name} buys {b} more apples. How many apples does {name} have?"
        ans = str(a + b)
        supporting = [f"{a} + {b} = {a + b}."]
        meta = {"answer_text": f"{name} has {a} + {b} = {a + b} apples.\n#### {a + b}"}
    elif task == "hotpotqa":
        q = f"Where was the founder of the {org} born?"
        ans = town
        docs = [{"title": org, "text": f"The {org} was founded by {name}."},
                {"title": name, "text": f"{name} was born in {town}."}]
        supporting = [d["text"] for d in docs]
        corpus = docs
        context = "\n".join(f"{d['title']}: {d['text']}" for d in docs)
        meta = {"supporting_facts": [[org, 0], [name, 0]]}
    else:
        y1, y2 = rng.randint(1800, 1990), rng.randint(1800, 1990)
        o2 = rng.choice([o for o in ORGS if o != org])
        q = f"Is the {org} older than the {o2}?"
        ans = "yes" if y1 < y2 else "no"
        supporting = [f"The {org} was built in {y1}.", f"The {o2} was built in {y2}."]
        corpus = [{"title": org, "text": supporting[0]}, {"title": o2, "text": supporting[1]}]
        meta = {"facts": supporting}
    system = SYSTEM.format(tools=", ".join(p.tools) or "none", max_turns=p.max_turns)
    user = USER[task].replace("{c}", context).replace("{q}", q)
    return {"id": item_id, "task": task, "template": f"{task}/v1", "role": "assistant", "style": "plain",
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "question": q, "answer": ans, "aliases": [], "supporting": supporting, "corpus": corpus,
            "needs_clarification": False, "hidden_detail": None, "tools": list(p.tools), "max_turns": p.max_turns,
            "meta": {**meta, "pack": "v1", "plan": {"lookups": [], "calc": 0, "clarify": False, "turns": 1,
                                                    "tool_hops": 0}}}


def build_v1_pool(params: BuildParams) -> list[dict]:
    params.validate()
    counts = allocate(params.n, params.mix)
    order = [t for t in TASKS for _ in range(counts.get(t, 0))]
    random.Random(f"v1:{params.seed}:order").shuffle(order)
    return [_item(task, random.Random(f"v1:{params.seed}:{i}"), params, f"v1-{params.seed}-{i:06d}")
            for i, task in enumerate(order)]
