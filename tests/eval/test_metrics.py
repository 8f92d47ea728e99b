"""Eval metrics on hand-built episodes whose answers are known."""

from __future__ import annotations

import pytest

from rc1.eval.metrics import (Z95, EpisodeRecord, compare, mean_ci, metric_value, newcombe_diff, paired_bootstrap,
                              summarize, wilson)


def rec(i, task="gsm8k", bucket="easy", need=False, ok=False, clar=0, turns=1, hops=0) -> EpisodeRecord:
    return EpisodeRecord(item_id=f"i{i}", task=task, bucket=bucket, needs_clarification=need, success=ok,
                         score=float(ok), clarifications=clar, turns=turns, tool_hops=hops, truncated=False)


def test_z_is_the_normal_quantile():
    from scipy.stats import norm

    assert Z95 == pytest.approx(norm.ppf(0.975), abs=1e-12)


def test_wilson_known_values():
    lo, hi = wilson(8, 10)  # textbook value: 0.490 .. 0.943
    assert lo == pytest.approx(0.4902, abs=1e-4) and hi == pytest.approx(0.9433, abs=1e-4)
    lo, hi = wilson(0, 20)
    assert lo == 0.0 and hi == pytest.approx(0.1611, abs=1e-4)
    assert wilson(0, 0) is None


def test_newcombe_matches_the_published_example():
    # Newcombe (1998), method 10: 56/70 vs 48/80 -> difference 0.2, 95% CI 0.0524 .. 0.3339
    lo, hi = newcombe_diff(48, 80, 56, 70)
    assert lo == pytest.approx(0.0524, abs=1e-3) and hi == pytest.approx(0.3339, abs=1e-3)


def test_mean_ci_small_sample_uses_t():
    m, (lo, hi) = mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and lo == pytest.approx(2 - 4.303 * (1 / 3) ** 0.5, abs=1e-3) and hi == pytest.approx(4.4841, abs=1e-3)


def test_summary_rates_on_hand_built_episodes():
    rs = [
        rec(0, "hotpotqa", "hard", need=False, ok=True, clar=1, turns=3, hops=2),   # over-clarified
        rec(1, "hotpotqa", "hard", need=True, ok=False, clar=1, turns=2),          # asked, needed
        rec(2, "strategyqa", "hard", need=False, ok=True, clar=0, turns=1),
        rec(3, "gsm8k", "hard", need=True, ok=True, clar=0, turns=1, hops=1),      # gsm8k: not in hard_hq_sq
        rec(4, "gsm8k", "easy", need=False, ok=False, clar=2, turns=4),           # over-clarified
        rec(5, "strategyqa", "medium", need=False, ok=False, clar=0, turns=1),
    ]
    s = summarize(rs)
    assert s["n"] == 6
    assert s["success"]["k"] == 3 and s["success"]["rate"] == pytest.approx(0.5)
    assert s["by_task"]["hotpotqa"]["rate"] == 0.5 and s["by_task"]["gsm8k"]["k"] == 1
    assert s["by_bucket"]["hard"]["n"] == 4 and s["by_bucket"]["hard"]["k"] == 3
    assert s["hard_hq_sq"]["n"] == 3 and s["hard_hq_sq"]["k"] == 2
    assert s["needs_clar_success"]["n"] == 2 and s["needs_clar_success"]["k"] == 1
    assert s["overclar"]["k"] == 2 and s["overclar"]["n"] == 4 and s["overclar"]["rate"] == 0.5
    assert s["avg_turns"]["mean"] == pytest.approx(2.0) and s["avg_tool_hops"]["mean"] == pytest.approx(0.5)
    c = s["clarification"]["all"]
    assert (c["asked"], c["needed"], c["asked_and_needed"]) == (3, 2, 1)
    assert c["precision"]["rate"] == pytest.approx(1 / 3) and c["recall"]["rate"] == 0.5
    assert s["clarification"]["hotpotqa"]["precision"]["rate"] == 0.5
    assert s["clarification"]["hotpotqa"]["recall"]["rate"] == 1.0
    assert s["clarification"]["strategyqa"]["precision"]["rate"] is None  # never asked: undefined, not 0
    assert s["success"]["ci95"] == list(wilson(3, 6))


def test_compare_pairs_items_and_computes_deltas():
    base = [rec(i, "hotpotqa", "hard", need=i < 4, ok=i < 2, clar=1 if i >= 6 else 0, turns=2) for i in range(10)]
    trained = [rec(i, "hotpotqa", "hard", need=i < 4, ok=i < 5, clar=1 if i >= 8 else 0, turns=1) for i in range(10)]
    d = compare(base, list(reversed(trained)))  # pairing is by item id, not position
    assert d["n_paired"] == 10
    assert d["success"]["delta_pp"] == pytest.approx(30.0)
    lo, hi = d["success"]["ci95_pp"]
    assert 0 <= lo <= 30.0 <= hi  # three items flipped to success, none the other way: never below 0
    assert d["needs_clar_success"]["delta_pp"] == pytest.approx(50.0)  # 2/4 -> 4/4
    assert d["hard_hq_sq"]["delta_pp"] == pytest.approx(30.0)
    oc = d["overclar"]  # not needed: items 4..9; base asks on 6..9 (4/6), trained on 8..9 (2/6)
    assert oc["base"] == pytest.approx(4 / 6) and oc["trained"] == pytest.approx(2 / 6)
    assert oc["rel_reduction"] == pytest.approx(0.5)
    assert d["avg_turns"]["delta"] == pytest.approx(-1.0) and d["avg_turns"]["ci95"] == [-1.0, -1.0]


def test_identical_models_have_zero_delta_and_a_degenerate_ci():
    rs = [rec(i, ok=i % 2 == 0) for i in range(8)]
    d = compare(rs, rs)
    assert d["success"]["delta_pp"] == 0 and d["success"]["ci95_pp"] == [0.0, 0.0]
    assert d["overclar"]["rel_reduction"] is None  # base never over-clarified: undefined


def test_paired_bootstrap_is_seeded_and_reproducible():
    b = [0, 1, 0, 0, 1, 0, 0, 1, 0, 0]
    t = [1, 1, 0, 1, 1, 0, 1, 1, 0, 1]
    assert paired_bootstrap(b, t) == paired_bootstrap(b, t)
    lo, hi = paired_bootstrap(b, t)
    assert 0 < lo < 0.4 < hi


def test_record_from_an_episode_uses_the_verifier():
    from rc1.envs.episode import Episode

    item = {"id": "x1", "task": "gsm8k", "answer": "42", "aliases": [], "needs_clarification": True, "bucket": "hard",
            "messages": []}
    ep = Episode(item_id="x1", task="gsm8k", final_answer="42", turns=3, tool_hops=1, clarifications=1,
                 truncated=False, model_text="ASK: which?\nANSWER: 42")
    r = EpisodeRecord.of(item, ep)
    assert r.success and r.asked and r.needs_clarification and r.turns == 3 and r.bucket == "hard"
    wrong = Episode(item_id="x1", task="gsm8k", final_answer="41", turns=1, tool_hops=0, clarifications=0,
                    truncated=False, model_text="ANSWER: 41")
    assert not EpisodeRecord.of(item, wrong).success


def test_metric_names():
    s = summarize([rec(0, "gsm8k", "hard", ok=True), rec(1, "hotpotqa", "hard", ok=False)])
    assert metric_value("success", s) == 0.5
    assert metric_value("success_gsm8k", s) == 1.0 and metric_value("success_hard", s) == 0.5
    assert metric_value("hard_success", s) == 0.0
    from rc1.runtime.errors import ConfigError

    with pytest.raises(ConfigError, match="unknown metric"):
        metric_value("nonsense", s)


def test_a_limited_eval_set_keeps_every_task_and_bucket():
    from collections import Counter

    from rc1.eval.splits import stratified_head

    items = [{"id": f"{t}{b}{i}", "task": t, "bucket": b} for t in ("gsm8k", "hotpotqa", "strategyqa")
             for b in ("easy", "medium", "hard") for i in range(10 if t == "hotpotqa" else 5)]  # written stratum by stratum
    head = stratified_head(items, 24)
    assert len(head) == 24 and len({it["id"] for it in head}) == 24
    c = Counter(it["task"] for it in head)
    assert c["hotpotqa"] == 12 and c["gsm8k"] == 6 and c["strategyqa"] == 6  # proportional to the strata
    assert len({(it["task"], it["bucket"]) for it in head}) == 9
    assert [it["id"] for it in head] == [it["id"] for it in items if it in head]  # file order kept
    assert stratified_head(items, 1000) == items


# ----------------------------------------------------------------------------- baselines and power
def test_majority_baseline_answers_each_task_with_its_most_common_gold_answer():
    from rc1.eval.metrics import majority_baseline

    items = ([{"id": f"s{i}", "task": "strategyqa", "answer": v} for i, v in enumerate([False, False, "no", True, "yes"])]
             + [{"id": f"g{i}", "task": "gsm8k", "answer": v} for i, v in enumerate(["12", "12.0", "7", "1,200", "1200"])]
             + [{"id": "h0", "task": "hotpotqa", "answer": "Paris", "aliases": []},
                {"id": "h1", "task": "hotpotqa", "answer": "the Paris", "aliases": []},
                {"id": "h2", "task": "hotpotqa", "answer": "Rome", "aliases": ["Roma"]}])
    m = majority_baseline(items)
    t = m["by_task"]
    assert t["strategyqa"]["answer"] == "no" and (t["strategyqa"]["k"], t["strategyqa"]["n"]) == (3, 5)  # bools count
    # "12" == "12.0" and "1,200" == "1200" for the numeric verifier: a 2-2 tie, the first in sorted order wins
    assert t["gsm8k"]["answer"] == "1,200" and t["gsm8k"]["k"] == 2
    assert t["hotpotqa"]["answer"] == "Paris" and t["hotpotqa"]["k"] == 2  # EM normalises the article away
    assert m["overall"]["k"] == 7 and m["overall"]["n"] == 13 and m["items"]["s3"] is False and m["items"]["h1"] is True
    assert "evaluated items themselves" in m["definition"]


def test_a_model_below_the_majority_baseline_has_a_negative_paired_delta():
    from rc1.eval.metrics import versus_baseline

    trained = [rec(i, "strategyqa", ok=(i < 4)) for i in range(20)]  # 20 %
    baseline = {f"i{i}": i % 10 != 0 for i in range(20)}  # 90 %
    v = versus_baseline(trained, baseline)
    assert v["success"]["delta_pp"] == pytest.approx(-70.0) and v["success"]["ci95_pp"][1] < 0
    assert v["by_task"]["strategyqa"]["n"] == 20


def test_success_among_non_truncated_answers():
    rs = [rec(0, ok=True), rec(1), EpisodeRecord("i2", "gsm8k", "easy", False, False, 0.0, 0, 1, 0, True),
          EpisodeRecord("i3", "hotpotqa", "easy", False, False, 0.0, 0, 1, 0, True)]
    nt = summarize(rs)["non_truncated"]
    assert nt["success"]["k"] == 1 and nt["success"]["n"] == 2
    assert nt["by_task"]["gsm8k"]["n"] == 2 and nt["by_task"]["hotpotqa"]["n"] == 0
    assert nt["truncated_by_task"]["gsm8k"]["rate"] == pytest.approx(1 / 3)


def test_mde_has_the_power_it_claims():
    """At the MDE, a two-sided McNemar test (normal approximation) rejects about 80 % of the time."""
    import numpy as np

    from rc1.eval.metrics import mde_paired

    assert mde_paired(96, 0.0) == pytest.approx(0.0798, abs=1e-3)
    assert mde_paired(96, 0.5) > mde_paired(96, 0.1) > mde_paired(96, 0.0) > mde_paired(400, 0.0)
    assert mde_paired(0, 0.3) is None and mde_paired(10, None) is None and mde_paired(3, 0.0) is None
    rng = np.random.default_rng(0)
    for n, p0 in ((96, 0.062), (60, 0.4)):
        d = mde_paired(n, p0)
        a, b = rng.random((4000, n)) < p0, rng.random((4000, n)) < p0 + d
        n10, n01 = (b & ~a).sum(1), (a & ~b).sum(1)
        z = (n10 - n01) / np.sqrt(np.maximum(n10 + n01, 1))
        assert 0.75 < (np.abs(z) > 1.96).mean() < 0.87


def test_spread_across_seeds():
    from rc1.eval.metrics import spread

    s = spread([2.0, 4.0, None, 6.0])
    assert (s["n"], s["min"], s["mean"], s["max"]) == (3, 2.0, 4.0, 6.0) and s["sd"] == pytest.approx(2.0)
    assert spread([None])["mean"] is None and spread([1.0])["sd"] is None
