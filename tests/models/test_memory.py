"""rc1.models.memory: the step-memory arithmetic, the worst step a config allows, and the knobs that fit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from rc1.config.schema import TrainConfig
from rc1.models.memory import (
    GB,
    LAYER_BACKWARD,
    LOGITS,
    NF4_BYTES_PER_PARAM,
    OPTIMIZER,
    Calibration,
    MemoryPlan,
    estimate,
    knobs_that_fit,
    layer_activation_bytes,
    plan_from_config,
)
from rc1.models.shapes import QWEN3_4B

CAL = Calibration(overhead_bytes=0.5 * GB, layer_gc=2.0, layer_nogc=1.0, logits_copies=3.0,
                  embedding_grad_copies=2.0, source="test")
P = QWEN3_4B.params


def _plan(**over) -> MemoryPlan:
    base = dict(method="full", device="cpu", precision="fp32", sequences=4, seq_len=512, action_tokens=128,
                gen_rows=4, gen_prompts=2, gradient_checkpointing=True, lora_r=16, reference=True)
    return MemoryPlan(**{**base, **over})


def test_resident_terms_are_exact_bytes_per_parameter():
    full = estimate(QWEN3_4B, _plan(), CAL).phases[OPTIMIZER]
    assert full["weights"] == 4 * P and full["reference copy"] == 4 * P      # fp32 master + frozen reference
    assert full["gradients"] == 4 * P and full["optimizer (AdamW)"] == 8 * P  # exp_avg + exp_avg_sq
    lora = estimate(QWEN3_4B, _plan(method="lora"), CAL).phases[OPTIMIZER]
    n_lora = QWEN3_4B.lora_params(16, list(_plan().lora_targets))
    assert "reference copy" not in lora                                       # adapters disabled = the reference
    assert lora["weights"] == 4 * P and lora["gradients"] == 4 * n_lora and lora["optimizer (AdamW)"] == 8 * n_lora
    q = estimate(QWEN3_4B, _plan(method="qlora"), CAL).phases[OPTIMIZER]
    lin = QWEN3_4B.layers * QWEN3_4B.layer_linear_params
    assert q["weights"] == pytest.approx(NF4_BYTES_PER_PARAM * lin + 4 * (P - lin))
    assert 3.3 * GB < q["weights"] < 3.5 * GB                                  # 3.6B nf4 + 0.39B fp32 embedding


def test_activation_and_logit_terms_follow_tokens_layers_and_vocab():
    p = _plan(method="lora")
    e = estimate(QWEN3_4B, p, CAL)
    logits, layer = e.phases[LOGITS], e.phases[LAYER_BACKWARD]
    tokens = p.sequences * p.seq_len
    assert logits["checkpointed layer inputs"] == layer["checkpointed layer inputs"] == \
        4 * QWEN3_4B.hidden * tokens * QWEN3_4B.layers
    assert layer["recomputed layer"] == 2.0 * layer_activation_bytes(QWEN3_4B, 4) * tokens
    assert logits["logits"] == 3.0 * 4 * p.sequences * p.action_tokens * QWEN3_4B.vocab
    assert "logits" not in layer and "recomputed layer" not in logits  # freed before the layers' backward
    assert e.train_bytes == max(e.phase_bytes(LOGITS), e.phase_bytes(LAYER_BACKWARD), e.phase_bytes(OPTIMIZER))
    no_gc = estimate(QWEN3_4B, replace(p, gradient_checkpointing=False), CAL)
    assert no_gc.phases[LOGITS]["layer activations"] == QWEN3_4B.layers * layer_activation_bytes(QWEN3_4B, 4) * tokens
    assert LAYER_BACKWARD not in no_gc.phases
    # bf16 autocast halves what the layers save in the compute dtype, not the fp32 residual stream
    assert layer_activation_bytes(QWEN3_4B, 2) < layer_activation_bytes(QWEN3_4B, 4)
    hot = estimate(QWEN3_4B, replace(p, temperature_copy=True), CAL).phases[LOGITS]["logits"]
    assert hot == pytest.approx(4 / 3 * logits["logits"])


def test_many_generated_tokens_peak_at_the_logits_long_rows_at_the_layer_backward():
    assert estimate(QWEN3_4B, _plan(method="lora", seq_len=512, action_tokens=256), CAL).peak_phase == LOGITS
    assert estimate(QWEN3_4B, _plan(method="lora", seq_len=4096, action_tokens=16), CAL).peak_phase == LAYER_BACKWARD


def test_the_cheaper_plan_is_always_smaller():
    e = lambda **o: estimate(QWEN3_4B, _plan(**o), CAL).peak_bytes
    assert e(method="qlora") < e(method="lora") < e(method="full")
    lora = dict(method="lora")
    assert e(sequences=2, **lora) < e(sequences=4, **lora)
    assert e(action_tokens=256, **lora) < e(action_tokens=512, **lora)  # the logits moment is the peak here
    assert e(gradient_checkpointing=True, **lora) < e(gradient_checkpointing=False, **lora)
    # a full fine-tune of this small step peaks in the optimizer step: fewer tokens do not lower it
    assert e(action_tokens=64) <= e(action_tokens=128)
    # autocast saves activations in bf16 (a win on a big batch) but keeps bf16 copies of the weights it multiplies
    big = dict(method="lora", sequences=16, seq_len=2048)
    assert e(precision="bf16", device="cuda", **big) < e(precision="fp32", **big)


def test_generation_peak_counts_the_kv_cache():
    p = _plan(method="qlora", gen_rows=16, seq_len=4096, action_tokens=1024)
    g = estimate(QWEN3_4B, p, CAL).phases["generation"]
    assert g["KV cache"] == 16 * 4096 * 36 * 2 * 1024 * 4  # rows x tokens x layers x (k, v) x kv_dim x fp32


def _cfg(**over) -> TrainConfig:
    base = {"model": {"base": "Qwen/Qwen3-4B-Thinking-2507", "max_new_tokens": 256, "gradient_checkpointing": True,
                      "lora": {"r": 16}},
            "data": {"max_length": 1024}, "finetune": {"method": "full"},
            "strategy": {"name": "grpo", "num_generations": 4, "prompts_per_step": 2, "max_turns": 1}}
    for k, v in over.items():
        base[k] = {**base.get(k, {}), **v}
    return TrainConfig.model_validate(base)


def test_plan_from_config_takes_the_worst_step_the_config_allows():
    p = plan_from_config(_cfg(), device="cpu", precision="fp32")
    assert (p.sequences, p.seq_len, p.action_tokens, p.gen_rows, p.gen_prompts) == (8, 1024, 256, 8, 2)
    assert p.reference and not p.value_head and p.method == "full"
    # concatenated turns multiply the generated tokens of a row, capped by max_length ...
    concat = lambda t: plan_from_config(_cfg(strategy={"max_turns": t, "multi_turn": "concat"}),
                                        device="cpu", precision="fp32")
    assert (concat(3).sequences, concat(3).action_tokens) == (8, 768) and concat(6).action_tokens == 1023
    # ... split turns (and unresolved auto, judged as split_turns) multiply the rows of the batch
    for mode in ("split_turns", "auto"):
        split = plan_from_config(_cfg(strategy={"max_turns": 3, "multi_turn": mode}), device="cpu", precision="fp32")
        assert (split.sequences, split.action_tokens, split.gen_rows) == (24, 256, 8)
    # auto as the chat template resolves it: concat for a template that keeps history (SmolLM2's)
    resolved = plan_from_config(_cfg(strategy={"max_turns": 3, "multi_turn": "auto"}), device="cpu",
                                precision="fp32", multi_turn="concat")
    assert (resolved.sequences, resolved.action_tokens) == (8, 768)
    # with no turn limit of its own, an episode may take the pool's max_turns
    assert plan_from_config(_cfg(strategy={"max_turns": None}, pool={"max_turns": 5}), device="cpu",
                            precision="fp32").sequences == 40
    ppo = plan_from_config(_cfg(strategy={"name": "ppo"}), device="cuda", precision="bf16")
    assert ppo.value_head and ppo.reference
    assert plan_from_config(_cfg(strategy={"name": "dpo"}), device="cpu", precision="fp32").sequences == 4
    assert plan_from_config(_cfg(strategy={"name": "grpo", "kl_coef": 0.0}), device="cpu",
                            precision="fp32").reference is False


def test_knobs_for_a_full_4b_on_24gb_put_lora_first_and_each_fits():
    cfg = _cfg()
    budget = 0.9 * 24 * GB
    knobs = knobs_that_fit(cfg, QWEN3_4B, device="cpu", precision="fp32", budget_bytes=budget)
    assert knobs and knobs[0].setting.startswith("finetune.method: ")
    assert all(k.estimate_gb * GB <= budget for k in knobs)
    # On a device without 4-bit support the method knob can only be lora.
    lora_only = knobs_that_fit(cfg, QWEN3_4B, device="cpu", precision="fp32", budget_bytes=budget, methods=("lora",))
    assert all("qlora" not in k.setting for k in lora_only)


def test_knobs_combine_when_no_single_one_fits_and_are_empty_when_nothing_fits():
    cfg = _cfg(strategy={"num_generations": 8, "prompts_per_step": 4, "max_turns": 4}, data={"max_length": 4096},
               model={"max_new_tokens": 1024})
    budget = 0.9 * 16 * GB
    knobs = knobs_that_fit(cfg, QWEN3_4B, device="cpu", precision="fp32", budget_bytes=budget)
    assert len(knobs) == 1 and knobs[0].setting.count(":") >= 3 and knobs[0].estimate_gb * GB <= budget
    assert knobs_that_fit(cfg, QWEN3_4B, device="cpu", precision="fp32", budget_bytes=1 * GB) == []


def test_the_bf16_sampling_copy_is_counted_where_it_is_made():
    """A bf16 copy of the policy samples on a CPU under bf16 autocast, or with generation.rollout_dtype bf16 under
    fp32 training: 2 bytes per parameter more, resident; not on a GPU, not otherwise."""
    from rc1.runtime.device import cpu_bf16_supported

    fp32 = plan_from_config(_cfg(), device="cpu", precision="fp32")
    assert not fp32.sampling_copy and plan_from_config(_cfg(), device="cpu", precision="bf16").sampling_copy
    if cpu_bf16_supported():  # elsewhere the config refuses rollout_dtype bf16 (tests/training/test_sampling_numerics)
        copy_ = plan_from_config(_cfg(generation={"rollout_dtype": "bf16"}), device="cpu", precision="fp32")
        assert copy_.sampling_copy
        extra = estimate(QWEN3_4B, copy_, CAL).phases["logits"]["bf16 sampling copy"]
        assert extra == 2.0 * P and "bf16 sampling copy" not in estimate(QWEN3_4B, fp32, CAL).phases["logits"]
