"""The memory estimate counts run.micro_batch_size (rows per forward/backward), the resources gate names a
micro-batch first among the knobs that fit, and the shipped production configs fit their machines with theirs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rc1.config.load import load_gates_config, load_train_config
from rc1.config.schema import TrainConfig
from rc1.gates.base import FAIL, PASS, GateContext
from rc1.gates.resources import MEMORY_CHECK, Machine, evaluate
from rc1.models.memory import GB, estimate, plan_from_config, with_setting
from rc1.models.shapes import QWEN3_4B
from rc1.runtime.workspace import Workspace
from tests.helpers.configs import gates_yaml

REPO = Path(__file__).resolve().parents[2]
GPU_80GB = Machine("cuda", "bf16", 80e9)
MAC_32GB = Machine("mps", "fp16", 32e9)


def _cfg(**run) -> TrainConfig:
    return TrainConfig.model_validate({
        "model": {"base": "Qwen/Qwen3-4B-Thinking-2507", "max_new_tokens": 1024, "lora": {"r": 16}},
        "data": {"max_length": 4096}, "finetune": {"method": "lora"},
        "strategy": {"name": "grpo", "num_generations": 4, "prompts_per_step": 4, "max_turns": 3,
                     "multi_turn": "split_turns"},
        "run": {"device_pref": ["cpu"], **run}})


def test_the_estimate_counts_rows_per_micro_batch_not_per_step():
    whole = plan_from_config(_cfg(), device="cuda", precision="bf16")
    cut = plan_from_config(_cfg(micro_batch_size=4), device="cuda", precision="bf16")
    assert (whole.sequences, whole.batch_rows) == (48, 48)        # 16 episodes x 3 split turns
    assert (cut.sequences, cut.batch_rows) == (4, 48)
    assert "4 rows per micro-batch of 48" in cut.describe()
    big, small = estimate(QWEN3_4B, whole), estimate(QWEN3_4B, cut)
    # the activations scale with the rows of a forward; weights, AdamW and the rollout's KV cache do not
    assert small.train_bytes < big.train_bytes / 4
    assert small.phases["logits"]["weights"] == big.phases["logits"]["weights"]
    assert small.generation_bytes == big.generation_bytes


def test_a_dpo_micro_batch_holds_at_least_one_pair():
    cfg = with_setting(with_setting(_cfg(micro_batch_size=2), "strategy.name", "dpo"), "strategy.max_turns", 3)
    plan = plan_from_config(cfg, device="cpu", precision="fp32")
    assert plan.sequences == 6  # a chosen and a rejected episode of 3 turns each: never cut


def _ctx(tmp_path, cfg, machine):
    (tmp_path / "gates.yaml").write_text(gates_yaml({}, base="configs/gates.yaml"))
    return GateContext(Workspace(tmp_path), load_gates_config(tmp_path / "gates.yaml"), "round1", cfg,
                       extras={"machine": machine})


def test_the_gate_names_the_estimate_the_budget_and_a_micro_batch_first(tmp_path):
    c = next(x for x in evaluate(_ctx(tmp_path, _cfg(), GPU_80GB)).checks if x.name == MEMORY_CHECK)
    assert c.status == FAIL
    assert f"estimated {c.measured} GB does not fit cuda GPU memory 80.0 GB (budget 72.0 GB)" in c.detail
    knobs = c.detail.split("fits with: ")[1]
    assert knobs.startswith("run.micro_batch_size: ")
    m = int(knobs.split("run.micro_batch_size: ")[1].split(" ")[0])
    def status(micro):
        return next(x for x in evaluate(_ctx(tmp_path, _cfg(micro_batch_size=micro), GPU_80GB)).checks
                    if x.name == MEMORY_CHECK).status

    assert status(m) == PASS
    assert m == 16 or status(m + 1) == FAIL  # the largest micro-batch that fits (16: a step's episodes)
    # a machine the micro-batch alone cannot save: the knobs combine (or name none), micro-batch first
    small = next(x for x in evaluate(_ctx(tmp_path, _cfg(), Machine("cpu", "fp32", 16e9))).checks
                 if x.name == MEMORY_CHECK)
    assert small.status == FAIL and "budget 14.4 GB" in small.detail


@pytest.mark.parametrize(("config", "machine", "methods"), [
    ("configs/ppo_scale.yaml", GPU_80GB, ("qlora", "lora")),
    ("configs/train_local.yaml", MAC_32GB, ("lora",)),     # bitsandbytes 4-bit does not run on MPS
])
def test_the_shipped_production_configs_fit_their_machines(tmp_path, config, machine, methods):
    cfg = load_train_config(REPO / config, Workspace(REPO))
    assert cfg.run.micro_batch_size
    for method in methods:
        plan = plan_from_config(with_setting(cfg, "finetune.method", method), device=machine.device,
                                precision=machine.precision, multi_turn="split_turns")  # Qwen3's template
        peak = estimate(QWEN3_4B, plan).peak_bytes
        assert peak <= 0.9 * machine.memory_bytes, f"{config} {method}: {peak / GB:.1f} GB"
        whole = estimate(QWEN3_4B, plan_from_config(with_setting(with_setting(cfg, "finetune.method", method),
                                                                 "run.micro_batch_size", None),
                                                    device=machine.device, precision=machine.precision,
                                                    multi_turn="split_turns")).peak_bytes
        assert whole > machine.memory_bytes  # without the micro-batch it would not
