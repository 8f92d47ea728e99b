"""The text protocol parser and the two tools (pure functions, no model)."""

from __future__ import annotations

import time

import pytest

from rc1.envs.actions import has_complete_action, parse_action, system_prompt, visible_text
from rc1.envs.tools import CalcError, calc, run_calc, wiki_search


@pytest.mark.parametrize("text, kind, arg, tool", [
    ("ANSWER: 42", "answer", "42", None),
    ("Let me see.\nanswer: Paris", "answer", "Paris", None),
    ("**ANSWER:** yes", "answer", "yes", None),
    ("ANSWER:\n  Seine river\n", "answer", "Seine river", None),
    ("TOOL: wiki capital of France", "tool", "capital of France", "wiki"),
    ("I need numbers.\nTOOL: calc 12*(3+4)\nRESULT: 84", "tool", "12*(3+4)", "calc"),
    ("TOOL: calc(2+2)", "tool", "2+2", "calc"),
    ("TOOL: calc (1+2)*(3+4)", "tool", "(1+2)*(3+4)", "calc"),
    ("- TOOL: wiki: \"Eiffel Tower\"", "tool", "Eiffel Tower", "wiki"),
    ("ASK: Which year do you mean?", "ask", "Which year do you mean?", None),
    ("TOOL: wiki Paris\nANSWER: Seine", "tool", "Paris", "wiki"),      # first action line wins
    ("The answer is 7.", "none", "The answer is 7.", None),
    ("<think>ANSWER: 3</think>\nANSWER: 4", "answer", "4", None),     # actions inside think don't count
    ("<think>maybe TOOL: calc 1+1", "none", "", None),                # unclosed think: still reasoning
    ("My ANSWER: 5", "none", "My ANSWER: 5", None),                   # keyword must start the line
])
def test_parse_action(text, kind, arg, tool):
    action = parse_action(text)
    assert (action.kind, action.arg, action.tool) == (kind, arg, tool)


def test_generation_prompt_that_opens_think():
    # Qwen3-Thinking's prompt ends with "<think>": the model's text up to </think> is reasoning.
    assert parse_action("so TOOL: calc 1+1 maybe\n</think>\nANSWER: 2", starts_in_think=True).arg == "2"
    assert parse_action("ANSWER: 2 still thinking", starts_in_think=True).kind == "none"
    assert visible_text("a<think>b</think>c") == "ac"


def test_complete_action_needs_the_newline():
    assert not has_complete_action("TOOL: calc 2+")
    assert has_complete_action("Thinking.\nTOOL: calc 2+3\n")
    assert not has_complete_action("<think>TOOL: calc 2+3\n")
    assert not has_complete_action("ANSWER:\n")  # the answer is on the next line; keep generating
    assert has_complete_action("ANSWER: 7\n")


def test_system_prompt_lists_only_available_tools():
    both, wiki_only = system_prompt(["wiki", "calc"]), system_prompt(["wiki"])
    assert "TOOL: calc" in both and "TOOL: wiki" in both and "ANSWER:" in both and "ASK:" in both
    assert "calc" not in wiki_only
    assert len(both) < 400  # every token of it is paid on every rollout


@pytest.mark.parametrize("expr, value", [
    ("2+3", "5"), ("12*(3+4)", "84"), ("7/2", "3.5"), ("10/4*2", "5"), ("2^10", "1024"), ("-3**2", "-9"),
    ("1,200 + 300", "1500"), ("3 x 4", "12"), ("17 // 5", "3"), ("17 % 5", "2"), ("$5 * 3 =", "15"),
    ("1/3", "0.3333333333"), ("(1.5+2.5)*2", "8"),
])
def test_calc_values(expr, value):
    assert calc(expr) == value


@pytest.mark.parametrize("expr, why", [
    ("__import__('os').system('true')", "not allowed"),
    ("open('/etc/passwd')", "not allowed"),
    ("x + 1", "not allowed"),
    ("(1).real", "not allowed"),
    ("[1,2][0]", "not allowed"),
    ("lambda: 1", "not allowed"),
    ("'a' * 3", "not allowed"),
    ("9**9**9", "exponent"),
    ("10**200", "exponent"),
    ("99999999**50", "too large"),
    ("1/0", "division by zero"),
    ("2 +", "cannot parse"),
    ("1+" * 150 + "1", "longer than"),
    ("", "empty"),
])
def test_calc_rejects(expr, why):
    start = time.perf_counter()
    with pytest.raises(CalcError, match=why):
        calc(expr)
    assert time.perf_counter() - start < 0.5
    assert run_calc(expr).startswith("error: ")


def test_wiki_finds_best_paragraph_by_title_and_keywords():
    corpus = [{"title": "Paris", "text": "Paris is the capital of France.\n\nThe Seine flows through Paris."},
              {"title": "Berlin", "text": "Berlin is the capital of Germany. The Spree flows through it."},
              {"title": "Seine", "text": "The Seine is a 777 km river in northern France."}]
    assert wiki_search(corpus, "river Seine length").startswith("Seine: The Seine is a 777 km river")
    assert wiki_search(corpus, "Berlin") .startswith("Berlin: Berlin is the capital of Germany")
    assert wiki_search(corpus, "what flows through Paris?") == "Paris: The Seine flows through Paris."
    assert wiki_search(corpus, "quantum chromodynamics").startswith("No results")
    assert wiki_search([], "Paris").startswith("No results")
    assert wiki_search(corpus, "the of a").startswith("No results")  # stopwords only
    long = [{"title": "Long", "text": "word " * 500}]
    assert len(wiki_search(long, "word")) < 450
