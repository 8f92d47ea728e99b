"""eval_shadow evaluates a fixed subset every eval_steps; early_stop stops a run that stopped improving."""

from __future__ import annotations

import json

from rc1.config.load import load_train_config
from rc1.training.base import make_recipe, read_training_end
from rc1.runtime.workspace import Workspace
from tests.helpers.workspace import make_workspace


def test_eval_shadow_and_early_stop(tmp_path, tiny_model_dir):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, max_steps=12, save_steps=100, extra={
        "run.eval_steps": 2, "engine.lr": 1e-9,  # a policy that cannot improve
        "callbacks": ["logging", "checkpoint", "lr_schedule", "grad_clip", {"name": "eval_shadow", "eval_items": 3},
                      {"name": "early_stop", "patience": 2, "min_delta": 0.5}]})
    recipe = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf))
    recipe.setup()
    assert recipe.train() == "early_stop"
    evals = [json.loads(l) for l in (ws.reports / "eval_shadow.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evals] == [2, 4, 6] and all(e["eval/n"] == 3 for e in evals)
    assert evals[0]["source"] == "data/eval_min.jsonl"
    recs = [json.loads(l) for l in ws.metrics_path.read_text().splitlines()]
    assert [r["step"] for r in recs] == [1, 2, 3, 4, 5, 6]  # stopped after the 3rd eval without improvement
    assert "eval/success" in recs[1] and "eval/success" not in recs[0]
    assert all("grad_clipped_frac" in r for r in recs)
    end = read_training_end(ws)
    assert end["reason"] == "early_stop" and end["checkpoint"] == "checkpoints/t/step_00006"
