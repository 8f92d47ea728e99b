"""RL maths with numbers worked out by hand (torchtune's tests/torchtune/rlhf/test_rewards.py style).

Every expected value below is computed in the test from the formula, on tensors small enough to
check on paper; none comes from the function under test. Each test is built so that a flipped sign
or a dropped normalisation in the code changes the result.
"""

from __future__ import annotations

import math

import pytest
import torch

from rc1.engines.pure_pt import lr_lambda
from rc1.strategies.rl_math import (ADV_EPS, KL_HORIZON, AdaptiveKLController, dpo_loss, gae, grpo_advantages,
                                    grpo_token_loss, k3_kl, masked_mean, ppo_losses, rloo_advantages, whiten)
from rc1.strategies.rl_math import clipped_pg as clipped_pg_loss

LOG = math.log


def close(actual, expected, tol=1e-6):
    expected = torch.as_tensor(expected, dtype=torch.float32)
    assert torch.allclose(actual.detach().float(), expected, atol=tol, rtol=0), f"\n{actual}\n!=\n{expected}"


# ----------------------------------------------------------------------------- masked mean, k3 KL
def test_masked_mean_divides_by_the_unmasked_count_only():
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    mask = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    close(masked_mean(x, mask), (1 + 3 + 6) / 3)
    close(masked_mean(x, torch.zeros_like(mask)), 0.0)  # an empty mask is 0, not nan


def test_k3_kl_values_and_gradient():
    # pi = 0.5, ref = 0.25: d = log(ref/pi) = log 0.5;  k3 = e^d - d - 1 = 0.5 + log 2 - 1
    # pi = 0.25, ref = 0.5: d = log 2;                   k3 = 2 - log 2 - 1
    logp = torch.tensor([LOG(0.5), LOG(0.25), LOG(0.3)], requires_grad=True)
    ref = torch.tensor([LOG(0.25), LOG(0.5), LOG(0.3)])
    kl = k3_kl(logp, ref)
    close(kl, [0.5 + LOG(2) - 1, 2 - LOG(2) - 1, 0.0])
    # d k3 / d logp = 1 - ref/pi: the penalty pushes log pi down where pi > ref, up where pi < ref
    kl.sum().backward()
    close(logp.grad, [1 - 0.25 / 0.5, 1 - 0.5 / 0.25, 0.0])


# ----------------------------------------------------------------------------- advantages
def test_grpo_advantages_normalise_each_group_by_its_unbiased_std():
    rewards = torch.tensor([0.0, 0.0, 3.0, 5.0, 5.0, 5.0, 1.0, 2.0, 3.0])
    # group 1: mean 1, deviations (-1, -1, 2), unbiased std sqrt((1 + 1 + 4) / 2) = sqrt 3
    s1 = math.sqrt(3) + ADV_EPS
    # group 2: all equal -> 0 (the eps keeps it finite); group 3: mean 2, std sqrt((1 + 0 + 1) / 2) = 1
    s3 = 1.0 + ADV_EPS
    close(grpo_advantages(rewards, 3), [-1 / s1, -1 / s1, 2 / s1, 0, 0, 0, -1 / s3, 0, 1 / s3])


def test_rloo_advantage_subtracts_the_mean_of_the_other_rewards():
    rewards = torch.tensor([1.0, 2.0, 6.0, 4.0, 4.0, 4.0])
    # 1 - (2 + 6)/2 = -3;  2 - (1 + 6)/2 = -1.5;  6 - (1 + 2)/2 = 4.5;  equal rewards -> 0
    close(rloo_advantages(rewards, 3), [-3.0, -1.5, 4.5, 0.0, 0.0, 0.0])


# ----------------------------------------------------------------------------- GAE, whitening
def test_gae_skips_non_action_tokens_and_bootstraps_zero_after_the_last():
    gamma, lam = 0.9, 0.8
    # row 0: tokens 0, 1, 3 are the policy's; token 2 is a tool result (its reward/value must be ignored)
    rewards = torch.tensor([[0.1, -0.2, 9.0, 1.0], [0.0, 0.0, 0.5, 0.0]])
    values = torch.tensor([[0.5, 0.4, 7.0, 0.3], [3.0, 0.2, 0.1, 3.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0, 1.0], [0.0, 1.0, 1.0, 0.0]])
    # row 0, backwards over tokens 3, 1, 0 (next value 0 after the last action token):
    d3 = 1.0 + gamma * 0.0 - 0.3                       # 0.7
    a3 = d3
    d1 = -0.2 + gamma * 0.3 - 0.4                      # -0.33
    a1 = d1 + gamma * lam * a3                          # -0.33 + 0.72 * 0.7 = 0.174
    d0 = 0.1 + gamma * 0.4 - 0.5                       # -0.04
    a0 = d0 + gamma * lam * a1                          # -0.04 + 0.72 * 0.174 = 0.08528
    # row 1, tokens 2, 1
    b2 = 0.5 - 0.1                                      # 0.4
    b1 = (0.0 + gamma * 0.1 - 0.2) + gamma * lam * b2   # -0.11 + 0.288 = 0.178
    adv, returns = gae(rewards, values, mask, gamma, lam)
    close(adv, [[a0, a1, 0.0, a3], [0.0, b1, b2, 0.0]])
    close(returns, [[a0 + 0.5, a1 + 0.4, 0.0, a3 + 0.3], [0.0, b1 + 0.2, b2 + 0.1, 0.0]])


def test_gae_with_gamma_lambda_one_is_reward_to_go_minus_value():
    rewards = torch.tensor([[0.0, 0.0, 2.0]])
    values = torch.tensor([[0.5, 1.0, 1.5]])
    adv, returns = gae(rewards, values, torch.ones(1, 3), 1.0, 1.0)
    close(adv, [[2.0 - 0.5, 2.0 - 1.0, 2.0 - 1.5]])
    close(returns, [[2.0, 2.0, 2.0]])


def test_whiten_uses_masked_mean_and_masked_variance():
    x = torch.tensor([[1.0, 2.0, 3.0, 100.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    # mean over the mask 2, variance (1 + 0 + 1) / 3 (not unbiased: torchtune's default differs)
    sd = math.sqrt(2 / 3 + 1e-8)
    close(whiten(x, mask), [[-1 / sd, 0.0, 1 / sd, 0.0]])


# ----------------------------------------------------------------------------- clipped losses
# ratios 0.5, 1.0, 1.5 with advantages of both signs and clip 0.2 cover the four cases of the clip.
CLIP = 0.2


def test_clipped_policy_loss_is_the_pessimistic_bound_in_all_four_cases():
    ratio = torch.tensor([0.5, 0.5, 1.5, 1.5, 1.0])
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0, 2.0])
    old = torch.zeros(5)
    logp = torch.log(ratio).requires_grad_(True)
    pg, r = clipped_pg_loss(logp, old, adv, CLIP)
    close(r, ratio)
    close(pg, [
        max(-1 * 0.5, -1 * 0.8),    # A>0, r below the range: unclipped -0.5 (no credit for the clip)
        max(0.5, 0.8),              # A<0, r below the range: clipped 0.8
        max(-1.5, -1.2),            # A>0, r above the range: clipped -1.2
        max(1.5, 1.2),              # A<0, r above the range: unclipped 1.5
        -2.0,                       # r = 1
    ])
    pg.sum().backward()
    # d(-A r)/d logp = -A r where unclipped, 0 where the clipped branch is taken
    close(logp.grad, [-0.5, 0.0, 0.0, 1.5, -2.0])


def test_ppo_losses_value_clip_and_vf_coef():
    logp = torch.log(torch.tensor([[0.5, 1.5, 1.0]]))
    old = torch.zeros(1, 3)
    adv = torch.tensor([[-1.0, 1.0, 2.0]])
    values = torch.tensor([[0.5, 0.5, 0.9]])
    old_values = torch.tensor([[0.0, 0.0, 1.0]])
    returns = torch.tensor([[1.0, 0.0, 2.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    out = ppo_losses(logp, old, adv, values, old_values, returns, mask, clip=CLIP, cliprange_value=0.2, vf_coef=0.1)
    close(out.pg, [[0.8, -1.2, -2.0]])
    # V_clip = old + clip(V - old, -0.2, 0.2) = (0.2, 0.2, 0.9)
    vf = [0.5 * max((0.5 - 1.0) ** 2, (0.2 - 1.0) ** 2),   # 0.32: the clipped value is further off
          0.5 * max((0.5 - 0.0) ** 2, (0.2 - 0.0) ** 2),   # 0.125
          0.5 * (0.9 - 2.0) ** 2]                           # inside the range: 0.605
    close(out.vf, [vf])
    # token 2 is masked out of both means
    close(out.loss, (0.8 - 1.2) / 2 + 0.1 * (vf[0] + vf[1]) / 2)


def test_grpo_token_loss_is_a_token_mean_over_the_batch_with_k3_penalty():
    # sequence 0: 2 action tokens, A = +1, ratios 1.0 and 1.5; sequence 1: 1 action token, A = -1, ratio 0.5
    logp = torch.full((2, 2), LOG(0.5), requires_grad=True)
    ratio = torch.tensor([[1.0, 1.5], [0.5, 3.0]])
    old = logp.detach() - torch.log(ratio)
    ref = torch.full((2, 2), LOG(0.25))
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    beta = 0.1
    k3 = 0.5 + LOG(2) - 1                       # pi 0.5 vs ref 0.25, see test_k3_kl_values_and_gradient
    pg = [-1.0, -1.2, 0.8]                       # unclipped, clipped at 1.2, clipped at 0.8
    out = grpo_token_loss(logp, old, adv, mask, CLIP, beta, ref)
    # one mean over the 3 action tokens (not a mean of per-sequence means: that would be
    # ((-1 - 1.2)/2 + 0.8)/2 + beta*k3)
    close(out.loss, (sum(pg) + 3 * beta * k3) / 3)
    out.loss.backward()
    # policy gradient only through the unclipped token (-A r = -1), KL gradient beta * (1 - ref/pi) everywhere
    g_kl = beta * (1 - 0.25 / 0.5)
    close(logp.grad, [[(-1.0 + g_kl) / 3, g_kl / 3], [g_kl / 3, 0.0]])
    # without a reference there is no KL term
    close(grpo_token_loss(logp, old, adv, mask, CLIP).loss, sum(pg) / 3)


# ----------------------------------------------------------------------------- DPO
def test_dpo_loss_on_summed_masked_log_ratios():
    beta = 0.1
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0], [1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    # rows 0, 1 chosen; rows 2, 3 their rejected partners. Masked positions hold junk that must not count.
    logp = torch.tensor([[-1.0, -2.0, -50.0], [-1.0, -1.0, -1.0], [-2.0, -3.0, -50.0], [-0.5, -50.0, -50.0]],
                        requires_grad=True)
    ref = torch.tensor([[-2.0, -2.0, 0.0], [-1.0, -1.5, -1.5], [-2.0, -2.5, 0.0], [-1.0, 0.0, 0.0]])
    chosen = [(-3.0) - (-4.0), (-3.0) - (-4.0)]          # log pi(c) - log ref(c) = +1, +1
    rejected = [(-5.0) - (-4.5), (-0.5) - (-1.0)]        # -0.5, +0.5
    margins = [chosen[0] - rejected[0], chosen[1] - rejected[1]]   # 1.5, 0.5
    # -log sigmoid(z) = log(1 + e^-z)
    expected = sum(math.log1p(math.exp(-beta * m)) for m in margins) / 2
    out = dpo_loss(logp, ref, mask, 2, beta)
    close(out.margin, margins)
    close(out.loss, expected)
    out.loss.backward()
    # d/d logp(chosen token) = -beta * sigmoid(-beta m) / n_pairs; the rejected tokens get the opposite sign
    g = [beta * (1 / (1 + math.exp(beta * m))) / 2 for m in margins]
    close(logp.grad, [[-g[0], -g[0], 0.0], [-g[1], -g[1], -g[1]], [g[0], g[0], 0.0], [g[1], 0.0, 0.0]])


# ----------------------------------------------------------------------------- adaptive KL, LR schedule
def test_adaptive_kl_controller_moves_toward_the_target_within_the_clip():
    ctl = AdaptiveKLController(0.1, target=0.03)
    ctl.update(0.036, n_steps=100)               # KL 20 % above target: err = 0.036/0.03 - 1 = 0.2
    close(torch.tensor(ctl.value), 0.1 * (1 + 0.2 * 100 / KL_HORIZON))
    ctl = AdaptiveKLController(0.1, target=0.03)
    ctl.update(0.027, n_steps=100)               # 10 % below: err = -0.1 -> the coefficient shrinks
    close(torch.tensor(ctl.value), 0.1 * (1 - 0.1 * 100 / KL_HORIZON))
    ctl = AdaptiveKLController(0.1, target=0.03)
    ctl.update(0.3, n_steps=100)                 # 10x the target: err 9 is clipped to 0.2
    close(torch.tensor(ctl.value), 0.1 * (1 + 0.2 * 100 / KL_HORIZON))
    ctl = AdaptiveKLController(0.1, target=0.03)
    ctl.update(0.0, n_steps=100)                 # no KL at all: err -1 is clipped to -0.2
    close(torch.tensor(ctl.value), 0.1 * (1 - 0.2 * 100 / KL_HORIZON))
    fixed = AdaptiveKLController(0.1, target=None)
    fixed.update(0.3, n_steps=100)
    assert fixed.value == 0.1


def test_mean_kl_controller_updates_log_beta_unclipped_by_hand():
    from rc1.strategies.rl_math import MeanKLController

    ctl = MeanKLController(0.1, target=0.05, gain=0.1)
    ctl.update(0.15)        # 3 x target: log beta += 0.1 x 2
    assert ctl.value == pytest.approx(0.1 * math.exp(0.2))
    ctl.update(0.55)        # 11 x target: + 0.1 x 10, no clip (the sign controller would give 1.2 x)
    assert ctl.value == pytest.approx(0.1 * math.exp(1.2))
    ctl.update(0.0)         # no KL: - 0.1 at most
    assert ctl.value == pytest.approx(0.1 * math.exp(1.1))
    floored = MeanKLController(0.1, target=0.05, gain=0.1, floor=0.09)
    floored.update(0.0)     # 0.1 x e^-0.1 = 0.0905, above the floor
    floored.update(0.0)     # 0.0819: held at the floor
    assert floored.value == 0.09
    fixed = MeanKLController(0.1, target=None, gain=0.1)
    fixed.update(5.0)
    assert fixed.value == 0.1


def _closed_loop(controller_for, steps: int = 6000, seed: int = 0) -> list[float]:
    """A policy whose per-step KL is (c / beta) x X, X lognormal(0, 1) (heavy-tailed as k3 over ~100 tokens is:
    mean e^0.5 = 1.65 x its median): the per-step KL the controller sees, after a burn-in."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ctl = controller_for(0.05)
    out = []
    for t in range(steps):
        kl = 0.0025 / ctl.value * float(rng.lognormal(0.0, 1.0))
        ctl.update(kl, 1)
        if t >= steps // 3:
            out.append(kl)
    return out


def test_the_mean_controller_holds_the_mean_kl_where_the_sign_controller_holds_the_median():
    """The statistic the drift bound judges is the mean per-token KL. The sign controller (error clipped to
    +-20 %) holds the MEDIAN at target, so with heavy tails its mean sits ~1.65 x target, above a 1.5 x bound;
    the mean controller holds the mean at target."""
    import numpy as np

    from rc1.strategies.rl_math import MeanKLController

    target = 0.05
    sign = _closed_loop(lambda b: AdaptiveKLController(b, target, horizon=10))
    mean = _closed_loop(lambda b: MeanKLController(b, target, gain=0.1))
    assert float(np.median(sign)) == pytest.approx(target, rel=0.1)
    assert float(np.mean(sign)) > 1.5 * target
    assert float(np.mean(mean)) == pytest.approx(target, rel=0.1)


def test_the_error_cap_bounds_what_one_heavy_tailed_step_does_to_beta():
    """Seed 20250830 (2026-11-28): one k3 step at 3.72 nats/token against target 0.10 multiplied the unclipped
    controller's beta by exp(0.1 x 36.2) = 37. With the cap 3 the same step moves it by exp(0.3) at most, a
    sustained excess still raises it every step, and under lognormal(0, 1) per-step KL the mean stays within
    1.2 x target (the sign controller's sat at 1.65 x)."""
    import numpy as np

    from rc1.strategies.rl_math import MeanKLController

    free, capped = MeanKLController(0.083, 0.10, gain=0.1), MeanKLController(0.083, 0.10, gain=0.1, error_cap=3.0)
    free.update(3.72)
    capped.update(3.72)
    assert free.value == pytest.approx(0.083 * math.exp(0.1 * 36.2)) and free.value > 3.0
    assert capped.value == pytest.approx(0.083 * math.exp(0.3))
    capped.update(0.15)     # under the cap: the plain update, + 0.1 x 0.5
    assert capped.value == pytest.approx(0.083 * math.exp(0.35))
    for _ in range(20):
        capped.update(0.4)  # 4 x target for 20 steps: beta keeps rising
    assert capped.value == pytest.approx(0.083 * math.exp(0.35 + 20 * 0.3))
    held = _closed_loop(lambda b: MeanKLController(b, 0.05, gain=0.1, error_cap=3.0))
    assert 0.05 < float(np.mean(held)) < 1.2 * 0.05


@pytest.mark.parametrize("schedule,expected", [
    # warmup 2 of 10 updates: (n + 1) / (warmup + 1) for n < 2, then progress p = (n - 2) / 8
    ("linear", [1 / 3, 2 / 3, 1.0, 1 - 2 / 8, 1 - 4 / 8, 1 - 8 / 8, 0.0]),
    ("cosine", [1 / 3, 2 / 3, 1.0, 0.5 * (1 + math.cos(math.pi * 2 / 8)), 0.5 * (1 + math.cos(math.pi * 4 / 8)),
                0.0, 0.0]),
    ("constant", [1 / 3, 2 / 3, 1.0, 1.0, 1.0, 1.0, 1.0]),
])
def test_lr_schedule_multipliers(schedule, expected):
    f = lr_lambda(schedule, warmup_steps=2, total_updates=10)
    close(torch.tensor([f(n) for n in (0, 1, 2, 4, 6, 10, 12)]), expected)


def test_clip_higher_raises_only_the_upper_clip_by_hand():
    """DAPO's clip-higher: with advantage +1 a ratio of 1.5 is clipped at 1 + 0.28 instead of 1 + 0.2; with
    advantage -1 a ratio of 0.5 is still clipped at 1 - 0.2."""
    old = torch.zeros(1, 2)
    logp = torch.tensor([[math.log(1.5), math.log(0.5)]])
    adv = torch.tensor([[1.0, -1.0]])
    sym, _ = clipped_pg_loss(logp, old, adv, 0.2)
    high, _ = clipped_pg_loss(logp, old, adv, 0.2, clip_high=0.28)
    close(sym, [[-1.2, 0.8]])
    close(high, [[-1.28, 0.8]])
