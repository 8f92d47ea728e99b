import pytest

from rc1.envs.answers import extract_final_answer, strip_think
from rc1.envs.verifiers import f1_score, parse_number, verify, verify_episode


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


# ----------------------------------------------------------------------------- the verifier registry
def test_the_schema_names_exactly_the_registered_verifiers():
    from rc1.config.names import TASK_VERIFIERS, VERIFIER_NAMES
    from rc1.envs.verifiers import VERIFIERS

    assert tuple(VERIFIERS) == VERIFIER_NAMES
    assert set(TASK_VERIFIERS.values()) <= set(VERIFIERS)


@pytest.mark.parametrize("name,pred,gold,aliases,ok", [
    ("numeric", "so the total is 1,250", "1250", (), True),
    ("numeric", "12", "13", (), False),
    ("exact", "The Nile", "nile", (), True),
    ("exact", "the river Nile", "Nile", (), False),
    ("exact", "Big Apple", "New York", ("big apple",), True),
    ("f1", "Nile River", "Nile", (), False),
    ("yes_no", "No, it cannot", "no", (), True),
    ("yes_no", "It is not yes", "no", (), False),
    ("choice", "(C)", "C", (), True),
    ("choice", "C) Lima", "c", (), True),
    ("choice", "The answer is B", "C", (), False),
    ("choice", "A dog barks", "A", (), False),                  # a sentence's first word is no option letter
    ("choice", "Lima", "C", ("Lima",), True),                   # the option's text as an alias
])
def test_named_verifiers(name, pred, gold, aliases, ok):
    assert verify(name, pred, gold, aliases).success is ok


def test_f1_gives_partial_credit_without_success():
    v = verify("f1", "Nile River", "Nile")
    assert not v.success and 0.5 < v.score < 1


@pytest.mark.parametrize("name,gold,problem", [
    ("numeric", "about a dozen", "holds no number"), ("yes_no", "maybe", "not yes/no"),
    ("choice", "Paris", "not an option letter"), ("exact", "the", "empty once normalised"),
])
def test_gold_answers_a_named_verifier_cannot_check_are_named(name, gold, problem):
    from rc1.envs.verifiers import gold_problem

    assert problem in gold_problem(name, gold)
    assert gold_problem(name, {"numeric": "7", "yes_no": "yes", "choice": "B", "exact": "Paris"}[name]) is None


def _workspace_verifier(root, body, name="my_verifiers"):
    (root / f"{name}.py").write_text(body)
    return f"python:{name}:check"


def test_python_verifier_loads_from_the_workspace_and_may_return_bool_float_or_verdict(tmp_path):
    from rc1.envs.verifiers import resolve_verifier

    spec = _workspace_verifier(tmp_path, "from rc1.envs.verifiers import Verdict\n"
                                         "def check(prediction, gold, aliases):\n"
                                         "    if prediction == 'half':\n        return 0.5\n"
                                         "    if prediction == 'verdict':\n        return Verdict(True, 1.0)\n"
                                         "    return prediction == gold\n")
    item = {"id": "q1", "task": "mine", "verifier": spec, "answer": "x"}
    fn = resolve_verifier(spec, root=tmp_path)
    assert fn("x", "x", ()) is True
    from rc1.envs.verifiers import use_workspace

    use_workspace(tmp_path)
    try:
        assert verify_episode(item, _Ep("x", truncated=False)).success
        assert not verify_episode(item, _Ep("y", truncated=False)).success
        half = verify_episode(item, _Ep("half", truncated=False))
        assert (half.success, half.score) == (False, 0.5)          # partial credit is not a solve
        assert verify_episode(item, _Ep("verdict", truncated=False)).success
        assert not verify_episode(item, _Ep("x", truncated=True)).success   # truncated fails first
    finally:
        use_workspace(None)


def test_python_verifier_is_never_taken_from_elsewhere_on_sys_path(tmp_path, monkeypatch):
    from rc1.envs.verifiers import UnknownVerifier, resolve_verifier

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _workspace_verifier(elsewhere, "def check(p, g, a):\n    return True\n", name="stray_verifiers")
    monkeypatch.syspath_prepend(str(elsewhere))
    ws = tmp_path / "ws"
    ws.mkdir()
    with pytest.raises(UnknownVerifier, match="no stray_verifiers.py in the workspace"):
        resolve_verifier("python:stray_verifiers:check", root=ws)
    # an installed package is fine (rc1 itself is one)
    assert resolve_verifier("python:rc1.envs.verifiers:verify_exact", root=ws)("Nile", "nile", ()).success
    with pytest.raises(UnknownVerifier, match="has no function 'nope'"):
        resolve_verifier("python:rc1.envs.verifiers:nope", root=ws)
    spec = _workspace_verifier(ws, "raise RuntimeError('broken at import')\n", name="broken")
    with pytest.raises(UnknownVerifier, match="importing broken.py failed: RuntimeError: broken at import"):
        resolve_verifier(spec, root=ws)


@pytest.mark.parametrize("body,why", [
    ("def check(p, g, a):\n    raise KeyError('units')\n", "KeyError: 'units'"),
    ("def check(p, g, a):\n    return 'yes'\n", "returned str 'yes'"),
    ("def check(p, g, a):\n    return 1.5\n", "returned 1.5; a score must be in [0, 1]"),
    ("def check(p, g, a):\n    return None\n", "returned NoneType"),
])
def test_a_failing_verifier_is_reported_with_the_item_id(tmp_path, body, why):
    from rc1.envs.verifiers import VerifierError, use_workspace

    spec = _workspace_verifier(tmp_path, body, name=f"bad_{abs(hash(body)) % 10**8}")
    use_workspace(tmp_path)
    try:
        with pytest.raises(VerifierError) as exc:
            verify_episode({"id": "item-42", "task": "mine", "verifier": spec, "answer": "1"}, _Ep("1", False))
    finally:
        use_workspace(None)
    msg = exc.value.message
    assert msg.startswith(f"verifier {spec} failed on item item-42: ") and why in msg and "\n" not in msg
    assert exc.value.exit_code == 1 and exc.value.item_id == "item-42"


def test_an_item_without_a_verifier_is_a_config_error():
    from rc1.runtime.errors import ConfigError

    with pytest.raises(ConfigError, match="names no verifier"):
        verify_episode({"id": "z", "task": "mine", "answer": "1"}, _Ep("1", False))


def test_verifier_code_changes_with_a_workspace_module(tmp_path):
    from rc1.envs.verifiers import verifier_code

    spec = _workspace_verifier(tmp_path, "def check(p, g, a):\n    return True\n", name="versioned")
    before = verifier_code(spec, root=tmp_path)
    (tmp_path / "versioned.py").write_text("def check(p, g, a):\n    return False\n")
    assert verifier_code(spec, root=tmp_path) != before and before.startswith(f"{spec} sha256:")
    assert verifier_code("numeric") == "numeric"
    assert verifier_code("python:rc1.envs.verifiers:verify_exact", root=tmp_path).endswith(
        f"rc1=={__import__('importlib.metadata').metadata.version('rc1')}")
