"""The fact an item tests, so that held-out and dev items can be kept from sharing one with training.

Two items share a fact when a model that learned one has been taught the answer of the other, whatever
their wording:

- a generated arithmetic item (gsm8k): its operands and operations, step by step, with the operands of a
  commutative step (+, x) sorted: "What is 15 + 12?" and "Ann has 12 pens. She buys 15 more." are one fact;
- a generated extraction (hotpotqa) or yes/no (strategyqa) item: the supporting sentences that decide it
  (entity, relation and answer), normalised and sorted: "Who founded X?" and "When was X founded?" over
  "X was founded by Y in 1890." are one fact, and so are a yes/no question and its reverse;
- a custom task's item (rc1.data.generic) or any item whose fact cannot be read: its question, normalised
  (lower case, punctuation dropped, whitespace collapsed), so the same question with the same answer is
  caught too.

`fact_leaks` counts the held-out / dev items whose fact a training item has (the data check of the
difficulty fit's round-2 gate; rc1.training.fit assigns facts to splits so that it is 0).
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation

from rc1.data.text import words

# one arithmetic step as the generators write it: "12 + 15 = 27", "3 x 4 = 12", "<<3*4=12>>" (annotation dropped)
_STEP = re.compile(r"(-?\d[\d,]*(?:\.\d+)?)\s*([+\-*/x×÷])\s*(-?\d[\d,]*(?:\.\d+)?)\s*=")
_COMMUTATIVE = {"+", "*"}
_OP = {"x": "*", "×": "*", "÷": "/"}
GENERATED = ("gsm8k", "hotpotqa", "strategyqa")


def normalised(text: str) -> str:
    """Lower case, punctuation dropped, whitespace collapsed."""
    return " ".join(words(str(text)))


def _number(text: str) -> str:
    try:
        return format(Decimal(text.replace(",", "")).normalize(), "f")
    except InvalidOperation:
        return text


def arithmetic_steps(lines: list[str]) -> list[str]:
    """The steps of a worked solution, each "a op b" with a commutative step's operands sorted."""
    steps = []
    for line in lines:
        for a, op, b in _STEP.findall(str(line)):
            op = _OP.get(op, op)
            a, b = _number(a), _number(b)
            if op in _COMMUTATIVE:
                a, b = sorted((a, b), key=lambda v: (Decimal(v), v))
            steps.append(f"{a} {op} {b}")
    return steps


def is_generated(task: str, item: dict) -> bool:
    """An item of rc1's own generators (not a custom task's item, which names its verifier)."""
    return task in GENERATED and "verifier" not in item


def fact_key(task: str, item: dict) -> str:
    """The fact `item` of `task` tests (see the module docstring): equal keys, shared fact."""
    if is_generated(task, item):
        supporting = [str(s) for s in item.get("supporting") or []]
        if task == "gsm8k":
            steps = arithmetic_steps(supporting)
            if steps:
                return f"{task}: " + "; ".join(steps)
        elif supporting:
            return f"{task}: " + " | ".join(sorted(normalised(s) for s in supporting))
    return f"{task}: question: {normalised(item.get('question', ''))}"


def fact_leaks(train: list[dict], others: list[dict]) -> list[dict]:
    """The items of `others` (held-out, dev) whose fact a training item has: [{id, fact}] in order."""
    taught = {fact_key(str(it.get("task")), it) for it in train}
    out = []
    for it in others:
        key = fact_key(str(it.get("task")), it)
        if key in taught:
            out.append({"id": it.get("id"), "fact": key})
    return out
