"""Correct answers win: with the shipped weights and penalties, every correct, non-truncated answer to
an item outscores every wrong answer to it (SPEC §5). Episodes are generated: real pool items of every
task, answers that are right or wrong, with random reasoning, answer format, length, repetition and
clarification turns, so every shaping dimension varies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rc1.config.load import load_train_config
from rc1.config.names import REWARD_DIMENSIONS
from rc1.config.schema import RewardSection
from rc1.data.pool import BuildParams, build_pool
from rc1.envs.episode import EpisodeOutcome
from rc1.rewards.reward import RewardModel

ROOT = Path(__file__).resolve().parents[2]
ITEMS = build_pool(BuildParams(n=30, seed=7, templates_dir=ROOT / "templates/pack_v2", clarify_rate=0.5))


def _wrong(item: dict, k: int) -> str:
    task, gold = item["task"], str(item["answer"])
    if task == "gsm8k":
        return str(int(float(gold)) + k + 1)
    if task == "strategyqa":
        return "no" if gold.lower() in ("yes", "true") else "yes"
    # hotpotqa: a near miss (high F1, not EM) or something else entirely
    return f"{gold} of the north" if k % 2 else "the old mill"


@st.composite
def episode(draw, item: dict, correct: bool) -> EpisodeOutcome:
    answer = str(item["answer"]) if correct else _wrong(item, draw(st.integers(0, 5)))
    if item["task"] == "strategyqa":
        answer = {"true": "yes", "false": "no"}.get(answer.lower(), answer)
    reasoning = draw(st.sampled_from(["", "Because 3 + 4 = 7, then we check it.", "first second next so hence " * 20,
                                      " ".join(item.get("supporting") or ["x"])]))
    filler = draw(st.sampled_from(["", "word " * 200, "the the the the " * 10]))
    fmt = draw(st.sampled_from(["ANSWER: {a}", "{a}", "<think>{r}</think>\nANSWER: {a}", "Final answer: {a}",
                                "<think>{r}\nANSWER: {a}"]))
    text = f"{reasoning}\n{filler}\n" + fmt.format(a=answer, r=reasoning)
    return EpisodeOutcome(item_id=item["id"], task=item["task"], final_answer=answer,
                          turns=draw(st.integers(1, 6)), tool_hops=draw(st.integers(0, 4)),
                          clarifications=draw(st.integers(0, 5)), truncated=False, model_text=text)


def _shipped_model() -> RewardModel:
    cfg = load_train_config(ROOT / "configs/local.yaml")
    weights = json.loads((ROOT / "configs/weights.json").read_text())["weights"]
    return RewardModel(weights, cfg.reward, cfg.use_overclar_penalty)


def _weights():
    # any weights the weights gate accepts: >= 0, sum 1, each <= 0.5
    raw = st.lists(st.floats(0, 1), min_size=len(REWARD_DIMENSIONS), max_size=len(REWARD_DIMENSIONS))

    def norm(xs):
        xs = [x + 1e-3 for x in xs]
        s = sum(xs)
        w = [x / s for x in xs]
        return dict(zip(REWARD_DIMENSIONS, w)) if max(w) <= 0.5 else None
    return raw.map(norm).filter(lambda w: w is not None)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_correct_answer_outscores_every_wrong_one_shipped(data):
    model = _shipped_model()
    item = data.draw(st.sampled_from(ITEMS))
    right = [model.score(item, data.draw(episode(item, True))) for _ in range(3)]
    wrong = [model.score(item, data.draw(episode(item, False))) for _ in range(3)]
    assert all(r.success for r in right) and not any(w.success for w in wrong)
    assert min(r.total for r in right) > max(w.total for w in wrong)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), weights=_weights(), scale=st.floats(0, 0.999), alpha=st.floats(0, 0.5),
       cap=st.integers(0, 5))
def test_correct_wins_for_any_valid_weights_and_penalty(data, weights, scale, alpha, cap):
    cfg = RewardSection(shaping_scale=scale, overclar={"alpha": alpha, "cap": cap})
    model = RewardModel(weights, cfg, use_overclar_penalty=True)
    item = data.draw(st.sampled_from(ITEMS))
    r = model.score(item, data.draw(episode(item, True)))
    w = model.score(item, data.draw(episode(item, False)))
    assert r.total > w.total


def test_shaping_orders_answers_of_equal_correctness():
    model = _shipped_model()
    item = next(it for it in ITEMS if it["task"] == "gsm8k" and not it.get("needs_clarification"))
    gold = str(item["answer"])
    plain = EpisodeOutcome(item["id"], "gsm8k", gold, 1, 0, 0, False, f"ANSWER: {gold}")
    over_asking = EpisodeOutcome(item["id"], "gsm8k", gold, 4, 0, 3, False, f"ANSWER: {gold}")
    assert model.score(item, plain).total > model.score(item, over_asking).total > 1.0


def test_truncated_text_holding_the_answer_is_not_correct():
    model = _shipped_model()
    item = next(it for it in ITEMS if it["task"] == "gsm8k")
    ep = EpisodeOutcome(item["id"], "gsm8k", str(item["answer"]), 1, 0, 0, True, f"... so {item['answer']}")
    b = model.score(item, ep)
    assert not b.success and b.total < 1.0


def test_shaping_scale_must_stay_below_one():
    with pytest.raises(ValueError):
        RewardSection(shaping_scale=1.0)


class _AdversarialJudge:
    """Stands in for rc1.judge.live.TrainingJudge: grades every judged dimension as it is told."""

    def __init__(self, dims, grades):
        self.dims, self.grades = dims, list(grades)

    def grade(self, items, episodes):
        from rc1.judge.client import JudgeScore

        return [JudgeScore(it["id"], 0.5, 0.0, [], dims=dict(zip(self.dims, g))) for it, g in zip(items, self.grades)]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), weights=_weights(), scale=st.floats(0, 0.999), source=st.sampled_from(["judge", "hybrid"]))
def test_correct_wins_whatever_the_judge_grades(data, weights, scale, source):
    """The judge may grade a wrong answer 10/10 on every dimension (correctness included) and a right one 0/10:
    the verifier's success still decides the order."""
    cfg = RewardSection(shaping_scale=scale, source=source)
    dims = cfg.judge_dimensions()
    grade = st.lists(st.floats(0, 1), min_size=len(dims), max_size=len(dims))
    judge = _AdversarialJudge(dims, [data.draw(grade), data.draw(grade)])
    model = RewardModel(weights, cfg, use_overclar_penalty=True, judge=judge)
    item = data.draw(st.sampled_from(ITEMS))
    r, w = model.score_many([item, item], [data.draw(episode(item, True)), data.draw(episode(item, False))])
    assert r.success and not w.success
    assert r.total > w.total
