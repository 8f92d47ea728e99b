"""The episode environment turn by turn: tools, clarification, limits, token bookkeeping (no model)."""

from __future__ import annotations

import pytest

from rc1.envs.env import NO_CLARIFICATION_NEEDED, ChatFormat, EpisodeState


@pytest.fixture(scope="module")
def fmt():
    from rc1.models.loader import load_tokenizer

    return ChatFormat(load_tokenizer("random:qwen3-tiny"))


def turn(fmt, text, eos=True):
    return fmt.encode(text) + ([fmt.tok.eos_token_id] if eos else [])


def as_rendered(transcript):
    """The transcript as the model saw it: tool results are user messages."""
    return [{"role": "user" if m["role"] == "tool" else m["role"], "content": m["content"]} for m in transcript]


def test_tool_turns_then_answer_and_token_bookkeeping(fmt, item):
    s = EpisodeState.start(item(), fmt)
    assert s.transcript[0]["role"] == "system" and "TOOL: wiki" in s.transcript[0]["content"]
    assert s.transcript[0]["content"].endswith("You are careful.")  # the item's own system text is kept
    assert s.ids == fmt.prompt_ids(s.transcript) and s.prompt_len == len(s.ids) and s.mask == [0] * len(s.ids)
    t1 = turn(fmt, "I should look it up.\nTOOL: wiki river through Paris\n", eos=False)  # stopped at the action
    s.add_model_turn(t1, hit_limit=False)
    assert not s.done and s.tool_hops == 1
    assert s.transcript[-1] == {"role": "tool", "content": "RESULT (wiki): Paris: The Seine flows through Paris, "
                                                           "dividing it into banks."}
    t2 = turn(fmt, "TOOL: calc 2*(3+4)")  # ended with <|im_end|>
    s.add_model_turn(t2, hit_limit=False)
    assert s.transcript[-1]["content"] == "RESULT (calc): 14"
    t3 = turn(fmt, "<think>The wiki says Seine.</think>\nANSWER: Seine")
    s.add_model_turn(t3, hit_limit=False)
    ep = s.to_episode()
    assert (ep.final_answer, ep.turns, ep.tool_hops, ep.clarifications, ep.truncated) == ("Seine", 3, 2, 0, False)
    assert ep.item_id == "t-1" and ep.task == "hotpotqa"
    # Generated tokens sit in input_ids exactly as generated, where action_mask is 1.
    assert [t for t, m in zip(ep.input_ids, ep.action_mask) if m] == t1 + t2 + t3
    assert len(ep.input_ids) == len(ep.action_mask) and ep.input_ids[:ep.prompt_len] == fmt.prompt_ids(ep.transcript[:2])
    # Token concatenation == what the chat template renders for the same conversation (no double <|im_end|>).
    rendered = fmt.render(as_rendered(ep.transcript), add_generation_prompt=False)
    assert rendered == fmt.tok.decode(ep.input_ids, skip_special_tokens=False) + "\n"
    assert ep.model_text.count("ANSWER: Seine") == 1 and "TOOL: wiki" in ep.model_text


def test_clarification_reveals_hidden_detail(fmt, item):
    it = item(needs_clarification=True, hidden_detail="I mean the capital as of 2020.")
    s = EpisodeState.start(it, fmt)
    s.add_model_turn(turn(fmt, "ASK: Which year do you mean?"), hit_limit=False)
    assert s.transcript[-1] == {"role": "user", "content": "USER: I mean the capital as of 2020."}
    s.add_model_turn(turn(fmt, "ANSWER: Seine"), hit_limit=False)
    assert s.to_episode().clarifications == 1 and s.final_answer == "Seine"
    # An item that needs nothing: the user says so (and the question still counts as a clarification).
    s = EpisodeState.start(item(), fmt)
    s.add_model_turn(turn(fmt, "ASK: Do you mean Paris, Texas?"), hit_limit=False)
    assert s.transcript[-1]["content"] == f"USER: {NO_CLARIFICATION_NEEDED}" and s.clarifications == 1


def test_max_turns_truncates(fmt, item):
    s = EpisodeState.start(item(max_turns=2), fmt)
    s.add_model_turn(turn(fmt, "TOOL: wiki Paris"), hit_limit=False)
    s.add_model_turn(turn(fmt, "TOOL: wiki Seine"), hit_limit=False)
    ep = s.to_episode()
    assert s.done and ep.truncated and ep.final_answer is None and ep.turns == 2 and ep.tool_hops == 1
    with pytest.raises(RuntimeError, match="already finished"):
        s.add_model_turn(turn(fmt, "ANSWER: x"), hit_limit=False)
    # The call's max_turns overrides the item's.
    assert EpisodeState.start(item(max_turns=2), fmt, max_turns=5).max_turns == 5


def test_turn_without_action(fmt, item):
    s = EpisodeState.start(item(), fmt)
    s.add_model_turn(turn(fmt, "The Seine flows through Paris."), hit_limit=False)
    assert s.done and s.final_answer == "The Seine flows through Paris" and not s.truncated
    s = EpisodeState.start(item(), fmt)  # several lines, no action: the answer is the last line, not the prose
    s.add_model_turn(turn(fmt, "Yes, rivers flow.\nSo the river is\nthe Seine"), hit_limit=False)
    assert s.final_answer == "the Seine"
    s = EpisodeState.start(item(), fmt)  # cut by max_new_tokens mid-sentence: truncated, no answer
    s.add_model_turn(turn(fmt, "The river that flows", eos=False), hit_limit=True)
    assert s.done and s.truncated and s.final_answer is None
    s = EpisodeState.start(item(), fmt)  # tokens after the end-of-turn token are dropped
    s.add_model_turn(turn(fmt, "ANSWER: Seine") + fmt.encode("garbage"), hit_limit=True)
    assert s.final_answer == "Seine" and not s.truncated and s.mask.count(1) == len(turn(fmt, "ANSWER: Seine"))


def test_unknown_and_unavailable_tools(fmt, item):
    s = EpisodeState.start(item(tools=["wiki"]), fmt)
    assert "TOOL: calc" not in s.transcript[0]["content"]
    s.add_model_turn(turn(fmt, "TOOL: calc 1+1"), hit_limit=False)
    assert s.transcript[-1]["content"] == "RESULT: unknown tool 'calc'; available: wiki"
    s.add_model_turn(turn(fmt, "TOOL: search Paris"), hit_limit=False)
    assert "unknown tool 'search'" in s.transcript[-1]["content"] and s.tool_hops == 2


def test_max_length_truncates(fmt, item):
    s = EpisodeState.start(item(), fmt, max_length=10_000)
    n = len(s.ids)
    s.max_length = n + 12
    assert s.room_for(64) == 12
    s.add_model_turn(turn(fmt, "TOOL: wiki Paris"), hit_limit=False)  # the wiki reply would not fit
    assert s.done and s.truncated


def test_think_opening_template(item):
    """A Qwen3-Thinking-like template whose generation prompt opens <think>."""
    from rc1.models.loader import load_tokenizer

    tok = load_tokenizer("random:qwen3-tiny")
    tok.chat_template = tok.chat_template.replace("{{- '<|im_start|>assistant\\n' -}}",
                                                  "{{- '<|im_start|>assistant\\n<think>\\n' -}}")
    fmt = ChatFormat(tok)
    assert fmt.starts_in_think
    s = EpisodeState.start(item(), fmt)
    s.add_model_turn(turn(fmt, "hmm, ANSWER: Berlin?\n</think>\nANSWER: Seine"), hit_limit=False)
    assert s.final_answer == "Seine"
    s = EpisodeState.start(item(), fmt)
    s.add_model_turn(turn(fmt, "still thinking ANSWER: x", eos=False), hit_limit=True)
    assert s.truncated and s.final_answer is None
