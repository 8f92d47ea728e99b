"""Strategies train on split multi-turn episodes: one row per model turn, each mapped to its episode (the
episode's advantage on every row, GAE across its rows, DPO's sequence log-prob summed over its rows)."""

from __future__ import annotations

import pytest
import torch

from rc1.config.load import load_train_config
from rc1.engines.contract import Batch
from rc1.envs.rollout import generate_episodes
from rc1.runtime.workspace import Workspace
from rc1.strategies.common import score_rollout
from rc1.training.base import make_recipe
from tests.helpers.items import make_item
from tests.helpers.qwen3 import qwen3_tiny_dir
from tests.helpers.scripted import ScriptedLM

TOOL_THEN_ANSWER = ["Look it up.\n</think>\n\nTOOL: wiki river Paris\n", "Found it.\n</think>\n\nANSWER: Seine"]
WRONG = ["No idea.\n</think>\n\nANSWER: Thames"]


@pytest.mark.parametrize("strategy", ["grpo", "ppo", "dpo"])
def test_a_step_on_split_episodes(tmp_path, strategy):
    from tests.helpers.workspace import make_workspace

    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, qwen3_tiny_dir(), strategy=strategy, method="lora",
                          extra={"strategy.num_generations": 2, "data.max_length": 1024})
    recipe = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf))
    recipe.setup()
    tok = recipe.engine.tokenizer
    item = make_item()
    right = generate_episodes(ScriptedLM(tok, TOOL_THEN_ANSWER, tail="<think>\n"), tok, [item], greedy=True,
                              max_new_tokens=32, multi_turn="auto")[0]
    wrong = generate_episodes(ScriptedLM(tok, WRONG, tail="<think>\n"), tok, [item], greedy=True,
                              max_new_tokens=32, multi_turn="auto")[0]
    assert (len(right.samples), len(wrong.samples)) == (2, 1) and right.final_answer == "Seine"
    ro = score_rollout([item, item], [right, wrong], recipe.reward_model, group_size=2)
    assert ro.successes == [True, False]
    plan = recipe.strategy.plan(Batch(0, (item,), 1), ro)
    t = plan.tensors
    assert t.episode.tolist() == [0, 0, 1]
    if strategy == "grpo":
        adv = t.advantages
        assert adv[0] == adv[1] > 0 > adv[2]        # both turns of the right episode share its advantage
    if strategy == "ppo":  # the reward sits on the right episode's last row only; GAE reaches its first row
        assert t.advantages[0][t.action_mask[0] > 0].abs().sum() > 0
    metrics = recipe.engine.backward(plan, scale=1.0)
    assert metrics["loss"] is not None and torch.isfinite(torch.tensor(metrics["loss"]))
    if strategy == "ppo":
        assert metrics["ratio"] == 1.0
    if strategy == "dpo":
        assert plan.metrics["dpo/pairs"] == 1 and t.n_pairs == 1  # chosen = 2 rows, rejected = 1 row
