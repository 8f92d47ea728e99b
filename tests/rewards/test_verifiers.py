import pytest

from rc1.envs.answers import extract_final_answer, strip_think
from rc1.rewards.verifiers import f1_score, parse_number, verify, verify_episode


@pytest.mark.parametrize("text,expected", [
    ("<think>so 2+2=5? no, 4</think>\nANSWER: 4", "4"),
    ("<think>long reasoning that never ends ANSWER: 9", None),          # unclosed think: nothing visible
    ("reasoning here</think>\nANSWER: Paris", "Paris"),                 # Qwen3-Thinking: no opening tag
    ("We add.\nFinal answer: 1,234", "1,234"),
    ("the result is \\boxed{\\frac{1}{2}} ok", "\\frac{1}{2}"),
    ("**Answer:** yes.", "yes"),
    ("Step 1\nStep 2\n42", "42"),
    ("", None),
])
def test_extract_final_answer(text, expected):
    assert extract_final_answer(text) == expected


def test_strip_think_removes_unclosed_block():
    assert strip_think("visible <think>hidden").strip() == "visible"


@pytest.mark.parametrize("pred,gold,ok", [
    ("#### 1,234", "1234", True), ("$12.50", "12.5", True), ("12.0", "12", True),
    ("She has 3 then 5 apples, so 8", "8", True), ("7", "8", False), ("no number", "8", False),
    ("-3", "-3", True), (None, "3", False),
])
def test_gsm8k(pred, gold, ok):
    assert verify("gsm8k", pred, gold).success is ok


def test_parse_number_prefers_hash_marker():
    assert str(parse_number("3 + 4 = 7 #### 7")) == "7"


def test_hotpotqa_em_and_f1():
    assert verify("hotpotqa", "The Eiffel Tower", "Eiffel Tower").success
    v = verify("hotpotqa", "the tall Eiffel Tower", "Eiffel Tower")
    assert not v.success and 0.5 < v.score < 1.0
    assert verify("hotpotqa", "Big Ben", "x", aliases=["big ben"]).success
    assert f1_score("yes", "no") == 0.0


@pytest.mark.parametrize("pred,gold,ok", [
    ("Yes", "yes", True), ("no.", "no", True), ("True", True, True), ("The answer is no", "no", True),
    ("yes", "no", False), ("maybe", "yes", False),
])
def test_strategyqa(pred, gold, ok):
    assert verify("strategyqa", pred, gold).success is ok


def test_unknown_task_is_an_error():
    with pytest.raises(ValueError, match="unknown task"):
        verify("mmlu", "a", "a")


@pytest.mark.parametrize("pred", [
    "Paris is not in Spain, yes it is in France",   # a stray "yes" is not the answer
    "It depends; some would say no",
])
def test_strategyqa_never_reads_a_stray_word(pred):
    assert verify("strategyqa", pred, "no").success is False
    assert verify("strategyqa", pred, "yes").success is False


class _Ep:
    def __init__(self, final_answer, truncated):
        self.final_answer, self.truncated, self.task = final_answer, truncated, "gsm8k"


def test_truncated_episode_never_succeeds():
    item = {"task": "gsm8k", "answer": "7"}
    assert verify_episode(item, _Ep("7", truncated=False)).success
    assert not verify_episode(item, _Ep("7", truncated=True)).success
    assert verify_episode(item, _Ep("7", truncated=True)).score == 0.0
