"""Hand-computed tests of the review's fixes (issue 26, item 5): the unstable-judge down-weight keeps a group's
advantages summing to zero; the LR schedule's horizon is the planned run, not a `--max-steps` chunk; the
reward-scale and pass@k formulas with numbers worked out by hand."""

from __future__ import annotations

import pytest
import torch

from rc1.config.load import load_train_config
from rc1.runtime.workspace import Workspace
from rc1.strategies.rl_math import ADV_EPS, grpo_advantages, rloo_advantages, scale_group_advantages
from rc1.training.base import make_recipe
from tests.helpers.workspace import make_workspace


def test_an_unstable_episode_is_down_weighted_and_its_group_still_sums_to_zero():
    # rewards [1, 0, 0, 0]: mean 0.25, sample std 0.5 -> A = [1.5, -0.5, -0.5, -0.5] (eps aside)
    adv = grpo_advantages(torch.tensor([1.0, 0.0, 0.0, 0.0]), 4)
    assert adv.tolist() == pytest.approx([0.75 / (0.5 + ADV_EPS)] + [-0.25 / (0.5 + ADV_EPS)] * 3)
    # the first grade was unstable: x 0.5 -> [0.75, -0.5, -0.5, -0.5], sum -0.75, mean -0.1875; re-centred
    out = scale_group_advantages(torch.tensor([1.5, -0.5, -0.5, -0.5]), torch.tensor([0.5, 1.0, 1.0, 1.0]), 4)
    assert out.tolist() == pytest.approx([0.9375, -0.3125, -0.3125, -0.3125])
    assert float(out.sum()) == pytest.approx(0.0, abs=1e-7)
    assert out[0] < 1.5  # the unstable episode still moves the policy less than a stable one would
    # a difficulty factor common to the whole group only scales it: [1.1 x A]
    same = scale_group_advantages(torch.tensor([1.5, -0.5, -0.5, -0.5, 0.0, 0.0]), torch.tensor([1.1] * 4 + [0.9] * 2), 2)
    assert same.tolist() == pytest.approx([1.1 * 1.5 - 1.1 * 0.5, -(1.1 * 1.5 - 1.1 * 0.5), 0.0, 0.0, 0.0, 0.0])


def test_scale_rewards_batch_and_none_and_rloo_by_hand():
    r = torch.tensor([1.0, 0.0, 3.0, 1.0])  # groups of 2: means 0.5 and 2.0
    # none (Dr. GRPO): centred only
    assert grpo_advantages(r, 2, "none").tolist() == pytest.approx([0.5, -0.5, 1.0, -1.0])
    # batch: divided by the std of all four rewards (mean 1.25; squares 0.0625, 1.5625, 3.0625, 0.0625 -> /3)
    std = (4.75 / 3) ** 0.5
    assert grpo_advantages(r, 2, "batch").tolist() == pytest.approx([x / (std + ADV_EPS) for x in (0.5, -0.5, 1.0, -1.0)])
    # rloo, groups of 2: the other one's reward is the baseline
    assert rloo_advantages(r, 2).tolist() == pytest.approx([1.0, -1.0, 2.0, -2.0])


def test_the_lr_schedule_keeps_the_planned_horizon_under_max_steps(tmp_path):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, __import__("tests.helpers.qwen3", fromlist=["qwen3_tiny_dir"]).qwen3_tiny_dir(),
                          max_steps=8)
    recipe = make_recipe(ws, load_train_config(conf, ws), config_path=str(conf), max_steps=4)  # a chunk of 4
    recipe.setup()
    recipe.engine._ensure_optimizer()
    f = recipe.engine.scheduler.lr_lambdas[0]
    assert recipe.max_steps == 4 and recipe.cfg.schedule_steps == 8
    # linear, warmup 1 of 8 updates: after 2 updates 1 - (2 - 1) / (8 - 1) = 6/7 (a horizon of 4 would give 2/3)
    assert f(0) == pytest.approx(0.5) and f(2) == pytest.approx(6 / 7) and f(8) == 0.0


def test_the_kl_controller_maps_the_rate_to_its_horizon_by_hand():
    from rc1.strategies.grpo import GRPOStrategy
    from rc1.training.monitor import KLControl

    s = GRPOStrategy.__new__(GRPOStrategy)
    s.beta = 0.1
    ctl = KLControl(target=0.02, mode="adaptive_sign", adapt_rate=0.1, stop_factor=2.0, window=3)
    ctl.observe(0.03, s)   # KL / target - 1 = 0.5, clipped to 0.2; x rate 0.1 (horizon 10, one step): x 1.02
    assert s.beta == pytest.approx(0.102)
    ctl.observe(0.019, s)  # -0.05 x 0.1: x 0.995
    assert s.beta == pytest.approx(0.102 * 0.995)


def test_the_kl_coefficient_floor_stops_the_wind_down_before_learning_starts():
    """Steps before the policy learns anything measure a KL far under target; without a floor they wind the
    coefficient down geometrically (x 0.95 per step at rate 0.25), with kl_coef_min it holds there, and it still
    rises when the KL runs over target."""
    from rc1.strategies.grpo import GRPOStrategy
    from rc1.strategies.ppo import PPOStrategy
    from rc1.training.monitor import KLControl

    free, held = GRPOStrategy.__new__(GRPOStrategy), GRPOStrategy.__new__(GRPOStrategy)
    free.beta = held.beta = 0.2
    unfloored = KLControl(target=0.05, mode="adaptive_sign", adapt_rate=0.25, stop_factor=1.5, window=8)
    floored = KLControl(target=0.05, mode="adaptive_sign", adapt_rate=0.25, stop_factor=1.5, window=8, coef_min=0.2)
    for _ in range(40):
        unfloored.observe(0.001, free)
        floored.observe(0.001, held)
    assert free.kl_coef == pytest.approx(0.2 * 0.95 ** 40) and held.kl_coef == 0.2
    floored.observe(0.5, held)  # over target: up 5 %
    assert held.kl_coef == pytest.approx(0.21)
    ppo = PPOStrategy.__new__(PPOStrategy)
    ppo.kl_coef = 0.3
    floored.observe(0.0, ppo)  # every KL-adjustable strategy: PPO's reward penalty too
    assert ppo.kl_coef == pytest.approx(0.3 * 0.95)


def test_a_kl_floor_above_the_starting_coefficient_is_a_config_error(tmp_path):
    from tests.helpers.qwen3 import qwen3_tiny_dir

    from rc1.runtime.errors import ConfigError

    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, qwen3_tiny_dir(), max_steps=2, extra={"monitor.kl_coef_min": 5.0})
    with pytest.raises(ConfigError) as err:
        load_train_config(conf, ws)
    assert err.value.exit_code == 2 and "monitor.kl_coef_min (5) is above strategy.kl_coef" in str(err.value.lines)


def test_dpo_pairs_take_the_first_of_tied_extremes_and_skip_flat_groups():
    from rc1.strategies.dpo import DPOStrategy

    s = DPOStrategy.__new__(DPOStrategy)
    s.group_size = 3
    rewards = [0.5, 1.0, 1.0,  0.2, 0.2, 0.2,  0.0, 0.3, 0.0]
    # group 0: best 1.0 first at 1, worst 0.5 at 0; group 1 all equal: no pair; group 2: best 7, worst 0.0 first at 6
    assert s.pairs(rewards) == [(1, 0), (7, 6)]


def test_pass_at_k_counts_groups_with_any_success():
    from types import SimpleNamespace

    from rc1.config.names import REWARD_DIMENSIONS
    from rc1.engines.contract import ScoredRollout

    ep = SimpleNamespace(action_mask=[0, 1, 1], truncated=False, turns=1, tool_hops=0, clarifications=0)
    successes = [True, False, False, False, False, True]  # groups of 2: hit, miss, hit
    ro = ScoredRollout([{"id": str(i // 2)} for i in range(6)], [ep] * 6, [float(x) for x in successes], successes,
                       [{d: 0.0 for d in REWARD_DIMENSIONS}] * 6, 2)
    stats = ro.stats
    assert stats.pass_at_k == pytest.approx(2 / 3) and stats.success == pytest.approx(2 / 6)
    assert stats.no_success_signal_groups == pytest.approx(1 / 3) and stats.completion_tokens == 12


def test_the_sft_loss_is_the_token_mean_nll_of_the_answer(tmp_path):
    from rc1.strategies.rl_math import masked_mean, token_weights

    logp = torch.tensor([[0.0, -1.0, -2.0], [-4.0, 0.0, 0.0]])
    mask = torch.tensor([[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    # (1 + 2 + 4) / 3 tokens, whichever rows a micro-batch holds
    assert float(masked_mean(-logp, mask)) == pytest.approx(7 / 3)
    w = token_weights(mask)
    assert float((-logp[:1] * w[:1]).sum() + (-logp[1:] * w[1:]).sum()) == pytest.approx(7 / 3)


class _FixedPolicy:
    """A Policy whose log-probs are given: the policy's, the reference's; hidden states 0 (values = the head's bias)."""

    tokenizer = type("Tok", (), {"pad_token_id": 0, "eos_token_id": 0})()
    hidden_size = 4
    sampler_differs = False

    def __init__(self, logp, ref):
        self.logp, self.ref = logp, ref

    def forward(self, input_ids, attention_mask, *, positions=None, reference=False, hidden=False, **kw):
        from rc1.engines.contract import ForwardOutput

        lp = self.ref if reference else self.logp
        return ForwardOutput(lp, None, torch.zeros(lp.shape + (4,)) if hidden else None)

    def to_device(self, x):
        return x

    def use_reference(self):
        pass

    def add_module(self, name, module):
        return module


def test_the_ppo_plan_by_hand():
    """k1 penalty per token, the reward on the last action token, GAE (gamma = lambda = 1), whitening, x scale."""
    from rc1.config.names import REWARD_DIMENSIONS
    from rc1.config.schema import TrainConfig
    from rc1.engines.contract import Batch, ScoredRollout
    from rc1.envs.episode import Episode
    from rc1.strategies.ppo import PPOStrategy

    cfg = TrainConfig.model_validate({"strategy": {"name": "ppo", "kl_coef": 0.1, "gamma": 1.0, "gae_lambda": 1.0,
                                                   "num_generations": 2}})
    s = PPOStrategy(cfg, None)
    s.attach(_FixedPolicy(torch.tensor([[0.0, -1.0, -2.0]]), torch.tensor([[0.0, -1.5, -1.0]])))
    ep = Episode("a", "gsm8k", None, 1, 0, 0, False, "", input_ids=[5, 6, 7, 8],
                 action_mask=[0, 0, 1, 1])  # shifted action mask [0, 1, 1]
    ro = ScoredRollout([{"id": "a"}], [ep], [1.0], [True], [{d: 0.0 for d in REWARD_DIMENSIONS}], 1,
                       advantage_scales=[1.2])
    t = s.plan(Batch(0, ({"id": "a"},), 1), ro).tensors
    # k1 = logp - ref = [0, 0.5, -1.0]; token rewards -0.1 x k1 = [0, -0.05, 0.1], + reward 1 on the last: 1.1
    # values 0: A_2 = 1.1, A_1 = -0.05 + A_2 = 1.05; returns = A + V = [1.05, 1.1]
    assert t.returns[0].tolist() == pytest.approx([0.0, 1.05, 1.1])
    # whitened over the two action tokens: mean 1.075, std 0.025 -> [-1, 1]; x the item's scale 1.2
    assert t.advantages[0].tolist() == pytest.approx([0.0, -1.2, 1.2], abs=1e-4)
    assert t.token_weight[0].tolist() == pytest.approx([0.0, 0.5, 0.5])


def test_log_prob_and_entropy_under_the_nucleus_by_hand():
    """p = [0.4, 0.3, 0.2, 0.1], top_p 0.65: the nucleus is the first two tokens, renormalised to [4/7, 3/7]; a
    scored token outside it stays in the support (the sampler drew it): then [4/8, 3/8, 1/8] over tokens 0, 1, 3."""
    import math
    from types import SimpleNamespace

    from rc1.engines.forward import project

    head = torch.nn.Linear(4, 4, bias=False)
    with torch.no_grad():
        head.weight.copy_(torch.eye(4))
    lm = SimpleNamespace(get_output_embeddings=lambda: head)
    h = torch.log(torch.tensor([[4.0, 3.0, 2.0, 1.0]] * 2))  # the identity head: these are the logits
    lp, ent = project(lm, h, torch.tensor([0, 3]), True, 1.0, 0.65)
    assert lp.tolist() == pytest.approx([math.log(4 / 7), math.log(1 / 8)], abs=1e-6)
    h7 = -(4 / 7 * math.log(4 / 7) + 3 / 7 * math.log(3 / 7))
    h8 = -(0.5 * math.log(0.5) + 0.375 * math.log(0.375) + 0.125 * math.log(0.125))
    assert ent.tolist() == pytest.approx([h7, h8], abs=1e-6)
    # temperature 2 without a nucleus: p ~ sqrt([4, 3, 2, 1])
    lp2, _ = project(lm, h[:1], torch.tensor([0]), False, 2.0, 1.0)
    z = sum(math.sqrt(x) for x in (4, 3, 2, 1))
    assert float(lp2[0]) == pytest.approx(math.log(2 / z), abs=1e-6)
