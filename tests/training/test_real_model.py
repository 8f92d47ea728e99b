"""The embedded SmolLM2-135M-Instruct trains a few real GRPO steps end to end and resumes."""

from __future__ import annotations

import json

import pytest

from rc1.config.load import load_train_config
from rc1.training.base import make_recipe
from rc1.runtime.checkpoint import list_checkpoints
from rc1.runtime.workspace import Workspace
from tests.helpers.workspace import make_workspace


@pytest.mark.real_model
def test_smollm2_lora_grpo_trains_and_resumes(tmp_path):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tmp_path, max_steps=2, save_steps=1, method="lora",
                          extra={"model.base": "embedded:smollm2-135m-instruct", "model.max_new_tokens": 8,
                                 "strategy.num_generations": 2, "strategy.prompts_per_step": 1, "engine.lr": 1e-4})
    cfg = load_train_config(conf, ws)
    recipe = make_recipe(ws, cfg, config_path=str(conf), max_steps=1)
    recipe.setup()
    assert recipe.engine.is_peft
    recipe.train()
    resumed = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf), resume="latest")
    resumed.setup()
    assert resumed.step == 1
    assert resumed.train() == "completed"
    recs = [json.loads(l) for l in ws.metrics_path.read_text().splitlines()]
    assert [r["step"] for r in recs] == [1, 2]
    assert all(r["loss"] is not None and r["completion_len"] > 0 and r["reward"] is not None for r in recs)
    infos = list_checkpoints(ws, "checkpoints/t")
    assert [i.step for i in infos] == [1, 2] and all(i.verified for i in infos) and infos[-1].is_latest
    files = {p.name for p in ws.path(infos[-1].path).iterdir()}
    assert "adapter_model.safetensors" in files and "model.safetensors" not in files  # LoRA: adapter only
