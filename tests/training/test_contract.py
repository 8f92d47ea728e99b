"""The training contract and what the recipe watches: typed step plans, the multi-epoch accumulation
window, PPO's first-epoch ratio, the difficulty bonus in advantages, the reward/success divergence
alert, target_kl control, and the engine x strategy table in the schema."""

from __future__ import annotations

import json
import math

import pytest
import torch

from rc1.config.load import load_train_config, verify_config_file
from rc1.engines.contract import Batch, Callback, PlanTensors, StepEngine, StepPlan, Strategy, Trainer
from rc1.runtime.errors import ConfigError
from rc1.runtime.workspace import Workspace
from rc1.training.base import make_recipe, read_training_end
from rc1.training.monitor import DivergenceMonitor
from tests.helpers.workspace import arithmetic_items, make_workspace
from tests.training.test_resume_exact import final_weights, losses, run


def _recipe(tmp_path, tiny_model_dir, **opts):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, **opts)
    recipe = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf))
    recipe.setup()
    return ws, recipe


def test_a_strategy_hands_the_recipe_a_frozen_typed_plan(tmp_path, tiny_model_dir):
    _, recipe = _recipe(tmp_path, tiny_model_dir)
    batch = Batch(0, tuple(arithmetic_items(2)), 123)
    plan = recipe.strategy.plan(batch, recipe.strategy.rollout(batch))
    assert isinstance(plan, StepPlan) and plan.epochs == 1 and plan.rollout is not None
    assert isinstance(plan.tensors, PlanTensors) and plan.tensors.advantages is not None
    # the recipe, its engine, strategy and callbacks are what the contract says they are
    assert isinstance(recipe, Trainer) and isinstance(recipe.engine, StepEngine) and isinstance(recipe.strategy, Strategy)
    assert recipe.callbacks and all(isinstance(cb, Callback) for cb in recipe.callbacks)
    with pytest.raises(AttributeError):
        plan.epochs = 2  # frozen
    with pytest.raises(ValueError):
        StepPlan(tensors=None, loss_fn=plan.loss_fn, epochs=0)


def test_ppo_epochs_with_accumulation_resume_exactly(tmp_path, tiny_model_dir):
    """ppo_scale.yaml's combination (ppo_epochs 2, accumulation) trains and resumes bit-exactly; a stop
    inside the window finishes the window first."""
    opts = dict(strategy="ppo", grad_accum=2, max_steps=4, save_steps=100, extra={"strategy.ppo_epochs": 2})
    a, b = Workspace(tmp_path / "a"), Workspace(tmp_path / "b")
    conf = make_workspace(a.root, tiny_model_dir, **opts)
    make_workspace(b.root, tiny_model_dir, **opts)
    run(a, conf)
    first = run(b, conf, stop_at=1)          # asked to stop mid-window: it closes the window at step 2
    assert first.step == 2 and first.stop_reason == "operator"
    run(b, conf, resume="latest")
    assert losses(a) == losses(b)
    wa, wb = final_weights(a), final_weights(b)
    assert all(wa[k].equal(wb[k]) for k in wa)
    end = read_training_end(a)
    assert end["reason"] == "completed" and not end["stopped_early"] and end["finetune_method"] == "full"


def test_ppo_ratio_is_exactly_one_at_the_start_of_the_first_epoch(tmp_path, tiny_model_dir):
    _, recipe = _recipe(tmp_path, tiny_model_dir, strategy="ppo", method="lora",
                        extra={"model.lora.dropout": 0.3, "strategy.ppo_epochs": 2})
    batch = Batch(0, tuple(arithmetic_items(2)), 5)
    plan = recipe.strategy.plan(batch, recipe.strategy.rollout(batch))
    metrics = recipe.engine.backward(plan, scale=1.0)
    assert metrics["ratio"] == 1.0 and metrics["clip_frac"] == 0.0 and metrics["policy_kl"] == 0.0


def test_a_hard_item_gets_a_larger_advantage_than_an_easy_one_with_the_same_outcomes(tmp_path, tiny_model_dir):
    _, recipe = _recipe(tmp_path, tiny_model_dir, extra={"reward.difficulty_beta": 0.1})
    easy, hard = (dict(it, bucket=b) for it, b in zip(arithmetic_items(2), ("easy", "hard")))
    batch = Batch(0, (easy, hard), 9)
    ro = recipe.strategy.rollout(batch)
    g = ro.group_size
    ro.rewards = [1.0, 0.2, 0.0] * 2  # the same outcomes in both groups
    ro.successes = [True, False, False] * 2
    assert ro.advantage_scales == [0.9] * g + [1.1] * g
    adv = recipe.strategy.plan(batch, ro).tensors.advantages
    assert torch.allclose(adv[g:], adv[:g] * 1.1 / 0.9)
    assert adv[g] > adv[0] > 0  # the correct answer to the hard item is pushed up more


def _records(rewards, successes):
    return [{"step": i + 1, "reward": r, "success": s, "kl": 0.01 * i, "entropy": 1.0 - 0.05 * i,
             "truncated": 0.5 - 0.05 * i, "reward/conciseness": 0.1 * i, "reward/correctness": s}
            for i, (r, s) in enumerate(zip(rewards, successes))]


def test_divergence_alert_fires_once_when_reward_rises_and_success_does_not():
    mon = DivergenceMonitor(window=8, alpha=0.05)
    alerts = [mon.observe(r) for r in _records([0.40 + 0.02 * i for i in range(12)], [0.0] * 12)]
    fired = [a for a in alerts if a is not None]
    assert len(fired) == 1 and fired[0].step == 8
    assert "conciseness" in fired[0].message and fired[0].detail["success"] == [0.0, 0.0]


@pytest.mark.parametrize("rewards,successes", [
    ([0.40 + 0.02 * i for i in range(12)], [0.05 * i for i in range(12)]),   # success rises with it
    ([0.50, 0.40, 0.55, 0.45, 0.50, 0.42, 0.52, 0.47] * 2, [0.0] * 16),      # noise, no trend
])
def test_no_divergence_alert_when_success_keeps_up_or_reward_is_flat(rewards, successes):
    mon = DivergenceMonitor(window=8, alpha=0.05)
    assert not any(mon.observe(r) for r in _records(rewards, successes))


class RisingShaping:
    """A reward whose shaping grows every call while nothing is ever solved: reward hacking in a box."""

    def __init__(self, inner):
        self.inner, self.calls, self.cfg, self.judge = inner, 0, inner.cfg, None

    def score(self, item, episode):
        b = self.inner.score(item, episode)
        self.calls += 1
        b.total, b.success, b.dims["correctness"] = 0.01 * self.calls, False, 0.0
        return b


def test_a_reward_hacking_run_raises_the_alert_in_metrics_alerts_and_the_end_record(tmp_path, tiny_model_dir):
    import logging

    warnings: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: warnings.append(record.getMessage())
    logging.getLogger("rc1.train").addHandler(handler)
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, max_steps=10, save_steps=100,
                          extra={"monitor.window": 6})
    cfg = load_train_config(conf, ws)
    from rc1.rewards.reward import RewardModel

    recipe = make_recipe(ws, cfg, config_path=str(conf),
                         reward_model=RisingShaping(RewardModel.from_config(cfg, ws)))
    recipe.setup()
    recipe.train()
    lines = [json.loads(x) for x in ws.metrics_path.read_text().splitlines()]
    flagged = [r for r in lines if r.get("alert")]
    assert len(flagged) == 1 and flagged[0]["step"] == 6 and flagged[0]["alert/kind"] == DivergenceMonitor.KIND
    assert json.loads(ws.path("reports/alerts.jsonl").read_text().splitlines()[0])["step"] == 6
    assert read_training_end(ws)["alerts"][0]["kind"] == DivergenceMonitor.KIND
    logging.getLogger("rc1.train").removeHandler(handler)
    assert any("reward/success divergence" in w for w in warnings)  # the train.log line


def test_target_kl_adapts_the_coefficient_and_can_stop_the_run(tmp_path, tiny_model_dir):
    # adaptive (the default): log beta moves by 0.1 x min(KL / target - 1, kl_error_cap 3) each step
    _, recipe = _recipe(tmp_path / "a", tiny_model_dir, extra={"target_kl": 0.02, "strategy.kl_coef": 0.1})
    for kl in (0.06, 0.06):  # 3 x target: + 0.2 each
        recipe.kl_control.observe(kl, recipe.strategy)
    assert recipe.strategy.beta == pytest.approx(0.1 * math.exp(0.4))
    recipe.kl_control.observe(0.0, recipe.strategy)  # - 0.1
    assert recipe.strategy.beta == pytest.approx(0.1 * math.exp(0.3))
    recipe.kl_control.observe(0.74, recipe.strategy)  # 37 x target counts as 4 x: + 0.3, not + 3.6
    assert recipe.strategy.beta == pytest.approx(0.1 * math.exp(0.6))
    _, free = _recipe(tmp_path / "c", tiny_model_dir, extra={"target_kl": 0.02, "strategy.kl_coef": 0.1,
                                                             "monitor.kl_error_cap": None})
    free.kl_control.observe(0.74, free.strategy)      # unclipped, as configured
    assert free.strategy.beta == pytest.approx(0.1 * math.exp(3.6))
    # early_stop: the run ends with reason target_kl once the window's mean KL is above 1.5 x target
    ws = Workspace(tmp_path / "b")
    # (PPO: its value baseline gives a random policy that never succeeds non-zero advantages from the shaping;
    # GRPO's group baseline gives it none, the shaping counting only where correctness varies)
    conf = make_workspace(ws.root, tiny_model_dir, strategy="ppo", max_steps=12, save_steps=100, extra={
        "target_kl": 1e-9, "strategy.kl_coef": 0.0, "monitor.kl_control": "early_stop", "monitor.window": 4})
    rec = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf))
    rec.setup()
    assert rec.train() == "target_kl" and rec.step == 4
    end = read_training_end(ws)
    assert end["stopped_early"] and end["kl"]["units"].startswith("per-token KL")


@pytest.mark.parametrize("engine,strategy", [("trl", "ppo"), ("trl", "dpo"), ("trl", "sft"), ("trl_ppo", "grpo")])
def test_config_verify_refuses_every_pair_an_engine_would_refuse(tmp_path, tiny_model_dir, engine, strategy):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, engine=engine, strategy=strategy)
    with pytest.raises(ConfigError) as err:
        verify_config_file(conf, ws)
    assert err.value.exit_code == 2 and "engine" in str(err.value.lines)


def test_adaptive_kl_without_a_coefficient_is_a_config_error(tmp_path, tiny_model_dir):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, extra={"strategy.kl_coef": 0.0})
    with pytest.raises(ConfigError) as err:
        verify_config_file(conf, ws)
    assert "kl_control" in str(err.value.lines)


class FailsOnCall:
    """The task's verifier raising on the n-th scored episode (as a user's python: verifier would)."""

    def __init__(self, inner, n):
        self.inner, self.n, self.calls, self.cfg, self.judge = inner, n, 0, inner.cfg, None

    def score(self, item, episode):
        from rc1.envs.verifiers import VerifierError

        self.calls += 1
        if self.calls == self.n:
            raise VerifierError(item["id"], "python:mine:check", ValueError("cannot parse gold"))
        return self.inner.score(item, episode)


def test_a_failing_verifier_stops_the_run_cleanly_naming_the_item(tmp_path, tiny_model_dir):
    from rc1.rewards.reward import RewardModel
    from rc1.envs.verifiers import VerifierError
    from rc1.runtime.checkpoint import read_latest, verify_checkpoint

    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, max_steps=6, save_steps=100)
    cfg = load_train_config(conf, ws)
    recipe = make_recipe(ws, cfg, config_path=str(conf), reward_model=FailsOnCall(RewardModel.from_config(cfg, ws), 14))
    recipe.setup()
    with pytest.raises(VerifierError, match="on item t00"):
        recipe.train()
    latest = read_latest(ws.path("checkpoints/t"))
    assert latest.name == "step_00002" and verify_checkpoint(latest)  # steps 1-2 trained (6 episodes each), kept
    end = read_training_end(ws)
    assert end["reason"] == "verifier_error" and end["stopped_early"] and end["step"] == 2


def test_the_share_of_generated_tokens_a_group_advantage_can_teach_by_hand():
    """Two groups of two: the first's rewards vary (its 3 + 5 tokens reach the loss with a non-zero advantage),
    the second's are equal (its 10 + 2 tokens teach nothing): 8 of 20 tokens."""
    from types import SimpleNamespace

    from rc1.config.schema import REWARD_DIMENSIONS
    from rc1.engines.contract import ScoredRollout

    eps = [SimpleNamespace(action_mask=[0] * 4 + [1] * k, truncated=False, turns=1, tool_hops=0, clarifications=0)
           for k in (3, 5, 10, 2)]
    ro = ScoredRollout(items=[{"id": "a"}] * 2 + [{"id": "b"}] * 2, episodes=eps, rewards=[1.0, 0.0, 0.2, 0.2],
                       successes=[True, False, False, False], dims=[{d: 0.0 for d in REWARD_DIMENSIONS}] * 4,
                       group_size=2)
    assert ro.stats.signal_tokens_frac == pytest.approx(8 / 20)
    assert ro.stats.record()["signal_tokens_frac"] == pytest.approx(0.4) and ro.stats.zero_var_groups == 0.5


def test_plan_rows_selected_by_index_renumber_their_episodes():
    t = PlanTensors(input_ids=torch.arange(10).view(5, 2), attention_mask=torch.ones(5, 2),
                    action_mask=torch.ones(5, 1), episode=torch.tensor([0, 0, 1, 2, 2]),
                    advantages=torch.tensor([1.0, 1.0, 0.0, -2.0, -2.0]), n_pairs=3)
    cut = t.take(torch.tensor([1, 3, 4]))
    assert cut.input_ids.tolist() == [[2, 3], [6, 7], [8, 9]] and cut.advantages.tolist() == [1.0, -2.0, -2.0]
    assert cut.episode.tolist() == [0, 1, 1] and cut.n_pairs == 3 and cut.sample_logp is None
