"""Difficulty metrics, buckets, balancing and report; the pool and difficulty gate modules."""

from __future__ import annotations

import json

import pytest

from tests.helpers.cli import run_cli


@pytest.fixture(scope="module")
def diff_ws(small_ws):
    for args in (["metrics"], ["bucketize"], ["validate"]):
        res = run_cli(small_ws, "data", "difficulty", *args)
        assert res.exit_code == 0, res.output
    assert run_cli(small_ws, "data", "validate-pool", "data/rollouts/rc1_seed.jsonl").exit_code == 0
    assert run_cli(small_ws, "data", "make-min").exit_code == 0  # the dev split, data/eval_min.jsonl
    return small_ws


def harder_is_harder(it, g):
    """Base-model outcomes that track the buckets: easy answers mostly solved, hard ones rarely."""
    return g < {"easy": 2, "medium": 1, "hard": 0}[it["bucket"]] or (it["bucket"] == "hard" and hash(it["id"]) % 5 == 0 and g == 0)


def outcomes_by_bucket(rates, n=12, answers=4):
    """Items per task x bucket whose answers succeed at `rates[(task, bucket)]` (default 0)."""
    items, outcomes = [], {}
    for task in ("hotpotqa", "strategyqa", "gsm8k"):
        for b in ("easy", "medium", "hard"):
            k = round(rates.get((task, b), 0.0) * n * answers)
            for i in range(n):
                iid = f"{task}-{b}-{i}"
                items.append({"id": iid, "task": task, "bucket": b})
                outcomes[iid] = [j * n + i < k for j in range(answers)]
    return items, outcomes


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
    from rc1.config.gates import DifficultyGate
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


def test_outcome_gap_measures_whether_hard_is_harder():
    from rc1.data.difficulty import outcome_gap

    tracks = {(t, "easy"): 0.6 for t in ("hotpotqa", "gsm8k", "strategyqa")} | {(t, "hard"): 0.1 for t in ("hotpotqa", "gsm8k", "strategyqa")}
    g = outcome_gap(*outcomes_by_bucket(tracks))
    assert g["measurable"] and g["gap_pp"] == pytest.approx(50.0) and g["ci_pp"][0] > 30
    inverted = {(t, b): (0.1 if b == "easy" else 0.6) for t in ("hotpotqa", "gsm8k", "strategyqa") for b in ("easy", "hard")}
    g = outcome_gap(*outcomes_by_bucket(inverted))
    assert g["measurable"] and g["ci_pp"][1] < 0
    g = outcome_gap(*outcomes_by_bucket({("strategyqa", "hard"): 0.05}))  # 2 successes in all: cannot tell
    assert not g["measurable"] and "only 2 successes" in g["why"] and g["ci_pp"] == [None, None]


def test_outcome_gap_compares_within_tasks_not_across_them():
    """The embedded default's pattern: strategyqa (yes/no, half right by chance) is mostly hard, gsm8k is
    mostly easy and never solved. Pooled, hard looks easier; within each task easy is easier."""
    from rc1.data.difficulty import outcome_gap

    items, outcomes = [], {}
    layout = {("gsm8k", "easy"): (20, 0.10), ("gsm8k", "hard"): (4, 0.0),
              ("strategyqa", "easy"): (4, 0.75), ("strategyqa", "hard"): (20, 0.50)}
    for (task, b), (n, rate) in layout.items():
        for i in range(n):
            iid = f"{task}-{b}-{i}"
            items.append({"id": iid, "task": task, "bucket": b})
            outcomes[iid] = [j * n + i < round(rate * n * 4) for j in range(4)]
    pooled = {b: sum(sum(outcomes[it["id"]]) for it in items if it["bucket"] == b) /
              sum(len(outcomes[it["id"]]) for it in items if it["bucket"] == b) for b in ("easy", "hard")}
    assert pooled["hard"] > pooled["easy"]
    g = outcome_gap(items, outcomes)
    assert g["gap_pp"] > 0 and g["tasks_compared"] == ["strategyqa", "gsm8k"]


@pytest.mark.parametrize("solved,status", [
    (harder_is_harder, "pass"),
    (lambda it, g: g < {"easy": 0, "medium": 1, "hard": 2}[it["bucket"]], "fail"),  # hard items solved more
    (lambda it, g: False, "not measurable"),  # the base model solves nothing: both buckets at 0 %
])
def test_difficulty_gate_checks_buckets_against_dev_base_outcomes(diff_ws, solved, status):
    from rc1.config.gates import GatesConfig
    from rc1.config.schema import TrainConfig
    from rc1.gates.base import GateContext
    from rc1.gates.registry import run_area
    from tests.helpers.dev_answers import write_dev_answers

    cfg = TrainConfig()
    write_dev_answers(diff_ws, cfg, solved)
    res = run_area("difficulty", GateContext(diff_ws, GatesConfig(), "round1", config=cfg))
    check = next(c for c in res.checks if c.name.startswith("buckets vs base-model outcomes"))
    assert check.status == status, check.to_dict()
    assert check.threshold == "CI lower bound > 0 (95% CI)" and "successes/answers" in check.detail
    assert "data/responses_dev_base.jsonl" in {e.path for e in res.evidence}
    assert res.passed == (status == "pass")
    if status == "not measurable":  # the laptop profile warns and lets it through; the report says so
        warn = run_area("difficulty", GateContext(diff_ws, GatesConfig(not_measurable="warn"), "round1", config=cfg))
        assert warn.passed and warn.warnings and any("not measurable" in n for n in warn.notes)


def test_dev_outcomes_from_another_model_or_split_are_refused(diff_ws):
    from rc1.config.gates import GatesConfig
    from rc1.config.schema import TrainConfig
    from rc1.gates.base import GateContext
    from rc1.gates.difficulty import outcome_check
    from rc1.gates.base import GateResult
    from tests.helpers.dev_answers import write_dev_answers

    cfg = TrainConfig()
    write_dev_answers(diff_ws, cfg, harder_is_harder)
    other = cfg.model_copy(deep=True)
    other.model.base = "random:qwen3-tiny"
    check = outcome_check(GateContext(diff_ws, GatesConfig(), "round1", config=other), GateResult("difficulty"))
    assert not check.passed and "not of random:qwen3-tiny" in check.detail and "rc1 reward base-answers" in check.detail
    diff_ws.path("data/responses_dev_base.jsonl").unlink()
    check = outcome_check(GateContext(diff_ws, GatesConfig(), "round1", config=cfg), GateResult("difficulty"))
    assert not check.passed and "is missing" in check.detail


def test_gates_pass_on_a_good_workspace_with_evidence(diff_ws):
    from rc1.config.gates import GatesConfig
    from rc1.config.schema import TrainConfig
    from rc1.gates.base import GateContext
    from rc1.gates.registry import run_area
    from tests.helpers.dev_answers import write_dev_answers

    cfg = TrainConfig()
    write_dev_answers(diff_ws, cfg, harder_is_harder)
    ctx = GateContext(diff_ws, GatesConfig(), "round1", config=cfg)
    for area in ("pool", "difficulty"):
        res = run_area(area, ctx)
        assert res.passed, [c.to_dict() for c in res.failing]
        paths = {e.path for e in res.evidence}
        assert "data/rollouts/rc1_seed.jsonl" in paths and all(len(e.sha256) == 64 for e in res.evidence)
    assert "data/shadow_eval_245.jsonl" in {e.path for e in run_area("pool", ctx).evidence}
    assert "data/rollouts/rc1_seed.balanced.jsonl" in {e.path for e in run_area("difficulty", ctx).evidence}


def test_gates_fail_when_files_are_missing(tmp_path):
    from rc1.config.gates import GatesConfig
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

    from rc1.config.gates import GatesConfig
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


def test_every_difficulty_bound_fails_on_realistic_bad_input(diff_ws):
    """Buckets swapped (easy items labelled hard and back), an easy item that restates its support, a hard one
    with nothing to match, an over-long item, too many tool hops, and a pool balanced to another target: each
    bound of the round 1 table refuses it."""
    from rc1.config.gates import DifficultyGate
    from rc1.data.difficulty import difficulty_checks
    from rc1.data.io import read_jsonl

    bal = read_jsonl(diff_ws.path("data/rollouts/rc1_seed.balanced.jsonl"))
    swap = {"easy": "hard", "hard": "easy", "medium": "medium"}
    swapped = {c["name"]: c for c in difficulty_checks([dict(it, bucket=swap[it["bucket"]]) for it in bal],
                                                       DifficultyGate())[0]}
    assert not swapped["clue_overlap median (hard)"]["passed"] and not swapped["clue_overlap median (easy)"]["passed"]
    easy = next(it for it in bal if it["bucket"] == "easy")
    hard = next(it for it in bal if it["bucket"] == "hard")
    echo = dict(easy, id="echo", difficulty=dict(easy["difficulty"], clue_overlap=0.9))
    blind = dict(hard, id="blind", difficulty=dict(hard["difficulty"], clue_overlap=0.02))
    long_item = dict(bal[1], id="long", difficulty=dict(bal[1]["difficulty"], len_tokens=5000))
    hops = dict(bal[2], id="hops", difficulty=dict(bal[2]["difficulty"], tool_hops=12))
    c = {x["name"]: x for x in difficulty_checks(bal + [echo, blind, long_item, hops], DifficultyGate())[0]}
    assert not c["clue_overlap max (easy)"]["passed"] and "echo" in c["clue_overlap max (easy)"]["detail"]
    assert not c["clue_overlap min (hard)"]["passed"] and "blind" in c["clue_overlap min (hard)"]["detail"]
    assert not c["max len_tokens"]["passed"] and "long" in c["max len_tokens"]["detail"]
    assert not c["max tool_hops"]["passed"] and "hops" in c["max tool_hops"]["detail"]
    out = "data/rollouts/other_target.balanced.jsonl"
    assert run_cli(diff_ws, "data", "difficulty", "bucketize", "--out", out, "--target",
                   "easy:0.40,medium:0.40,hard:0.20").exit_code == 0
    c = {x["name"]: x for x in difficulty_checks(read_jsonl(diff_ws.path(out)), DifficultyGate())[0]}
    assert not c["hotpotqa: hard share"]["passed"] and not c["hotpotqa: easy share"]["passed"]


def test_outcomes_too_few_to_show_a_gap_are_not_measurable_not_failed():
    """6 successes on 3 + 3 items: even all of them on easy items could not give a CI above 0: the check
    cannot tell, and says so instead of failing (or passing)."""
    from rc1.data.difficulty import outcome_gap

    items, outcomes = outcomes_by_bucket({("strategyqa", "easy"): 0.0, ("strategyqa", "hard"): 0.5}, n=3, answers=4)
    g = outcome_gap(items, outcomes, min_successes=5)
    assert g["successes_easy_hard"] >= 5 and not g["measurable"] and g["best_case_ci_lo_pp"] <= 0
    assert "too few to tell" in g["why"]


def test_a_fitted_dev_split_of_one_bucket_is_not_applicable_not_a_warning(diff_ws):
    """With the difficulty fit on, a dev split holding no task with both easy and hard items (the fit kept a band
    of levels) cannot judge the pool's buckets: not applicable, with the reason, so production does not block on
    it. Without the fit the same answers stay `not measurable` (production blocks), and with the fit on a dev
    split that spans both buckets is still judged."""
    from rc1.config.gates import GatesConfig
    from rc1.config.schema import TrainConfig
    from rc1.data import difficulty as D
    from rc1.data.io import read_jsonl
    from rc1.data.tokens import get_counter
    from rc1.gates.base import GateContext, GateResult
    from rc1.gates.difficulty import outcome_check
    from tests.helpers.dev_answers import write_dev_answers

    cfg = TrainConfig()
    fitted = cfg.model_copy(deep=True)
    fitted.difficulty_fit.enable = True
    dev = diff_ws.path(cfg.data.eval_path)
    items = read_jsonl(dev)
    buckets = {it["id"]: it["bucket"] for it in D.compute_metrics(items, get_counter(None))[0]}
    write_dev_answers(diff_ws, cfg, harder_is_harder)
    judged = outcome_check(GateContext(diff_ws, GatesConfig(), "round1", config=fitted), GateResult("difficulty"))
    assert judged.status == "pass", judged.to_dict()  # both buckets present: judged as without the fit

    dev.write_text("".join(json.dumps(it) + "\n" for it in items if buckets[it["id"]] != "hard"))
    write_dev_answers(diff_ws, cfg, harder_is_harder)
    plain = outcome_check(GateContext(diff_ws, GatesConfig(), "round1", config=cfg), GateResult("difficulty"))
    assert plain.status == "not measurable" and "at least 2 easy and 2 hard" in plain.detail
    check = outcome_check(GateContext(diff_ws, GatesConfig(), "round1", config=fitted), GateResult("difficulty"))
    assert check.status == "not applicable" and check.passed
    assert "difficulty_fit is on" in check.detail and "reports/difficulty_fit.json" in check.detail
