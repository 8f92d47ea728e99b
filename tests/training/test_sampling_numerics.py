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


def test_bf16_rollouts_of_an_fp32_policy_are_a_corrected_bf16_copy(tmp_path):
    """generation.rollout_dtype bf16: training stays fp32, a bf16 copy (weights only; the rotary buffer stays
    fp32) samples, and the mismatch is measured and corrected. Where the CPU has no native bf16 the config is
    refused instead (it would sample slower)."""
    from rc1.runtime.device import cpu_bf16_supported
    from rc1.runtime.errors import ConfigError

    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, "random:qwen3-tiny", extra={**SAMPLING, "generation.rollout_dtype": "bf16"})
    if not cpu_bf16_supported():
        with pytest.raises(ConfigError) as exc:
            load_train_config(conf, ws)
        assert [line for line in exc.value.lines if "rollout_dtype" in line and "native bf16" in line]
        return
    recipe = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf))
    recipe.setup()
    eng = recipe.engine
    assert eng.precision == "fp32" and eng.sampler_differs and recipe.strategy.is_cap == 2.0
    copy_, autocast = eng.generation_model()
    assert copy_ is not eng.model and not autocast
    assert {p.dtype for p in copy_.parameters()} == {torch.bfloat16}
    assert {b.dtype for n, b in copy_.named_buffers() if "inv_freq" in n} == {torch.float32}
    assert {p.dtype for p in eng.model.parameters()} == {torch.float32}
    batch = Batch(0, tuple(arithmetic_items(2)), 3)
    metrics = eng.backward(recipe.strategy.plan(batch, recipe.strategy.rollout(batch)), scale=1.0)
    assert metrics["sampler_mismatch_kl"] > 0.0  # bf16 and fp32 log-probs of the same tokens differ
    assert 0.0 < metrics["sampler/is_weight_mean"] <= 2.0
    from rc1.models import packed

    if packed.available() is None:  # the copy's linear layers run on packed weights that follow each refresh
        eng.optimizer_step()
        copy_, _ = eng.generation_model()
        lin = copy_.get_submodule("model.layers.0.mlp.down_proj")
        x = torch.randn(3, lin.in_features, dtype=torch.bfloat16)
        want = torch.nn.functional.linear(x, eng.model.get_submodule("model.layers.0.mlp.down_proj").weight.bfloat16())
        assert hasattr(lin, "rc1_packed") and torch.allclose(lin(x).float(), want.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("extra, why", [({"engine.name": "trl", "monitor.kl_control": "early_stop"},
                                         "applies to engine pure_pt"),
                                        ({"finetune.method": "qlora"}, "QLoRA's are 4-bit")])
def test_bf16_rollouts_are_refused_where_they_do_not_apply(tmp_path, extra, why):
    from rc1.runtime.errors import ConfigError

    conf = make_workspace(tmp_path, "random:qwen3-tiny", extra={"generation.rollout_dtype": "bf16", **extra})
    with pytest.raises(ConfigError) as exc:
        load_train_config(conf, Workspace(tmp_path))
    assert [line for line in exc.value.lines if "generation.rollout_dtype" in line and why in line]


def test_bf16_rollouts_are_refused_on_a_cpu_without_native_bf16(tmp_path, monkeypatch):
    from rc1.runtime import device
    from rc1.runtime.errors import ConfigError

    monkeypatch.setattr(device, "cpu_bf16_supported", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    conf = make_workspace(tmp_path, "random:qwen3-tiny", extra={"generation.rollout_dtype": "bf16"})
    with pytest.raises(ConfigError) as exc:
        load_train_config(conf, Workspace(tmp_path))
    assert [line for line in exc.value.lines if "rollout_dtype" in line and "native bf16" in line]


@pytest.mark.auto_rollout_dtype
def test_auto_rollouts_take_the_bf16_copy_only_where_the_cpu_has_native_bf16(tmp_path, monkeypatch):
    """generation.rollout_dtype auto: a bf16 copy samples a full or LoRA fine-tune's rollouts on a CPU with
    native bf16; the policy itself elsewhere, for 4-bit weights, for engine trl and for `policy`."""
    from rc1.runtime import device

    def cfg_for(choice, **kw):
        d = tmp_path / str(len(list(tmp_path.iterdir())))
        conf = make_workspace(d, "random:qwen3-tiny", extra={"generation.rollout_dtype": choice}, **kw)
        return load_train_config(conf, Workspace(d))

    auto = cfg_for("auto")
    monkeypatch.setattr(device, "cpu_bf16_supported", lambda: True)
    assert device.rollouts_from_bf16_copy(auto, "cpu", False)
    assert not device.rollouts_from_bf16_copy(auto, "cuda", False) and not device.rollouts_from_bf16_copy(auto, "mps", False)
    assert device.rollouts_from_bf16_copy(cfg_for("auto", method="lora"), "cpu", False)
    assert not device.rollouts_from_bf16_copy(cfg_for("policy"), "cpu", False)
    assert not device.rollouts_from_bf16_copy(cfg_for("auto", method="qlora"), "cpu", False)
    assert not device.rollouts_from_bf16_copy(cfg_for("auto", engine="trl"), "cpu", False)
    assert device.rollouts_from_bf16_copy(cfg_for("policy"), "cpu", True)  # under bf16 autocast, always the copy
    monkeypatch.setattr(device, "cpu_bf16_supported", lambda: False)
    assert not device.rollouts_from_bf16_copy(auto, "cpu", False)


def test_llamacpp_rollouts_of_a_lora_policy_swap_its_adapter_each_step_and_are_corrected(tmp_path):
    """generation.rollout_backend llamacpp: the base GGUF loaded once, the adapter written from the PEFT tensors
    and put on it before every rollout (time/sync_s); the episodes are llama.cpp's, their log-probs close to
    the trainer's (sampler_mismatch_kl) and importance-corrected; a second step samples the updated adapter."""
    pytest.importorskip("llama_cpp")
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, "random:qwen3-tiny", method="lora",
                          extra={**SAMPLING, "generation.rollout_backend": "llamacpp", "model.lora.r": 8})
    recipe = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf))
    recipe.setup()
    eng = recipe.engine
    assert eng.sampler_differs and not eng.bf16_copy and recipe.strategy.is_cap == 2.0
    for step in range(2):
        batch = Batch(step, tuple(arithmetic_items(2)), 3)
        ro = recipe.strategy.rollout(batch)
        assert {e.backend for e in ro.episodes} == {"llamacpp"} and eng._adapter.syncs == step + 2  # + the check's
        metrics = eng.backward(recipe.strategy.plan(batch, ro), scale=1.0)
        eng.optimizer_step()
        assert 0.0 <= metrics["sampler_mismatch_kl"] < 0.05, metrics
        assert 0.0 < metrics["sampler/is_weight_mean"] <= 2.0
        assert eng.spans.drain()["time/sync_s"] > 0


@pytest.mark.parametrize("extra, why", [({"finetune.method": "full"}, "needs finetune.method lora"),
                                        ({"distributed.processes": 2}, "runs in one process")])
def test_llamacpp_rollouts_are_refused_where_they_do_not_apply(tmp_path, extra, why):
    from rc1.runtime.errors import ConfigError

    conf = make_workspace(tmp_path, "random:qwen3-tiny", method="lora",
                          extra={"generation.rollout_backend": "llamacpp", **extra})
    with pytest.raises(ConfigError) as exc:
        load_train_config(conf, Workspace(tmp_path))
    assert [line for line in exc.value.lines if "generation.rollout_backend" in line and why in line]
