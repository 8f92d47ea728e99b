"""Sampling and training compute one distribution: temperature and top-p in both (rc1.envs.sampling), the
sampler's numerics detected (a bf16 sampling copy) and corrected, PPO's ratio exactly 1 at the start of
its first epoch under the production sampling settings."""

from __future__ import annotations

import pytest
import torch

from rc1.config.load import load_train_config
from rc1.engines.contract import Batch
from rc1.engines.pure_pt import PurePTEngine
from rc1.envs.sampling import nucleus_mask, sampling_logits
from rc1.runtime.workspace import Workspace
from rc1.strategies.common import collate
from rc1.training.base import make_recipe
from tests.helpers.items import arithmetic_items
from tests.helpers.workspace import make_workspace

SAMPLING = {"model.temperature": 0.7, "model.top_p": 0.8}


def test_nucleus_by_hand():
    logits = torch.tensor([[5.0, 4.0, -3.0, -4.0], [1.0, 1.0, 0.0, -9.0]])
    # row 0: p = .731 .269 .0007 .0002 -> top_p .5 keeps the top token, .99 the top two
    assert nucleus_mask(logits[:1], 0.5).tolist() == [[True, False, False, False]]
    assert nucleus_mask(logits[:1], 0.99).tolist() == [[True, True, False, False]]
    # row 1: two tied top tokens: both kept even when the first alone reaches top_p
    assert nucleus_mask(logits[1:], 0.3).tolist() == [[True, True, False, False]]
    assert nucleus_mask(logits, 1.0).all()
    # a scored token outside the nucleus stays in the support (finite log-prob); the rest renormalises
    masked = sampling_logits(logits[:1], 1.0, 0.5, keep=torch.tensor([2]))
    assert torch.isfinite(masked).tolist() == [[True, False, True, False]]
    lp = torch.log_softmax(sampling_logits(logits[:1] * 2, temperature=2.0, top_p=0.99), -1)
    assert lp[0, :2].exp().sum() == pytest.approx(1.0) and lp[0, 0] == pytest.approx(-0.3133, abs=1e-4)


@pytest.fixture
def engine(tmp_path):
    ws = Workspace(tmp_path)
    cfg = load_train_config(make_workspace(tmp_path, "random:qwen3-tiny", extra=SAMPLING), ws)
    eng = PurePTEngine(ws)
    eng.setup(cfg)
    return eng


def test_training_log_probs_equal_the_samplers_under_temperature_and_top_p(engine):
    episodes = engine.rollout(arithmetic_items(2), 3, seed=5)
    t = collate(engine, episodes)
    act = t.action_mask > 0
    assert t.sample_logp is not None and int(act.sum()) == sum(len(e.logprobs) for e in episodes) > 0
    with torch.no_grad():
        for hidden in (False, True):  # the shared-prompt forward and the plain one
            out = engine.forward(t.input_ids, t.attention_mask, positions=t.action_mask, hidden=hidden,
                                 temperature=0.7, top_p=0.8)
            torch.testing.assert_close(out.logp[act], t.sample_logp[act], atol=1e-4, rtol=1e-4)
        # the check can fail: scoring without the nucleus (or the temperature) gives other log-probs
        no_top_p = engine.forward(t.input_ids, t.attention_mask, positions=t.action_mask, temperature=0.7)
        no_temp = engine.forward(t.input_ids, t.attention_mask, positions=t.action_mask, top_p=0.8)
    assert (no_top_p.logp[act] - t.sample_logp[act]).abs().max() > 1e-2
    assert (no_temp.logp[act] - t.sample_logp[act]).abs().max() > 1e-2


def test_a_bf16_sampling_copy_is_detected_and_corrected(tmp_path):
    """The engine says whether it samples from a copy with other numerics; GRPO then reweights (and logs
    the weights); with the trainer's own model it does not. On a CPU without bf16 the copy is never made."""
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, "random:qwen3-tiny", extra={**SAMPLING, "run.mixed_precision": "bf16"})
    recipe = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf))
    recipe.setup()
    eng = recipe.engine
    differs = eng.precision == "bf16"
    assert eng.sampler_differs == differs
    assert (eng.generation_model()[0] is not eng.model) == differs
    assert recipe.strategy.is_cap == (2.0 if differs else None)
    batch = Batch(0, tuple(arithmetic_items(2)), 3)
    metrics = eng.backward(recipe.strategy.plan(batch, recipe.strategy.rollout(batch)), scale=1.0)
    assert metrics["sampler_mismatch_kl"] >= 0.0
    assert ("sampler/is_weight_mean" in metrics) == differs


def test_ppo_ratio_is_exactly_one_at_the_start_of_epoch_one_with_production_sampling(tmp_path):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, "random:qwen3-tiny", strategy="ppo", method="lora", extra={
        **SAMPLING, "model.lora.dropout": 0.3, "strategy.ppo_epochs": 2})
    recipe = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf))
    recipe.setup()
    batch = Batch(0, tuple(arithmetic_items(2)), 5)
    plan = recipe.strategy.plan(batch, recipe.strategy.rollout(batch))
    metrics = recipe.engine.backward(plan, scale=1.0)
    assert metrics["ratio"] == 1.0 and metrics["clip_frac"] == 0.0 and metrics["policy_kl"] == 0.0
    recipe.engine.optimizer_step()
    moved = recipe.engine.backward(plan, scale=1.0)  # epoch 2 after an update: the ratio moves
    assert moved["ratio"] != 1.0 and moved["policy_kl"] > 0.0
