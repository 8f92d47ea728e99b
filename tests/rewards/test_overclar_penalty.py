"""Over-clarification penalty: alpha * min(c, cap) when the item does not need clarification."""

import pytest

from rc1.config.schema import RewardSection
from rc1.rewards.penalties import difficulty_factor, overclar_penalty
from rc1.rewards.penalty_check import overclar_penalty_cases
from rc1.envs.episode import EpisodeOutcome
from rc1.rewards.reward import RewardModel

ALPHA, CAP = 0.07, 3


def test_no_trigger_without_clarification():
    assert overclar_penalty(False, 0, ALPHA, CAP) == 0.0


@pytest.mark.parametrize("c,expected", [(1, 0.07), (2, 0.14), (5, 0.21)])
def test_penalty_grows_then_caps(c, expected):
    assert overclar_penalty(False, c, ALPHA, CAP) == pytest.approx(expected)


def test_needed_clarification_is_never_penalized():
    assert overclar_penalty(True, 2, ALPHA, CAP) == 0.0
    assert overclar_penalty(True, 5, ALPHA, CAP) == 0.0


def test_in_process_check_passes_and_catches_a_broken_penalty(monkeypatch):
    assert all(c.passed for c in overclar_penalty_cases(ALPHA, CAP))
    import rc1.rewards.penalties as pen
    monkeypatch.setattr(pen, "overclar_penalty", lambda needs, c, a, cap: a * c)  # no cap
    assert not all(c.passed for c in overclar_penalty_cases(ALPHA, CAP))


def _episode(clar):
    return EpisodeOutcome(item_id="x", task="strategyqa", final_answer="yes", turns=1 + clar, tool_hops=0,
                          clarifications=clar, truncated=False, model_text="Because A so B.\nANSWER: yes")


def test_reward_model_applies_penalty_and_bonus():
    w = {"correctness": 0.45, "reasoning": 0.12, "grounding": 0.12, "clarity": 0.07, "conciseness": 0.06,
         "format": 0.08, "clarification": 0.10}
    item = {"task": "strategyqa", "answer": "yes", "needs_clarification": False, "bucket": "hard", "supporting": []}
    on = RewardModel(w, RewardSection(difficulty_beta=0.1), True)
    off = RewardModel(w, RewardSection(difficulty_beta=0.1), False)
    b_on, b_off = on.score(item, _episode(5)), off.score(item, _episode(5))
    assert b_on.success and b_on.penalty == pytest.approx(0.21) and b_off.penalty == 0.0
    assert b_on.advantage_scale == pytest.approx(1.1) == difficulty_factor("hard", 0.1)
    # the penalty's share of the total: shaping_scale * penalty / (1 + alpha * cap); the bonus is not in the reward
    assert b_off.total - b_on.total == pytest.approx(0.5 * 0.21 / 1.21)
    assert difficulty_factor("easy", 0.1) == pytest.approx(0.9) and difficulty_factor("medium", 0.1) == 1.0
