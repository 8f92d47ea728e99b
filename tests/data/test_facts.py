"""Fact-disjoint held-out sets (rc1.data.facts, rc1.training.fit's split builder, and the round-2 data check
that counts held-out / dev items sharing a fact with training)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from rc1.data.facts import fact_key, fact_leaks
from tests.helpers.configs import REPO

PACK = REPO / "templates/pack_v2"


def gsm8k(item_id: str, question: str, lines: list[str]) -> dict:
    return {"id": item_id, "task": "gsm8k", "question": question, "answer": lines[-1].rsplit(" ", 1)[-1],
            "supporting": lines, "messages": [{"role": "user", "content": question}], "meta": {"level_n": 0}}


def test_an_arithmetic_fact_is_its_operands_and_operation_up_to_commutation():
    bare = gsm8k("a", "What is 15 + 12?", ["15 + 12 = 27"])
    story = gsm8k("b", "Ann has 12 pens. Then Ann buys 15 more. How many pens does Ann have now?", ["12 + 15 = 27"])
    assert fact_key("gsm8k", bare) == fact_key("gsm8k", story) == "gsm8k: 12 + 15"
    assert fact_key("gsm8k", gsm8k("c", "What is 15 - 12?", ["15 - 12 = 3"])) != fact_key("gsm8k", bare)
    assert fact_key("gsm8k", gsm8k("d", "What is 15 + 13?", ["15 + 13 = 28"])) != fact_key("gsm8k", bare)
    chain = gsm8k("e", "...", ["12 + 15 = 27", "27 - 4 = 23"])
    assert fact_key("gsm8k", chain) == "gsm8k: 12 + 15; 27 - 4"


def test_an_extraction_or_yes_no_fact_is_the_sentence_that_decides_it_and_a_custom_one_its_question():
    page = "The Fiavyr Press was founded by Gulnara Tholea in 1875."
    who = {"id": "w", "task": "hotpotqa", "question": "Who founded the Fiavyr Press?", "supporting": [page]}
    when = {"id": "y", "task": "hotpotqa", "question": "When was the Fiavyr Press founded?", "supporting": [page]}
    assert fact_key("hotpotqa", who) == fact_key("hotpotqa", when)
    fact = "The Drucel Theatre was founded before the Praequair Theatre."
    yes = {"id": "1", "task": "strategyqa", "question": "Was the Drucel Theatre founded before the Praequair Theatre?",
           "supporting": [fact]}
    no = {"id": "2", "task": "strategyqa", "question": "Was the Praequair Theatre founded before the Drucel Theatre?",
          "supporting": [fact]}
    assert fact_key("strategyqa", yes) == fact_key("strategyqa", no)
    # a custom task's item (it names its verifier): the question, lower-cased, without punctuation or extra spaces
    a = {"id": "q1", "task": "arith", "verifier": "numeric", "question": "What is  the Capital of France?", "answer": "x"}
    b = {"id": "q2", "task": "arith", "verifier": "numeric", "question": "what is the capital of france", "answer": "x"}
    c = {"id": "q3", "task": "arith", "verifier": "numeric", "question": "what is the capital of spain", "answer": "x"}
    assert fact_key("arith", a) == fact_key("arith", b) != fact_key("arith", c)
    assert [x["id"] for x in fact_leaks([a], [b, c])] == ["q2"]


class Maker:
    """The fit's item maker (rc1.training.fit._Items.make) over the shipped templates, without a workspace."""

    def __init__(self):
        from rc1.data.pool import BuildParams
        from rc1.data.templates import load_pack

        self.params = BuildParams(n=1, templates_dir=PACK, seed=20251125, clarify_rate=0.0)
        self.pack = load_pack(PACK, tasks=("gsm8k", "strategyqa"))

    def make(self, space, task, n, count, start=0):
        from rc1.data.pool import make_level_item

        return [make_level_item(task, n, random.Random(f"{space}:20251125:{task}:{n}:{i}"), self.params,
                                self.pack[task], f"{space}-{task}-L{n}-{i:05d}", 1.0) for i in range(start, start + count)]


def test_the_fit_splits_gsm8k_level_0_into_fact_disjoint_sets_of_the_local_sizes():
    """Bare one-step sums below 20 have 380 facts (190 unordered sums, 190 differences); the local config asks
    96 held-out, 16 dev and 400 training items a level: the held-out and dev facts are each distinct and no
    training item has one. Asking more distinct facts than the level has is a one-line error, not a leak."""
    from rc1.runtime.errors import ConfigError
    from rc1.training.fit import draw_split

    maker, taken = Maker(), set()
    held, _ = draw_split(maker, "fitheld", "gsm8k", 0, 96, taken, distinct=True)
    dev, _ = draw_split(maker, "fitdev", "gsm8k", 0, 16, taken, distinct=True)
    train, skipped = [], 0
    for n in (0, 1):  # the chosen level and the next one (its one-step stories use the same facts)
        got, sk = draw_split(maker, "fittrain", "gsm8k", n, 400, taken, distinct=False)
        train, skipped = train + got, skipped + sk
    assert len(held) == 96 and len(dev) == 16 and len(train) == 800 and skipped > 0
    assert len({fact_key("gsm8k", it) for it in held + dev}) == 112
    assert fact_leaks(train, held + dev) == []
    with pytest.raises(ConfigError) as exc:
        draw_split(maker, "fitheld", "gsm8k", 0, 400, set(), distinct=True)
    assert "\n" not in str(exc.value) and "gsm8k level 0" in str(exc.value) and "too few distinct facts" in str(exc.value)


def write_split(root: Path, train: list[dict], dev: list[dict], held: list[dict]) -> None:
    from rc1.data.io import write_jsonl

    for name, rows in (("train", train), ("dev", dev), ("heldout", held)):
        write_jsonl(root / f"data/fit/{name}.jsonl", rows)


def test_the_fact_leak_check_refuses_a_held_out_item_whose_fact_training_teaches(tmp_path):
    from rc1.gates.difficulty_fit import fact_leak_check
    from rc1.runtime.workspace import Workspace

    ws = Workspace(tmp_path)
    train = [gsm8k("t1", "Ann has 12 pens. Then Ann buys 15 more. How many pens does Ann have now?", ["12 + 15 = 27"]),
             gsm8k("t2", "What is 9 - 4?", ["9 - 4 = 5"])]
    held = [gsm8k("h1", "What is 15 + 12?", ["15 + 12 = 27"]), gsm8k("h2", "What is 9 + 4?", ["9 + 4 = 13"])]
    dev = [gsm8k("d1", "Compute 18 - 3.", ["18 - 3 = 15"])]
    write_split(tmp_path, train, dev, held)
    check = fact_leak_check(ws, "rc1 data fit --config P")
    assert not check.passed and check.measured == 1 and "h1 (gsm8k: 12 + 15)" in check.detail

    write_split(tmp_path, train, dev, held[1:])
    check = fact_leak_check(ws, "rc1 data fit --config P")
    assert check.passed and check.measured == 0


def test_a_custom_tasks_training_and_dev_items_never_repeat_a_held_out_question(tmp_path):
    """A task file that asks one question twice (another case, spacing, punctuation) with the copy in the held-out
    split: the fit's training file drops the copy, and the data check finds no leak."""
    from types import SimpleNamespace

    from rc1.config.schema import DifficultyFitSection
    from rc1.data.generic import TaskData
    from rc1.data.io import read_jsonl
    from rc1.gates.difficulty_fit import fact_leak_check
    from rc1.runtime.workspace import Workspace
    from rc1.training.fit import _write_items

    def item(i, q):
        return {"id": f"q{i}", "task": "arith", "verifier": "numeric", "question": q, "answer": str(i),
                "messages": [{"role": "user", "content": q}], "meta": {}}

    train = [item(i, f"What is {i} plus {i + 1}?") for i in range(30)] + [item(99, "what is 7 TIMES 8")]
    held = [item(100, "What is 7 times 8?"), item(101, "What is 50 times 2?")]
    data = TaskData("arith", "numeric", train, held)
    table = {"arith": {"levels": [{"level": 0, "majority_rate": 0.1, "item_pass_rates": {}}]}}
    cfg = SimpleNamespace(difficulty_fit=DifficultyFitSection(heldout_per_task=8, dev_per_task=4))
    ws = Workspace(tmp_path)
    files, _ = _write_items(ws, cfg, None, {"arith": data}, table, ["arith"], "ident")
    out = read_jsonl(tmp_path / "data/fit/train.jsonl") + read_jsonl(tmp_path / "data/fit/dev.jsonl")
    assert "q99" not in {it["id"] for it in out} and files["dropped_as_duplicates"] == 1 and len(out) == 30
    assert fact_leak_check(ws, "rc1 data fit").measured == 0
