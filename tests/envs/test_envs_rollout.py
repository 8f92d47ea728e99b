"""Batched rollouts: reproducibility, logprob consistency, multi-turn loop."""

from __future__ import annotations

import torch

from rc1.envs.rollout import generate_episodes


def test_same_seed_same_episodes(tiny_model, item):
    model, tok = tiny_model
    items = [item(id="a"), item(id="b", question="What is 2+3?", messages=[{"role": "user", "content": "2+3?"}])]
    kw = dict(num_generations=3, max_new_tokens=6, batch_size=4, temperature=1.0)
    first = generate_episodes(model, tok, items, seed=7, **kw)
    again = generate_episodes(model, tok, items, seed=7, **kw)
    other = generate_episodes(model, tok, items, seed=8, **kw)
    assert [e.item_id for e in first] == ["a", "a", "a", "b", "b", "b"]  # copies consecutive, in item order
    assert [e.input_ids for e in first] == [e.input_ids for e in again]
    assert [e.logprobs for e in first] == [e.logprobs for e in again]
    assert [e.input_ids for e in first] != [e.input_ids for e in other]
    assert len({tuple(e.input_ids) for e in first[:3]}) == 3  # sampled copies differ
    # A generator is used as is and advanced: saving its state reproduces the next rollout (exact resume).
    gen = torch.Generator().manual_seed(11)
    state = gen.get_state()
    one = generate_episodes(model, tok, items, generator=gen, **kw)
    two = generate_episodes(model, tok, items, generator=gen, **kw)
    gen.set_state(state)
    replay = generate_episodes(model, tok, items, generator=gen, **kw)
    assert [e.input_ids for e in one] != [e.input_ids for e in two]
    assert [e.input_ids for e in one] == [e.input_ids for e in replay]
    # Greedy needs no seed and is deterministic; the model's train/eval mode is restored.
    model.train()
    g1 = generate_episodes(model, tok, items, greedy=True, max_new_tokens=6)
    assert model.training
    model.eval()
    assert [e.input_ids for e in g1] == [e.input_ids for e in generate_episodes(model, tok, items, greedy=True,
                                                                                max_new_tokens=6)]


def test_logprobs_recomputed_on_input_ids_match_generation(tiny_model, item):
    model, tok = tiny_model
    items = [item(id="a"), item(id="b", messages=[{"role": "user", "content": "Short?"}])]  # different lengths: padding
    eps = generate_episodes(model, tok, items, num_generations=2, max_new_tokens=8, seed=3, temperature=0.7)
    for ep in eps:
        assert ep.truncated and ep.final_answer is None and ep.turns == 1  # random weights never finish
        assert len(ep.input_ids) == len(ep.action_mask) == ep.prompt_len + 8
        assert ep.action_mask == [0] * ep.prompt_len + [1] * 8 and len(ep.logprobs) == 8
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([ep.input_ids])).logits[0].float()
        logp = torch.log_softmax(logits[:-1] / 0.7, dim=-1)
        targets = torch.tensor(ep.input_ids[1:])
        per_token = logp.gather(-1, targets[:, None]).squeeze(-1)
        gen_positions = [i - 1 for i, m in enumerate(ep.action_mask) if m]
        recomputed = per_token[gen_positions]
        assert torch.isfinite(recomputed).all()
        assert torch.allclose(recomputed, torch.tensor(ep.logprobs), atol=1e-4), (recomputed, ep.logprobs)


def test_top_p_keeps_only_the_nucleus(tiny_model, item):
    from rc1.envs.rollout import sample_tokens

    logits = torch.tensor([[5.0, 4.0, -3.0, -4.0]])
    gen = torch.Generator().manual_seed(0)
    picks = {int(sample_tokens(logits, greedy=False, temperature=1.0, top_p=0.5, generator=gen)[0]) for _ in range(50)}
    assert picks == {0}
    picks = {int(sample_tokens(logits, greedy=False, temperature=1.0, top_p=0.99, generator=gen)[0]) for _ in range(200)}
    assert picks == {0, 1}


class ScriptedLM(torch.nn.Module):
    """TEST DOUBLE of a causal LM: it writes a fixed script per assistant turn, through the real
    KV-cache interface. The token history of each row rides in the cache (as fake keys), so the
    rollout loop's batch shrinking (cache row selection) is exercised for real."""

    def __init__(self, tok, turns: list[str], alt: tuple[str, list[str]] | None = None):
        super().__init__()
        from transformers import Qwen3Config

        self.config = Qwen3Config(num_hidden_layers=1, vocab_size=len(tok), hidden_size=8, num_attention_heads=1,
                                  num_key_value_heads=1, head_dim=8, intermediate_size=8)
        self.generation_config = type("G", (), {"eos_token_id": tok.eos_token_id})()
        self.anchor = torch.nn.Parameter(torch.zeros(1))
        self.header = tok("<|im_start|>assistant\n", add_special_tokens=False)["input_ids"]
        self.tok = tok
        self.turns = self._ids(turns)
        # rows whose prompt contains alt[0] follow the script alt[1] (rows then finish at different steps)
        self.alt = (tok(alt[0], add_special_tokens=False)["input_ids"], self._ids(alt[1])) if alt else None
        self.vocab = len(tok)

    def _ids(self, turns):
        return [self.tok(t, add_special_tokens=False)["input_ids"] + [self.tok.eos_token_id] for t in turns]

    def forward(self, input_ids, attention_mask=None, position_ids=None, cache=None, use_cache=True,
                logits_to_keep=0, past_key_values=None):
        # the KV cache by either name: rc1 passes the installed transformers' (hf_compat)
        cache = cache if cache is not None else past_key_values
        fake = input_ids[:, None, :, None].float()
        history = cache.update(fake, fake, 0)[0][:, 0, :, 0].long()
        logits = torch.full((input_ids.shape[0], 1, self.vocab), -30.0)
        h = len(self.header)
        for r, row in enumerate(history.tolist()):
            starts = [i + h for i in range(len(row) - h + 1) if row[i:i + h] == self.header]
            if not starts:  # a prefix shared by the batch's prompts: its logits are not used
                continue
            turns = self.turns
            if self.alt and any(row[i:i + len(self.alt[0])] == self.alt[0] for i in range(len(row))):
                turns = self.alt[1]
            script = turns[min(len(starts), len(turns)) - 1]
            k = len(row) - starts[-1]
            logits[r, 0, script[min(k, len(script) - 1)]] = 30.0
        return type("Out", (), {"logits": logits})()


def test_multi_turn_loop_with_tools_and_stop_at_action(tiny_tokenizer, item):
    tok = tiny_tokenizer
    script = ["Look it up.\nTOOL: wiki Seine\nRESULT (wiki): made-up text the model must not get to write",
              "TOOL: calc 6*7\n", "ANSWER: Seine"]
    chatty = ["Hmm. " * 5 + "\nTOOL: wiki Seine\n", "Let me compute this now.\nTOOL: calc 6*7\n", "ANSWER: Seine"]
    model = ScriptedLM(tok, script, alt=("Where?", chatty))
    items = [item(id="a"), item(id="b", messages=[{"role": "user", "content": "Where?"}]), item(id="c", max_turns=2)]
    eps = generate_episodes(model, tok, items, num_generations=2, greedy=True, max_new_tokens=48, batch_size=4)
    assert eps[2].model_text.startswith("Hmm. Hmm.") and not eps[0].model_text.startswith("Hmm")
    for ep in eps[:4]:
        assert (ep.turns, ep.tool_hops, ep.final_answer, ep.truncated) == (3, 2, "Seine", False)
        assert "made-up" not in ep.model_text  # generation stopped at the end of the action line
        assert [m["role"] for m in ep.transcript] == ["system", "user", "assistant", "tool", "assistant", "tool",
                                                      "assistant"]
        assert ep.transcript[3]["content"].startswith("RESULT (wiki): ")
        assert ep.transcript[5]["content"] == "RESULT (calc): 42"
        assert len(ep.logprobs) == sum(ep.action_mask)
    for ep in eps[4:]:  # max_turns=2: the second action cannot be followed up
        assert (ep.turns, ep.truncated, ep.final_answer) == (2, True, None)


def test_rollout_from_a_training_lora_model(item):
    """The engine's case: a LoRA model in train mode with gradient checkpointing and use_cache off."""
    from rc1.config.schema import TrainConfig
    from rc1.models.loader import load_model

    model, tok = load_model(TrainConfig(model={"base": "random:qwen3-tiny", "lora": {"r": 4}}),
                            device=torch.device("cpu"), for_training=True)
    assert model.training and model.config.use_cache is False
    eps = generate_episodes(model, tok, [item()], num_generations=2, max_new_tokens=5, seed=1)
    assert model.training  # restored after rollouts (which run in eval mode, with the KV cache)
    assert all(len(e.logprobs) == 5 and e.truncated for e in eps)
    out = model(input_ids=torch.tensor([eps[0].input_ids]))
    out.logits.float().log_softmax(-1)[0, -2, eps[0].input_ids[-1]].backward()  # differentiable on input_ids
    assert any(p.grad is not None for n, p in model.named_parameters() if "lora_" in n)


def test_the_kv_cache_goes_by_the_name_the_installed_transformers_defines(tiny_model, item, monkeypatch):
    """transformers 5.24 renamed `past_key_values` to `cache` (the old name warns, and goes in 5.40): a rollout passes
    the cache by the installed version's name, and the name follows the version."""
    import warnings

    import transformers

    from rc1.runtime import hf_compat

    model, tok = tiny_model
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        generate_episodes(model, tok, [item(id="a")], num_generations=2, max_new_tokens=4, seed=1)
    try:
        for version, name in (("5.23.0", "past_key_values"), ("5.24.0", "cache"), ("6.0.0.dev0", "cache")):
            hf_compat.cache_name.cache_clear()
            monkeypatch.setattr(transformers, "__version__", version)
            assert hf_compat.with_cache("kv") == {name: "kv"}
            assert hf_compat.cache_of({name: "kv"}) == "kv"
    finally:
        hf_compat.cache_name.cache_clear()  # later tests read the installed version's name again


def test_the_prefix_all_prompts_share_is_prefilled_once_and_changes_no_token(tiny_model):
    from rc1.envs.env import ChatFormat
    from rc1.envs.rollout import MIN_SHARED_PREFIX, decode_batch, eos_ids

    model, tok = tiny_model
    fmt = ChatFormat(tok, eos_ids(model, tok))
    system = list(range(100, 100 + MIN_SHARED_PREFIX + 4))           # the shared prefix (a system prompt)
    rests = [[7, 8, 9], [11], [12, 13, 14, 15, 16]]                   # rests of different lengths: pads in between
    prompts = [system + r for r in rests for _ in range(2)]          # two copies each, as a GRPO group
    shapes = []
    forward = model.forward

    def recording(*args, **kwargs):
        shapes.append(tuple(kwargs["input_ids"].shape))
        return forward(*args, **kwargs)

    kw = dict(max_new_tokens=[6] * len(prompts), greedy=True, temperature=1.0, top_p=1.0, generator=None,
              stop_at_action=False)
    model.forward = recording
    try:
        with torch.inference_mode():
            ids, logps, _ = decode_batch(model, fmt, prompts, **kw)
    finally:
        del model.forward
    assert shapes[0] == (1, len(system)) and shapes[1] == (3, 5)     # the prefix once, then each distinct rest
    for prompt, got, got_logp in zip(prompts, ids, logps):
        with torch.inference_mode():
            alone, alone_logp, _ = decode_batch(model, fmt, [prompt], **{**kw, "max_new_tokens": [6]})
        assert got == alone[0]
        assert torch.allclose(torch.tensor(got_logp), torch.tensor(alone_logp[0]), atol=1e-4)
