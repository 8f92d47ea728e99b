"""rc1 bench memory measures micro-batched steps and the config's worst-case step (issue 26)."""

from __future__ import annotations

from pathlib import Path

from rc1.bench.memory import Point, config_worst_point, measure_point, point_plan
from rc1.config.load import load_train_config
from rc1.models.shapes import SHAPES
from rc1.runtime.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
SETTINGS = {"lora_r": 4, "lora_targets": ["q_proj", "v_proj"], "lora_dropout": 0.0, "kl_coef": 0.04,
            "strategy": "grpo"}


def test_a_micro_batched_step_is_measured_and_planned_per_micro_batch(tiny_dir):
    point = Point("lora", 2, 4, 48, 16, micro_batch_size=1)
    r = measure_point(point, str(tiny_dir), SETTINGS, ["cpu"])
    assert r["label"] == "lora L=2 4x48 (16 gen) gc=on micro=1" and r["peak_gb"] > 0
    plan = point_plan(point, "cpu", "fp32", SETTINGS)
    assert (plan.sequences, plan.batch_rows) == (1, 4)


def test_the_embedded_defaults_worst_case_step_is_a_point():
    cfg = load_train_config(REPO / "configs/local.yaml", Workspace(REPO))
    p = config_worst_point(cfg, SHAPES["smollm2-135m-instruct"], "cpu", "fp32")
    # 2 prompts x 4 generations, one row each (SmolLM2's template concatenates turns), data.max_length 768 tokens,
    # 3 turns x model.max_new_tokens generated, full fine-tune, no gradient checkpointing: what the gate judges
    assert (cfg.strategy.prompts_per_step, cfg.strategy.num_generations, cfg.strategy.max_turns) == (2, 4, 3)
    assert p == Point("full", 30, 8, 768, 3 * cfg.model.max_new_tokens, False, warmup=False, micro_batch_size=None)
