"""Final answers of Qwen3-Thinking-style outputs: the template opened <think>, the model closes it (or not)."""

from __future__ import annotations

import pytest

from rc1.envs.answers import extract_final_answer, has_answer_line
from rc1.envs.episode import Episode
from rc1.envs.verifiers import verify_episode

GOLD = {"id": "g", "task": "gsm8k", "answer": "42", "question": "6 * 7?", "supporting": ["6 * 7 = 42"],
        "needs_clarification": False}


@pytest.mark.parametrize("raw,expected", [
    ("6 times 7... 42? Let me check: 6*7=42.\n</think>\n\nANSWER: 42", "42"),        # as the model writes it
    ("<think>\n6*7 = 42, maybe ANSWER: 41? no.\n</think>\n\nANSWER: 42", "42"),       # with the template's tag
    ("Thinking about 6*7.\n</think>\n\nThe product is \\boxed{42}.", "42"),
    ("<think>\n6*7 is 42 so ANSWER: 42 but wait", None),                              # never closed: no answer
    ("<think>\n", None),
])
def test_answer_is_read_after_the_think_block_only(raw, expected):
    assert extract_final_answer(raw) == expected
    assert has_answer_line(raw) == (expected is not None)


def _episode(text: str, final_answer, truncated=False) -> Episode:
    return Episode("g", "gsm8k", final_answer, 1, 0, 0, truncated, text)


def test_an_unclosed_think_block_is_not_a_success_even_when_it_contains_the_answer():
    from rc1.config.schema import RewardSection
    from rc1.rewards.reward import RewardModel
    from tests.helpers.workspace import WEIGHTS

    reward = RewardModel(WEIGHTS, RewardSection(), use_overclar_penalty=True)
    closed = _episode("<think>\n6*7=42\n</think>\n\nANSWER: 42", "42")
    unclosed = _episode("<think>\n6*7=42 so ANSWER: 42 and then I kept", None)   # the env found no answer
    cut = _episode("<think>\n6*7=42 so ANSWER: 42 and then I kept", "42", truncated=True)
    assert verify_episode(GOLD, closed).success
    assert not verify_episode(GOLD, unclosed).success and not verify_episode(GOLD, cut).success
    assert reward.score(GOLD, closed).total > reward.score(GOLD, unclosed).total
    assert reward.score(GOLD, unclosed).dims["format"] < reward.score(GOLD, closed).dims["format"]
