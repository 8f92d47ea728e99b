"""eval_dev evaluates a fixed, stratified subset of the DEV split every eval_steps (never the held-out set);
early_stop stops a run that stopped improving on it, and refuses a config where it could never fire."""

from __future__ import annotations

import json

import pytest

from rc1.config.load import load_train_config
from rc1.runtime.errors import ConfigError
from rc1.runtime.workspace import Workspace
from rc1.training.base import make_recipe, read_training_end
from tests.helpers.workspace import arithmetic_items, make_workspace


def test_eval_dev_and_early_stop(tmp_path, tiny_model_dir):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, max_steps=12, save_steps=100, extra={
        "run.eval_steps": 2, "engine.lr": 1e-9,  # a policy that cannot improve
        "callbacks": ["logging", "checkpoint", "lr_schedule", "grad_clip", {"name": "eval_dev", "eval_items": 3},
                      {"name": "early_stop", "patience": 2, "min_delta": 0.5}]})
    # a held-out set exists too: model selection must not read it
    with open(tmp_path / "data/shadow_eval_245.jsonl", "w") as fh:
        for it in arithmetic_items(6, start=500, prefix="s"):
            fh.write(json.dumps(it) + "\n")
    recipe = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf))
    recipe.setup()
    assert recipe.train() == "early_stop"
    evals = [json.loads(l) for l in (ws.reports / "eval_dev.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evals] == [2, 4, 6] and all(e["eval/n"] == 3 for e in evals)
    assert evals[0]["source"]["split"] == "dev" and evals[0]["source"]["path"] == "data/eval_min.jsonl"
    recs = [json.loads(l) for l in ws.metrics_path.read_text().splitlines()]
    assert [r["step"] for r in recs] == [1, 2, 3, 4, 5, 6]  # stopped after the 3rd eval without improvement
    assert "eval/success" in recs[1] and "eval/success" not in recs[0]
    assert all("grad_clipped_frac" in r for r in recs)
    assert all(r["seed_index"] == 0 for r in recs)  # one run per seed: the console and the report split by it
    end = read_training_end(ws)
    assert end["reason"] == "early_stop" and end["checkpoint"] == "checkpoints/t/step_00006"


def test_the_dev_subset_is_stratified_not_the_file_head(tmp_path):
    from rc1.config.schema import TrainConfig
    from rc1.eval.splits import dev_set

    ws = Workspace(tmp_path)
    items = [dict(it, task=t, id=f"{t}{i}") for t in ("gsm8k", "hotpotqa", "strategyqa")
             for i, it in enumerate(arithmetic_items(8))]  # written task by task
    (tmp_path / "data").mkdir()
    (tmp_path / "data/eval_min.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    dev = dev_set(ws, TrainConfig(), 6)
    assert sorted(it["task"] for it in dev.items) == ["gsm8k"] * 2 + ["hotpotqa"] * 2 + ["strategyqa"] * 2


def test_eval_shadow_is_the_old_name_of_eval_dev():
    from rc1.config.schema import CallbackSpec, TrainConfig

    cfg = TrainConfig.model_validate({"callbacks": ["logging", "eval_shadow", {"name": "eval_shadow", "eval_items": 4}]})
    assert [c.name for c in cfg.callbacks] == ["logging", "eval_dev", "eval_dev"]
    assert CallbackSpec(name="eval_shadow").name == "eval_dev"


@pytest.mark.parametrize("extra,message", [
    ({"callbacks": ["logging", "early_stop"]}, "early_stop needs eval_dev"),
    ({"callbacks": ["logging", "eval_dev", "early_stop"], "eval.metric": "hard_success"}, "not measured during training"),
    ({"callbacks": ["logging", "eval_dev", "early_stop"], "data.eval_path": "data/no_dev.jsonl"}, "needs a dev split"),
])
def test_early_stop_that_could_never_fire_is_refused_at_start(tmp_path, tiny_model_dir, extra, message):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, max_steps=2, extra=extra)
    recipe = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf))
    recipe.setup()
    with pytest.raises(ConfigError, match=message):
        recipe.train()
