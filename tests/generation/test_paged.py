"""generation.rollout_backend paged: engine pure_pt's training rollouts through transformers' continuous batching
(generate_batch) keep rc1's decoder contract (token ids in and out, its turn rule and token limits, its greedy
tokens, seeded sampling), are importance-corrected as another sampler's, fall back to torch with one line when
generate_batch fails, and the config refuses what it cannot run."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from rc1.config.load import load_train_config
from rc1.engines.contract import Batch
from rc1.envs.env import ChatFormat
from rc1.envs.rollout import StopRule, decode_batch, eos_ids, stops_here
from rc1.generation import SamplingParams
from rc1.generation.paged import PagedSampler
from rc1.runtime.workspace import Workspace
from rc1.training.base import make_recipe
from tests.helpers.items import arithmetic_items
from tests.helpers.workspace import make_workspace

ITEMS = [{"id": f"q{i}", "task": "gsm8k", "question": q, "answer": "4", "tools": ["calc"], "corpus": []}
         for i, q in enumerate(["What is 2+2?", "How many legs do 7 spiders have?", "Is a tomato a fruit?"])]


@pytest.fixture(scope="module")
def tiny():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rc1.models.loader import resolve_base

    path = resolve_base("random:qwen3-tiny")
    tok = AutoTokenizer.from_pretrained(str(path))
    model = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
    return model, tok, ChatFormat(tok, eos_ids(model, tok))


def _prompts(fmt, n: int = 4) -> list[list[int]]:
    texts = ["What is 2+2?", "Name a prime number.", "Is a tomato a fruit? Answer briefly.", "Hello"]
    return [fmt.tok.apply_chat_template([{"role": "user", "content": t}], add_generation_prompt=True, tokenize=True,
                                        return_dict=False) for t in texts[:n]]


def test_paged_rows_end_where_rc1s_turn_rule_ends_them_within_each_rows_limit(tiny):
    """Each row is cut at its own limit (generate_batch takes one) or at an end-of-turn id, and nowhere earlier."""
    model, tok, fmt = tiny
    prompts = _prompts(fmt)
    limits = [3, 9, 5, 9]
    rule = StopRule(fmt)
    ids, lps, hit = PagedSampler(model, tok, fmt.eos_ids).decode_batch(
        rule, prompts, limits, [True, False, True, False], greedy=False, temperature=0.9, top_p=0.95,
        generator=torch.Generator().manual_seed(1))
    for row, lp, h, limit, stop in zip(ids, lps, hit, limits, [True, False, True, False]):
        assert 1 <= len(row) <= limit and len(lp) == len(row) and all(x <= 0 for x in lp)
        assert stops_here(rule, row, stop, limit) == (True, h)
        assert not any(stops_here(rule, row[:k], stop, limit)[0] for k in range(1, len(row)))


def test_paged_greedy_tokens_are_rc1s_decoders_and_so_are_their_logprobs(tiny):
    model, tok, fmt = tiny
    prompts = _prompts(fmt)
    kw = dict(greedy=True, temperature=1.0, top_p=1.0, generator=None)
    got = PagedSampler(model, tok, fmt.eos_ids).decode_batch(StopRule(fmt), prompts, [12] * 4, [True] * 4, **kw)
    with torch.no_grad():
        ref = decode_batch(model, fmt, prompts, max_new_tokens=[12] * 4, stop_at_action=True, **kw)
    assert got[0] == ref[0] and got[2] == ref[2]
    torch.testing.assert_close(torch.tensor(got[1]), torch.tensor(ref[1]), atol=1e-4, rtol=0)


def test_paged_sampling_is_seeded_and_leaves_the_trainers_rng_alone(tiny):
    """The same seed samples the same episodes, another seed others; torch's global RNG (which continuous
    batching reseeds for its multinomial draws) is as it was. Temperature and top-p are rc1's."""
    model, tok, _ = tiny
    sampler = PagedSampler(model, tok, eos_ids(model, tok))
    params = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=10, seed=3, batch_size=6, max_turns=1)
    state = torch.get_rng_state()
    first = sampler.episodes(ITEMS[:2], num_generations=2, params=params)
    assert torch.equal(torch.get_rng_state(), state)
    again = sampler.episodes(ITEMS[:2], num_generations=2, params=params)
    other = sampler.episodes(ITEMS[:2], num_generations=2, params=SamplingParams(**{**params.__dict__, "seed": 4}))
    assert {e.backend for e in first} == {"paged"}
    assert [e.input_ids for e in again] == [e.input_ids for e in first] != [e.input_ids for e in other]
    # each recorded log-prob is the token's under softmax(logits / 0.7) over the 0.9 nucleus
    from rc1.envs.sampling import sampling_logprobs

    for ep in first:
        ids = torch.tensor([ep.input_ids])
        with torch.no_grad():
            logp = sampling_logprobs(model(input_ids=ids).logits[0, :-1].float(), 0.7, 0.9)
        mask = torch.tensor(ep.action_mask[1:], dtype=torch.bool)
        ref = logp[mask].gather(-1, ids[0, 1:][mask][:, None]).squeeze(-1)
        torch.testing.assert_close(torch.tensor(ep.logprobs), ref, atol=1e-4, rtol=0)


def test_a_turn_is_cut_at_its_first_action_line_as_rc1s_decoder_cuts_it(tiny):
    """generate_batch runs on past the action line (it stops only at end-of-turn ids): the kept tokens end at the
    newline after it, with their own log-probs, so the tool's result is never the model's."""
    model, tok, _ = tiny
    script = iter(["TOOL: calc 2+2\nand then I keep talking", "ANSWER: 4\n"])

    def fake_generate_batch(inputs, generation_config=None, continuous_batching_config=None, **_):
        outs = {}
        for i, _prompt in enumerate(inputs):
            ids = tok(next(script), add_special_tokens=False)["input_ids"][:generation_config.max_new_tokens]
            outs[f"req_{i}"] = SimpleNamespace(generated_tokens=ids, logprobs=[-0.5 - k for k in range(len(ids))],
                                               error=None)
        return outs

    fake = SimpleNamespace(generate_batch=fake_generate_batch, parameters=model.parameters)
    (ep,) = PagedSampler(fake, tok, [tok.eos_token_id]).episodes(
        ITEMS[:1], num_generations=1, params=SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=40, seed=3))
    first = ep.transcript[2]["content"]
    assert first.startswith("TOOL: calc 2+2") and "keep talking" not in first
    assert "RESULT (calc): 4" in ep.transcript[3]["content"] and ep.final_answer == "4" and ep.turns == 2
    assert len(ep.logprobs) == sum(ep.action_mask)


def _recipe(tmp_path, **extra):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, "random:qwen3-tiny", method=extra.pop("method", "full"),
                          extra={"model.temperature": 0.7, "model.top_p": 0.8, "generation.rollout_backend": "paged",
                                 **extra})
    recipe = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf))
    recipe.setup()
    return recipe


def test_paged_training_rollouts_are_corrected_as_another_samplers(tmp_path):
    """A LoRA policy's rollouts come from generate_batch (with the adapter on), are importance-corrected, and
    their log-probs are close to the trainer's (sampler_mismatch_kl)."""
    recipe = _recipe(tmp_path, method="lora", **{"model.lora.r": 8})
    eng = recipe.engine
    assert eng.sampler_differs and recipe.strategy.is_cap == 2.0
    batch = Batch(0, tuple(arithmetic_items(2)), 3)
    ro = recipe.strategy.rollout(batch)
    assert {e.backend for e in ro.episodes} == {"paged"} and eng.sampled_by == "paged"
    metrics = eng.backward(recipe.strategy.plan(batch, ro), scale=1.0)
    assert 0.0 <= metrics["sampler_mismatch_kl"] < 0.05, metrics
    assert 0.0 < metrics["sampler/is_weight_mean"] <= 2.0
    assert eng.spans.drain()["time/generate_s"] > 0


def test_under_mixed_precision_paged_rollouts_sample_a_copy_in_the_autocast_dtype(tmp_path, monkeypatch):
    """Autocast is thread-local and generate_batch decodes in its own thread: under bf16 autocast (as on a GPU:
    no CPU bf16 copy) the sampler gets a bf16 copy of the policy, refreshed from it; evals keep the policy."""
    from rc1.runtime import device

    monkeypatch.setattr(device, "rollouts_from_bf16_copy", lambda *a: False)
    recipe = _recipe(tmp_path, **{"run.mixed_precision": "bf16"})
    eng = recipe.engine
    model, amp = eng.generation_model(for_paged=True)
    assert eng.generation_model() == (eng.model, True)
    if eng.precision != "bf16":  # a CPU without bf16: no autocast, the policy samples as it trains
        assert (model, amp) == (eng.model, True)
        return
    assert model is not eng.model and not amp and {p.dtype for p in model.parameters()} == {torch.bfloat16}
    with torch.no_grad():
        next(eng.model.parameters()).add_(1.0)
    assert torch.equal(next(eng.generation_model(for_paged=True)[0].parameters()),
                       next(eng.model.parameters()).to(torch.bfloat16))
    episodes = eng.rollout(arithmetic_items(1), 2, seed=0)
    assert {e.backend for e in episodes} == {"paged"}


def test_a_failing_generate_batch_falls_back_to_torch_with_one_line(tmp_path, monkeypatch, caplog):
    from transformers.generation.continuous_batching import ContinuousMixin

    def broken(self, *a, **kw):
        raise RuntimeError("paged attention kernel missing\nsecond line of the trace")

    monkeypatch.setattr(ContinuousMixin, "generate_batch", broken)
    recipe = _recipe(tmp_path)
    eng = recipe.engine
    with caplog.at_level("WARNING", logger="rc1.engine"):
        for step in range(2):
            episodes = eng.rollout(arithmetic_items(2), 2, seed=step)
            assert {e.backend for e in episodes} == {"torch"} and eng.sampled_by == "torch"
    lines = [r.getMessage() for r in caplog.records if "rollout_backend paged" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0] and "paged attention kernel missing" in lines[0]
    assert eng.sampler_differs  # the correction stays on: the run was configured for another sampler


@pytest.mark.parametrize("extra, why", [({"finetune.method": "qlora"}, "needs finetune.method full or lora"),
                                        ({"engine.name": "trl", "monitor.kl_control": "none"},
                                         "applies to engine pure_pt's rollouts"),
                                        ({"distributed.processes": 2, "distributed.sharding": "fsdp2"},
                                         "needs unsharded weights")])
def test_paged_rollouts_are_refused_where_they_do_not_apply(tmp_path, extra, why):
    from rc1.runtime.errors import EXIT_CONFIG, ConfigError

    conf = make_workspace(tmp_path, "random:qwen3-tiny", method="lora",
                          extra={"generation.rollout_backend": "paged", **extra})
    with pytest.raises(ConfigError) as exc:
        load_train_config(conf, Workspace(tmp_path))
    lines = [line for line in exc.value.lines if "generation.rollout_backend" in line]
    assert len(lines) == 1 and why in lines[0] and "\n" not in lines[0], exc.value.lines
    assert exc.value.exit_code == EXIT_CONFIG
