"""Plain single-turn items (no protocol) and the rollout sampler."""

from __future__ import annotations

import torch

from rc1.envs.env import ChatFormat, EpisodeState, episode_messages
from rc1.envs.rollout import sample_tokens, generate_episodes
from tests.envs.test_envs_rollout import ScriptedLM


def _plain(**over) -> dict:
    item = {"id": "p-1", "task": "add_sub", "verifier": "numeric", "single_turn": True, "answer": "42",
            "messages": [{"role": "user", "content": "Sam has 40 shells and finds 2 more. How many shells does "
                                                     "Sam have now? Reply with only the final number."}]}
    item.update(over)
    return item


def test_single_turn_prompt_is_the_items_messages(tiny_tokenizer, item):
    plain = _plain()
    assert episode_messages(plain) == plain["messages"]  # no protocol system prompt
    protocol = episode_messages(item(messages=plain["messages"]))
    assert protocol[0]["role"] == "system" and "ANSWER:" in protocol[0]["content"]
    fmt = ChatFormat(tiny_tokenizer)
    state = EpisodeState.start(plain, fmt, max_turns=4)
    ids = tiny_tokenizer.apply_chat_template(plain["messages"], add_generation_prompt=True, tokenize=True,
                                             return_dict=True)["input_ids"]
    assert state.ids == list(ids) and state.max_turns == 1  # what a plain trainer (TRL) feeds the model


def test_single_turn_answer_is_the_visible_text_and_never_an_action(tiny_tokenizer):
    from rc1.envs.verifiers import verify_episode

    fmt = ChatFormat(tiny_tokenizer)
    eos = tiny_tokenizer.eos_token_id

    def episode(text: str, *, ended: bool = True):
        state = EpisodeState.start(_plain(), fmt)
        state.add_model_turn(fmt.encode(text) + ([eos] if ended else []), hit_limit=not ended)
        assert state.done and state.turns == 1
        return state.to_episode()

    assert verify_episode(_plain(), episode("42")).success
    assert verify_episode(_plain(), episode("40 + 2 = 42")).success
    wrong = episode("TOOL: calc 40+2")  # a protocol line is just text here: no tool runs, no second turn
    assert (wrong.final_answer, wrong.tool_hops, wrong.transcript[-1]["role"]) == ("TOOL: calc 40+2", 0, "assistant")
    assert not verify_episode(_plain(), wrong).success
    cut = episode("The answer is 42 because", ended=False)  # stopped at max_new_tokens: fails, whatever it says
    assert cut.truncated and cut.final_answer is None and not verify_episode(_plain(), cut).success


def test_single_turn_rollout_does_not_stop_at_an_action_line(tiny_tokenizer, item):
    tok = tiny_tokenizer
    model = ScriptedLM(tok, ["TOOL: calc 40+2\n42"])
    protocol, plain = item(id="a", max_turns=1), _plain(id="b")
    a, b = generate_episodes(model, tok, [protocol, plain], greedy=True, max_new_tokens=32)
    assert a.model_text == "TOOL: calc 40+2\n" and a.truncated  # the protocol item stops at its action line
    assert b.model_text == "TOOL: calc 40+2\n42" and (b.turns, b.tool_hops, b.final_answer) == (1, 0, "42")


def test_sampler_draws_in_proportion_and_never_a_zero_probability_token():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2, 0.0], [0.0, 0.0, 1.0, 0.0]]))
    gen = torch.Generator().manual_seed(3)
    rows = logits.repeat(2000, 1)  # 2000 draws of each row in one call
    nxt, logp = sample_tokens(rows, greedy=False, temperature=1.0, top_p=1.0, generator=gen)
    assert torch.allclose(logp, torch.log_softmax(rows, -1).gather(-1, nxt[:, None]).squeeze(-1))
    first, second = nxt[0::2], nxt[1::2]
    freq = torch.bincount(first, minlength=4) / 2000
    assert torch.allclose(freq, torch.tensor([0.5, 0.3, 0.2, 0.0]), atol=0.04), freq  # sd <= 0.012
    assert freq[3] == 0 and second.eq(2).all()
    # the same generator state gives the same draws (exact resume depends on it)
    a = sample_tokens(logits, greedy=False, temperature=0.7, top_p=1.0, generator=torch.Generator().manual_seed(9))
    b = sample_tokens(logits, greedy=False, temperature=0.7, top_p=1.0, generator=torch.Generator().manual_seed(9))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_single_turn_logprobs_equal_a_full_forward(tiny_model):
    """The rollout's log-probs (one prefill per group, the last position's logits kept by index, the CDF
    sampler, top-p) are the log-probs of a plain forward over each finished sequence."""
    from rc1.envs.sampling import sampling_logprobs

    model, tok = tiny_model
    items = [_plain(id="a"), _plain(id="b", messages=[{"role": "user", "content": "1+1? Reply with only the final number."}])]
    eps = generate_episodes(model, tok, items, num_generations=3, max_new_tokens=6, seed=5, temperature=0.8, top_p=0.9)
    assert len({len(e.input_ids) - len(e.logprobs) for e in eps}) == 2  # two prompt lengths: left padding in the batch
    for ep in eps:
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([ep.input_ids])).logits[0].float()
        logp = sampling_logprobs(logits[:-1], 0.8, 0.9)
        per_token = logp.gather(-1, torch.tensor(ep.input_ids[1:])[:, None]).squeeze(-1)
        recomputed = per_token[[i - 1 for i, m in enumerate(ep.action_mask) if m]]
        assert torch.isfinite(recomputed).all()
        assert torch.allclose(recomputed, torch.tensor(ep.logprobs), atol=1e-4), (recomputed, ep.logprobs)
