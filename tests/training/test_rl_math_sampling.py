"""The RL maths with hand-computed numbers: the KL estimator's direction, the truncated importance-sampling
correction, GAE across a split episode's turns, per-episode aggregation, and what GRPO / PPO log as `kl`
and `sampler_mismatch_kl` (a sign flip or a units change fails here)."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from rc1.config.schema import TrainConfig
from rc1.engines.contract import ForwardOutput, PlanTensors
from rc1.strategies.grpo import GRPOStrategy
from rc1.strategies.ppo import PPOStrategy
from rc1.strategies.rl_math import aggregate, gae, k3_kl, per_episode_sum, truncated_is_weight

L = math.log


def test_k3_estimates_kl_of_the_sampling_policy_to_the_reference():
    p, q = torch.tensor([0.7, 0.2, 0.1]), torch.tensor([0.2, 0.5, 0.3])
    kl_pq = float((p * (p / q).log()).sum())          # KL(p || q) = 0.5838
    kl_qp = float((q * (q / p).log()).sum())          # KL(q || p) = 0.5372
    expected = float((p * k3_kl(p.log(), q.log())).sum())  # E_{x~p} k3(log p(x), log q(x))
    assert expected == pytest.approx(kl_pq, abs=1e-6)
    assert expected != pytest.approx(kl_qp, abs=1e-4)
    assert (k3_kl(p.log(), q.log()) >= 0).all()
    # hand numbers: pi(a) = 0.5, ref(a) = 0.25 -> 0.5 - ln 0.5 - 1 = 0.19315
    assert float(k3_kl(torch.tensor(L(0.5)), torch.tensor(L(0.25)))) == pytest.approx(0.193147, abs=1e-6)


def test_truncated_importance_weight():
    old = torch.tensor([L(0.5), L(0.2), L(0.3)])
    sampler = torch.tensor([L(0.25), L(0.4), L(0.3)])
    w = truncated_is_weight(old, sampler, cap=1.5)
    assert w.tolist() == pytest.approx([1.5, 0.5, 1.0])   # 2.0 capped at 1.5; 0.5; equal numerics -> 1


def test_gae_runs_across_the_rows_of_a_split_episode():
    # episode 0 = rows 0 and 1 (two turns), episode 1 = row 2; gamma 1, lambda 0.5
    mask = torch.tensor([[1., 1., 0.], [0., 1., 0.], [1., 0., 0.]])
    values = torch.tensor([[0.1, 0.2, 0.], [0., 0.4, 0.], [0.3, 0., 0.]])
    rewards = torch.tensor([[0., 0., 0.], [0., 1.0, 0.], [2.0, 0., 0.]])
    adv, ret = gae(rewards, values, mask, gamma=1.0, lam=0.5, episode=torch.tensor([0, 0, 1]))
    # episode 0 action tokens in order: v = 0.1, 0.2, 0.4; r = 0, 0, 1
    #   last:   delta = 1 - 0.4 = 0.6                  A = 0.6
    #   middle: delta = 0 + 0.4 - 0.2 = 0.2            A = 0.2 + 0.5 * 0.6 = 0.5   (bootstraps from row 1)
    #   first:  delta = 0 + 0.2 - 0.1 = 0.1            A = 0.1 + 0.5 * 0.5 = 0.35
    torch.testing.assert_close(adv, torch.tensor([[0.35, 0.5, 0.], [0., 0.6, 0.], [1.7, 0., 0.]]))
    torch.testing.assert_close(ret, torch.tensor([[0.45, 0.7, 0.], [0., 1.0, 0.], [2.0, 0., 0.]]))
    # without the episode index each row is its own episode: row 0's last token no longer bootstraps
    alone, _ = gae(rewards, values, mask, gamma=1.0, lam=0.5)
    assert alone[0, 1] == pytest.approx(-0.2) and alone[0, 0] == pytest.approx(0.0)


def test_aggregation_counts_episodes_not_rows():
    per_token = torch.tensor([[1., 3.], [5., 0.], [2., 0.]])
    mask = torch.tensor([[1., 1.], [1., 0.], [1., 0.]])
    episode = torch.tensor([0, 0, 1])
    assert per_episode_sum(torch.tensor([1., 2., 4.]), episode).tolist() == [3., 4.]
    assert float(aggregate(per_token, mask, "token")) == pytest.approx(11 / 4)
    # sequence: episode 0 = (1 + 3 + 5) / 3 = 3, episode 1 = 2 -> 2.5 (per row it would be (2 + 5 + 2) / 3)
    assert float(aggregate(per_token, mask, "sequence", episode=episode)) == pytest.approx(2.5)
    assert float(aggregate(per_token, mask, "sequence")) == pytest.approx(3.0)
    assert float(aggregate(per_token, mask, "dr_grpo", max_new_tokens=4, episode=episode)) == pytest.approx(11 / 8)


class StubPolicy:
    """TEST DOUBLE of the Policy protocol: forward returns fixed per-token log-probs (and zeros elsewhere)."""

    tokenizer = None
    hidden_size = 2

    def __init__(self, logp, sampler_differs=False):
        self.logp = logp.clone().requires_grad_(True)
        self.sampler_differs = sampler_differs

    def forward(self, input_ids, attention_mask, *, positions=None, reference=False, hidden=False, entropy=False,
                temperature=1.0, top_p=1.0):
        B, T = self.logp.shape
        return ForwardOutput(self.logp, torch.zeros(B, T), torch.ones(B, T, 2) if hidden else None)

    def to_device(self, obj):
        return obj

    def use_reference(self):
        pass

    def add_module(self, name, module):
        return module


def _tensors(mask, **more):
    B, T = mask.shape
    return PlanTensors(input_ids=torch.zeros(B, T + 1, dtype=torch.long), attention_mask=torch.ones(B, T + 1),
                       action_mask=mask, episode=torch.arange(B), **more)


def test_grpo_reweights_policy_gradient_by_the_truncated_ratio_and_logs_the_mismatch():
    cfg = TrainConfig(strategy={"name": "grpo", "kl_coef": 0.0, "importance_sampling_cap": 1.5})
    logp = torch.tensor([[L(0.5), L(0.4)]])
    sampler = torch.tensor([[L(0.25), L(0.5)]])          # ratios pi_old / pi_sampler = 2.0 -> 1.5, 0.8
    mask = torch.ones(1, 2)
    grpo = GRPOStrategy(cfg, reward_model=None)
    grpo.attach(StubPolicy(logp, sampler_differs=True))
    out = grpo.loss(grpo.policy, _tensors(mask, advantages=torch.tensor([1.0]), sample_logp=sampler))
    # ratio to pi_old is 1 (first pass): per-token pg = -A * w = [-1.5, -0.8], token mean -1.15
    assert float(out.loss.detach()) == pytest.approx(-1.15, abs=1e-6)
    assert out.metrics["sampler/is_weight_mean"] == pytest.approx(1.15) and out.metrics["sampler/is_capped_frac"] == 0.5
    # k3 KL(pi_sampler || pi_old) with r = pi_old / pi_sampler: r - ln r - 1, for r = 2 and 0.8
    expected = ((2 - L(2) - 1) + (0.8 - L(0.8) - 1)) / 2
    assert out.metrics["sampler_mismatch_kl"] == pytest.approx(expected, abs=1e-6)
    # same numerics (or cap null): no reweighting, the mismatch is still logged
    plain = GRPOStrategy(cfg, reward_model=None)
    plain.attach(StubPolicy(logp, sampler_differs=False))
    out = plain.loss(plain.policy, _tensors(mask, advantages=torch.tensor([1.0]), sample_logp=sampler))
    assert float(out.loss.detach()) == pytest.approx(-1.0) and "sampler/is_weight_mean" not in out.metrics
    assert out.metrics["sampler_mismatch_kl"] == pytest.approx(expected, abs=1e-6)


def test_ppo_logs_the_per_token_kl_of_the_policy_to_the_reference():
    """`kl` = mean over action tokens of k3 KL(pi || ref), >= 0 (the old bug logged mean(new - old): here
    that is negative), in the units target_kl is compared with (per token, not summed per sequence)."""
    cfg = TrainConfig(strategy={"name": "ppo"})
    ppo = PPOStrategy(cfg, reward_model=None)
    logp = torch.tensor([[L(0.5), L(0.5), 0.0], [L(0.2), 0.0, 0.0]])
    ppo.attach(StubPolicy(logp))
    ref = torch.tensor([[L(0.4), L(0.5), 0.0], [L(0.4), 0.0, 0.0]])
    mask = torch.tensor([[1., 1., 0.], [1., 0., 0.]])
    t = _tensors(mask, old_logp=logp.clone(), advantages=torch.zeros(2, 3), old_values=torch.zeros(2, 3),
                 returns=torch.zeros(2, 3), ref_logp=ref)
    out = ppo.loss(ppo.policy, t)
    per_token = [0.8 - L(0.8) - 1, 0.0, 2.0 - L(2.0) - 1]   # r = ref / pi per action token
    assert out.metrics["kl"] == pytest.approx(sum(per_token) / 3, abs=1e-6)
    assert float(((logp - ref) * mask).sum() / mask.sum()) < 0 < out.metrics["kl"]
    assert out.metrics["ratio"] == 1.0 and out.metrics["policy_kl"] == 0.0


def test_ppo_applies_the_importance_weight_it_planned():
    cfg = TrainConfig(strategy={"name": "ppo", "importance_sampling_cap": 3.0})
    ppo = PPOStrategy(cfg, reward_model=None)
    logp = torch.tensor([[L(0.5), L(0.4)]])
    ppo.attach(StubPolicy(logp, sampler_differs=True))
    assert ppo.is_cap == 3.0
    mask = torch.ones(1, 2)
    base = dict(old_logp=logp.clone(), advantages=torch.tensor([[1.0, 1.0]]), old_values=torch.zeros(1, 2),
                returns=torch.zeros(1, 2), ref_logp=logp.clone())
    weighted = ppo.loss(ppo.policy, _tensors(mask, is_weight=torch.tensor([[2.0, 0.5]]), **base))
    unweighted = ppo.loss(ppo.policy, _tensors(mask, **base))
    assert weighted.metrics["pg_loss"] == pytest.approx(-1.25) and unweighted.metrics["pg_loss"] == pytest.approx(-1.0)
    off = PPOStrategy(TrainConfig(strategy={"name": "ppo", "importance_sampling_cap": None}), reward_model=None)
    off.attach(StubPolicy(logp, sampler_differs=True))
    assert off.is_cap is None


def test_config_rejects_a_cap_below_one():
    with pytest.raises(ValueError, match="importance_sampling_cap"):
        TrainConfig(strategy={"importance_sampling_cap": 0.5})
    assert SimpleNamespace(**TrainConfig().strategy.model_dump()).importance_sampling_cap == 2.0
