"""The difficulty ladder (rc1.data.ladder): every level of every built-in task generates items that carry
their level, verify against their own gold answer, and get harder in the way the level says."""

from __future__ import annotations

import random
import re

import pytest

from rc1.config.names import BUCKETS, LADDER_LEVELS
from rc1.data import ladder as L
from rc1.data.pool import BuildParams, make_level_item
from rc1.data.templates import load_pack
from rc1.envs.verifiers import verify
from tests.helpers.configs import REPO


@pytest.fixture(scope="module")
def pack():
    return load_pack(REPO / "templates/pack_v2")


def items(pack, task, n, k=40):
    p = BuildParams()
    return [make_level_item(task, n, random.Random(f"t:{task}:{n}:{i}"), p, pack[task], f"x{i}", 1.0) for i in range(k)]


def test_schema_table_matches_ladder():
    assert {t: len(lv) for t, lv in L.LADDER.items()} == LADDER_LEVELS
    for task, levels in L.LADDER.items():
        assert [lv.n for lv in levels] == list(range(len(levels)))
        assert all(lv.bucket in BUCKETS for lv in levels)


@pytest.mark.parametrize("task", sorted(L.LADDER))
def test_every_level_makes_verifiable_items(pack, task):
    for lv in L.levels(task):
        for it in items(pack, task, lv.n, 8):
            assert it["meta"]["level_n"] == lv.n and it["meta"]["level"] == lv.bucket
            assert verify(task, str(it["answer"]), it["answer"]).success, it["id"]
            if L.is_plain(task, lv.n):
                assert it["single_turn"] and len(it["messages"]) == 1
                assert it["messages"][0]["content"].endswith(L.REPLY[task])
            else:
                assert not it.get("single_turn") and it["messages"][0]["role"] == "system"


def test_gsm8k_levels_count_operations_and_keep_numbers_small(pack):
    for n, ops in ((0, 1), (1, 1), (2, 1), (3, 2), (4, 3)):
        for it in items(pack, "gsm8k", n, 30):
            sol = it["meta"]["solution"]
            assert len(sol) == ops == it["meta"]["steps"]
            value = None
            for line in sol:  # the solution lines chain to the gold answer
                a, op, b, _, c = line.split()
                assert value is None or int(a) == value
                assert int(c) == (int(a) + int(b) if op == "+" else int(a) - int(b)) and int(c) >= 0
                value = int(c)
            assert str(value) == it["answer"]
            if n != 2:
                assert max(int(line.split()[2]) for line in sol) < 20 and int(sol[0].split()[0]) < 20


def test_hotpotqa_bottom_is_one_paragraph_and_answer_is_stated(pack):
    for it in items(pack, "hotpotqa", 0, 30):
        assert len(it["corpus"]) == 1 and it["answer"] in it["corpus"][0]["text"]
    for it in items(pack, "hotpotqa", 1, 30):
        assert 3 <= len(it["corpus"]) <= 4 and any(it["answer"] in d["text"] for d in it["corpus"])
    assert all(it["meta"]["hops"] == 2 for it in items(pack, "hotpotqa", 2, 10))


def test_strategyqa_bottom_states_the_deciding_fact_and_answers_are_balanced(pack):
    for n in (0, 1):
        its = items(pack, "strategyqa", n, 120)
        yes = sum(it["answer"] == "yes" for it in its) / len(its)
        assert 0.35 < yes < 0.65
        for it in its:
            assert it["supporting"][0] in it["messages"][0]["content"]
    assert all(len(it["corpus"]) == 1 for it in items(pack, "strategyqa", 0, 20))
    assert all(len(it["corpus"]) == 4 for it in items(pack, "strategyqa", 1, 20))
    for it in items(pack, "strategyqa", 2, 20):  # two numeric facts, neither states the comparison
        assert len(it["corpus"]) == 2 and all(re.search(r"\d", d["text"]) for d in it["corpus"])


def test_hint_shows_a_prefix_of_the_solution_never_the_last_line(pack):
    it = items(pack, "gsm8k", 4, 1)[0]
    sol = it["meta"]["solution"]
    hinted = L.with_hint(it, 0.5)
    text = hinted["messages"][-1]["content"]
    assert "Hint: " + sol[0] in text and sol[-1] not in text.split("Hint:")[1]
    assert L.with_hint(it, 1.0)["meta"]["hint_lines"] == len(sol) - 1
    assert L.with_hint(it, 0.0) is it
    assert L.with_hint(items(pack, "gsm8k", 1, 1)[0], 1.0)["meta"].get("hint_lines") is None  # 1 op: nothing to show


def test_pool_builder_takes_a_level_range_per_task(tmp_path):
    from rc1.data.pipeline import build_pool_file
    from rc1.data.io import read_jsonl
    from rc1.runtime.workspace import Workspace

    ws = Workspace(tmp_path)
    p = BuildParams(n=60, mix={"gsm8k": 0.5, "strategyqa": 0.5}, templates_dir=REPO / "templates/pack_v2",
                    levels={"gsm8k": (0, 2)})
    build_pool_file(ws, p, "data/pool.jsonl")
    its = read_jsonl(ws.path("data/pool.jsonl"))
    g = [it for it in its if it["task"] == "gsm8k"]
    assert {it["meta"]["level_n"] for it in g} == {0, 1, 2} and all(it["single_turn"] for it in g)
    assert all("level_n" not in it["meta"] for it in its if it["task"] == "strategyqa")  # today's generator
    meta = [__import__("json").loads(x) for x in ws.path("reports/rc1/artifacts.jsonl").read_text().splitlines()]
    assert meta[-1]["levels"] == {"gsm8k": [0, 2]}


def test_a_bad_pool_level_range_is_a_config_error():
    from pydantic import ValidationError

    from rc1.config.schema import PoolSection

    for bad, why in (({"gsm8k": (0, 8)}, "unknown level 8"), ({"hotpotqa": (2, 1)}, "is empty"),
                     ({"arith": (0, 1)}, "not a built-in task")):
        with pytest.raises(ValidationError, match=why):
            PoolSection(levels=bad)
