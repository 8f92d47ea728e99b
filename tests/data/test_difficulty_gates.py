"""Difficulty metrics, buckets, balancing and report; the pool and difficulty gate modules."""

from __future__ import annotations

import json

import pytest

from tests.data.conftest import run_cli


@pytest.fixture(scope="module")
def diff_ws(small_ws):
    for args in (["metrics"], ["bucketize"], ["validate"]):
        res = run_cli(small_ws, "data", "difficulty", *args)
        assert res.exit_code == 0, res.output
    assert run_cli(small_ws, "data", "validate-pool", "data/rollouts/rc1_seed.jsonl").exit_code == 0
    return small_ws


def test_metrics_follow_the_table():
    from rc1.data.difficulty import bucket_of, item_metrics, votes

    easy = {"question": "Ann has 3 pears. She buys 2 more pears. How many pears?", "supporting":
            ["Ann has 3 pears. She buys 2 more pears, so 3 + 2 = 5."], "needs_clarification": False,
            "meta": {"plan": {"turns": 1, "tool_hops": 0}}}
    m = item_metrics(easy, 90)
    assert m["ops_numeric"] == 1 and m["turns"] == 1 and m["clue_overlap"] > 0.4
    assert bucket_of(m)[0] == "easy"
    hard = {"question": "If the founder of it had moved, and because they then wrote about it, which country, "
                        "given that they and their heirs left, is it?", "supporting": ["Ole Bo was born in Ry.",
                        "Ry is a town in Vask.", "Una Li founded the Dom Hall.", "Dom Hall lies in Kel."],
            "needs_clarification": True, "meta": {"plan": {"turns": 6, "tool_hops": 4}}}
    m = item_metrics(hard, 700)
    v = votes(m)
    assert v["turns"] == v["tool_hops"] == v["needs_clarification"] == v["len_tokens"] == 2
    assert m["connector_density"] > 6 and m["coref_pronouns"] >= 3 and "under-specified" in m["ambiguity_flags"]
    assert bucket_of(m)[0] == "hard"


def test_balanced_pool_meets_the_target_per_task(diff_ws):
    from collections import Counter

    from rc1.data.io import read_jsonl

    bal = read_jsonl(diff_ws.path("data/rollouts/rc1_seed.balanced.jsonl"))
    assert len(bal) > 500
    for task in ("hotpotqa", "strategyqa", "gsm8k"):
        c = Counter(it["bucket"] for it in bal if it["task"] == task)
        n = sum(c.values())
        assert c["hard"] / n >= 0.30 and c["easy"] / n <= 0.30 and abs(c["medium"] / n - 0.45) < 0.02
    rep = json.loads(diff_ws.path("reports/rc1/difficulty_report.json").read_text())
    assert rep["passed"]
    names = {c["name"] for c in rep["checks"]}
    assert {"max len_tokens", "max turns", "max tool_hops", "clue_overlap median (hard)", "clue_overlap median (easy)",
            "clue_overlap max (easy)", "clue_overlap min (hard)"} <= names
    q = rep["distributions"]["balanced"]["clue_overlap"]["quantiles"]
    assert q["p10"] <= q["p50"] <= q["p90"]
    assert sum(rep["distributions"]["all"]["turns"]["histogram"]["counts"]) == rep["n_items"]


def test_balance_with_a_mix_keeps_the_task_shares(diff_ws, tmp_path):
    from collections import Counter

    from rc1.data.io import read_jsonl

    out = "data/rollouts/mixed.balanced.jsonl"
    res = run_cli(diff_ws, "data", "difficulty", "bucketize", "--out", out,
                  "--mix", "hotpotqa:0.45,strategyqa:0.30,gsm8k:0.25")
    assert res.exit_code == 0, res.output
    bal = read_jsonl(diff_ws.path(out))
    shares = {t: c / len(bal) for t, c in Counter(it["task"] for it in bal).items()}
    assert shares == pytest.approx({"hotpotqa": 0.45, "strategyqa": 0.30, "gsm8k": 0.25}, abs=0.005)
    for task in shares:  # the bucket target still holds inside every task
        c = Counter(it["bucket"] for it in bal if it["task"] == task)
        assert c["hard"] / sum(c.values()) >= 0.30 and c["easy"] / sum(c.values()) <= 0.30
    unmixed = read_jsonl(diff_ws.path("data/rollouts/rc1_seed.balanced.jsonl"))
    assert len(bal) <= len(unmixed)
    bad = run_cli(diff_ws, "data", "difficulty", "bucketize", "--out", out, "--mix", "hotpotqa:0.5,trivia:0.5")
    assert bad.exit_code == 2


def test_a_violated_bound_fails_and_names_the_item(diff_ws, tmp_path):
    from rc1.config.schema import DifficultyGate
    from rc1.data.difficulty import difficulty_checks
    from rc1.data.io import read_jsonl

    bal = read_jsonl(diff_ws.path("data/rollouts/rc1_seed.balanced.jsonl"))
    bad = dict(bal[0], id="too-many-turns", difficulty=dict(bal[0]["difficulty"], turns=9))
    checks, offenders = difficulty_checks(bal + [bad], DifficultyGate())
    turns = next(c for c in checks if c["name"] == "max turns")
    assert not turns["passed"] and turns["measured"] == 9 and "too-many-turns" in turns["detail"]
    easy_only = [it for it in bal if it["bucket"] == "easy"]
    shares = {c["name"]: c for c in difficulty_checks(easy_only, DifficultyGate())[0]}
    assert not shares["gsm8k: easy share"]["passed"] and not shares["gsm8k: hard share"]["passed"]


def test_gates_pass_on_a_good_workspace_with_evidence(diff_ws):
    from rc1.config.schema import GatesConfig
    from rc1.gates.base import GateContext
    from rc1.gates.registry import run_area

    ctx = GateContext(diff_ws, GatesConfig(), "round1")
    for area in ("pool", "difficulty"):
        res = run_area(area, ctx)
        assert res.passed, [c.to_dict() for c in res.failing]
        paths = {e.path for e in res.evidence}
        assert "data/rollouts/rc1_seed.jsonl" in paths and all(len(e.sha256) == 64 for e in res.evidence)
    assert "data/shadow_eval_245.jsonl" in {e.path for e in run_area("pool", ctx).evidence}
    assert "data/rollouts/rc1_seed.balanced.jsonl" in {e.path for e in run_area("difficulty", ctx).evidence}


def test_gates_fail_when_files_are_missing(tmp_path):
    from rc1.config.schema import GatesConfig
    from rc1.gates.base import GateContext
    from rc1.gates.registry import run_area
    from rc1.runtime.workspace import Workspace

    ctx = GateContext(Workspace(tmp_path), GatesConfig(), "round1")
    pool, diff = run_area("pool", ctx), run_area("difficulty", ctx)
    assert not pool.passed and not diff.passed
    details = " ".join(c.detail for c in pool.checks + diff.checks)
    for cmd in ("rc1 data build-pool", "rc1 data shadow-set", "--version v1", "rc1 data difficulty metrics",
                "rc1 data difficulty bucketize"):
        assert cmd in details


def test_gates_are_not_fooled_by_a_stale_report(diff_ws):
    """Change the pool after the reports: the pool gate recomputes, the difficulty gate refuses the old metrics."""
    import shutil

    from rc1.config.schema import GatesConfig
    from rc1.data.io import read_jsonl, write_jsonl
    from rc1.gates.base import GateContext
    from rc1.gates.registry import run_area

    ws = diff_ws
    pool = ws.path("data/rollouts/rc1_seed.jsonl")
    backup = ws.path("pool.backup")
    shutil.copy(pool, backup)
    try:
        items = read_jsonl(pool)
        write_jsonl(pool, items + items[:100])  # 100 exact duplicates, report still says "passed"
        ctx = GateContext(ws, GatesConfig(), "round1")
        res = run_area("pool", ctx)
        dup = next(c for c in res.checks if c.name.startswith("duplicates"))
        assert not dup.passed and any("recomputed" in n for n in res.notes)
        diff = run_area("difficulty", ctx)
        assert not diff.passed and "made from another version" in diff.failing[0].detail
    finally:
        shutil.copy(backup, pool)
