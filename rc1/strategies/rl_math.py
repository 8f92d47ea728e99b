"""The RL maths of rc1's strategies, as pure functions of tensors (unit-tested with hand-computed numbers).

Conventions: per-token tensors are [B, T] over the shifted sequence (position t scores token t+1);
`mask` is 1 on the tokens the policy generated (action tokens) and 0 elsewhere.

Group advantages (GRPO / RLOO), G completions per prompt, consecutive in the batch:
    grpo   A_i = (r_i - mean_g r) / (std + eps)     std per group ("group"), over the batch ("batch"),
                                                    or 1 ("none", Dr. GRPO)
    rloo   A_i = r_i - mean_{j != i} r_j
Each advantage is then multiplied by its episode's `advantage_scale` (the difficulty bonus
1 + beta*(I[hard] - I[easy]), times reward.unstable_downweight when the judge's grade of the episode was
unstable): a factor on the rewards of a whole group would cancel in the z-score. The scaled advantages are
re-centred per group (scale_group_advantages), so a down-weighted episode leaves its group summing to zero.

Clipped policy-gradient loss per token (PPO / GRPO), ratio rho = exp(logp - old_logp):
    l_t = max(-A rho, -A clip(rho, 1 - c, 1 + c))  (+ beta * KL_t)
aggregated as ("loss_type", as in TRL):
    token      sum over all action tokens of the batch / their number            (TRL "dapo": the recipe
                                                                                 renormalises an accumulation
                                                                                 window by ITS token count)
    sequence   mean over sequences of each sequence's token mean                 (TRL "grpo")
    dr_grpo    sum over all action tokens / (B * max_new_tokens)                 (TRL "dr_grpo")

KL(pi || ref) per token, k3 estimator (Schulman): exp(ref - logp) - (ref - logp) - 1  >= 0. It is the
KL every strategy logs and `target_kl` is compared with: per-token, mean over action tokens, in nats.
The estimator needs tokens drawn from its FIRST argument's policy.

Sampler / trainer mismatch (a bf16 sampling copy, later a separate inference engine; as TRL does for
vLLM): tokens were drawn from pi_sampler, the loss treats them as drawn from pi_old (the trainer's
numerics). Each token's policy-gradient term is weighted by the truncated importance ratio
    w_t = min(pi_old(a_t) / pi_sampler(a_t), C)          C = strategy.importance_sampling_cap
and `sampler_mismatch_kl` = k3 KL(pi_sampler || pi_old) over the action tokens (tokens ~ pi_sampler).

Multi-turn episodes split into one sample per model turn (rc1.envs.env split_turns): `episode` maps each
row to its episode (rows of an episode consecutive, in turn order). GAE runs over an episode's action
tokens across its rows; the "sequence" and "dr_grpo" aggregations count episodes, not rows.

GAE over each episode's action tokens (environment tokens between turns are skipped, not zeroed):
    delta_t = r_t + gamma V_{t'} - V_t,   A_t = delta_t + gamma lambda A_{t'}     (t' = next action token,
                                                                                  in the next row of the same
                                                                                  episode when split)

DPO (sigmoid loss, Rafailov et al.), sequence log-probs summed over action tokens:
    loss = -log sigmoid(beta * ((pi(c) - ref(c)) - (pi(r) - ref(r))))

Adaptive KL coefficient (Ziegler et al. 2019):
    coef <- coef * (1 + clip(KL / target - 1, -0.2, 0.2) * n / horizon)
"""

from __future__ import annotations

from typing import Any, Literal, NamedTuple

ADV_EPS = 1e-4
KL_HORIZON = 10000
KL_CLIP = 0.2

ScaleRewards = Literal["group", "batch", "none"]
LossType = Literal["token", "sequence", "dr_grpo"]


def masked_mean(x, mask):
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def k3_kl(logp, ref_logp):
    """Per-token KL(pi || ref) estimator exp(r - l) - (r - l) - 1 (non-negative, unbiased)."""
    import torch

    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def grpo_advantages(rewards, group_size: int, scale: ScaleRewards = "group", *, eps: float = ADV_EPS):
    """Group-relative advantages of rewards [B] (groups of `group_size` consecutive completions)."""
    g = rewards.view(-1, group_size)
    centred = g - g.mean(1, keepdim=True)
    if scale == "group":
        centred = centred / (g.std(1, keepdim=True) + eps)
    elif scale == "batch":
        centred = centred / (rewards.std() + eps)
    elif scale != "none":
        raise ValueError(f"scale_rewards {scale!r}: expected group, batch or none")
    return centred.reshape(-1)


def rloo_advantages(rewards, group_size: int):
    """Leave-one-out baseline: A_i = r_i - mean of the other completions of the same prompt."""
    g = rewards.view(-1, group_size)
    baseline = (g.sum(1, keepdim=True) - g) / (group_size - 1)
    return (g - baseline).reshape(-1)


def scale_group_advantages(advantages, scales, group_size: int):
    """Each episode's advantage times its scale, re-centred so every group still sums to zero.

    A group's advantages sum to zero (GRPO, RLOO); the difficulty factor is the same for a whole group and keeps
    that, but the unstable-grade down-weight scales single episodes and would not: the group would push the
    policy's log-probs of ALL its completions down (or up) on average. Re-centring removes that drift and keeps
    the down-weighted episode's smaller share:  A'_i = s_i A_i - mean_{j in group} s_j A_j."""
    g = (advantages * scales).view(-1, group_size)
    return (g - g.mean(1, keepdim=True)).reshape(-1)


def clipped_pg(logp, old_logp, advantages, clip: float, clip_high: float | None = None):
    """Per-token clipped surrogate loss and ratio. advantages: [B] (one per sequence) or [B, T]. `clip_high`:
    the upper clip 1 + clip_high when it differs from the lower one (DAPO's clip-higher, TRL's epsilon_high)."""
    import torch

    ratio = torch.exp(logp - old_logp)
    adv = advantages.unsqueeze(1) if advantages.dim() == 1 and logp.dim() == 2 else advantages
    high = clip if clip_high is None else clip_high
    loss = torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 1 - clip, 1 + high))
    return loss, ratio


def per_episode_sum(row_values, episode=None):
    """Sum of per-row values [B] per episode ([E]; each row its own episode when `episode` is None)."""
    if episode is None:
        return row_values
    n = int(episode.max()) + 1 if episode.numel() else 0
    return row_values.new_zeros(n).index_add(0, episode, row_values)


def aggregate(per_token, mask, loss_type: LossType = "token", max_new_tokens: int | None = None, episode=None):
    """Reduce a per-token loss to a scalar (see the module docstring for the three types)."""
    if loss_type == "token":
        return masked_mean(per_token, mask)
    if loss_type == "sequence":
        sums = per_episode_sum((per_token * mask).sum(1), episode)
        counts = per_episode_sum(mask.sum(1), episode)
        return (sums / counts.clamp(min=1.0)).mean()
    if loss_type == "dr_grpo":
        if not max_new_tokens:
            raise ValueError("loss_type dr_grpo needs max_new_tokens")
        episodes = mask.shape[0] if episode is None else int(episode.max()) + 1
        return (per_token * mask).sum() / (episodes * max_new_tokens)
    raise ValueError(f"loss_type {loss_type!r}: expected token, sequence or dr_grpo")


def token_weights(mask, loss_type: LossType = "token", max_new_tokens: int | None = None, episode=None):
    """Per-token weights [B, T] with aggregate(x, mask, ...) == (x * weights).sum() for any per-token x.

    Computed once over a whole plan, they let its rows go through forward/backward in micro-batches
    (rc1.engines.microbatch): each micro-batch's (x * weights).sum() is its exact share of the plan's loss."""
    if loss_type == "token":
        return mask / mask.sum().clamp(min=1.0)
    if loss_type == "sequence":
        counts = per_episode_sum(mask.sum(1), episode)
        row_counts = counts if episode is None else counts[episode]
        return mask / (row_counts.clamp(min=1.0) * counts.shape[0]).unsqueeze(1)
    if loss_type == "dr_grpo":
        if not max_new_tokens:
            raise ValueError("loss_type dr_grpo needs max_new_tokens")
        episodes = mask.shape[0] if episode is None else int(episode.max()) + 1
        return mask / (episodes * max_new_tokens)
    raise ValueError(f"loss_type {loss_type!r}: expected token, sequence or dr_grpo")


def truncated_is_weight(old_logp, sample_logp, cap: float):
    """Per-token min(pi_old / pi_sampler, cap): the sampler-mismatch correction (module docstring)."""
    import torch

    return torch.exp(old_logp - sample_logp).clamp(max=cap)


class GRPOLoss(NamedTuple):
    loss: Any    # scalar: pg + beta * kl, aggregated by loss_type
    pg: Any      # [B, T] clipped policy loss per token (times the IS weight when given)
    kl: Any      # [B, T] k3 KL toward the reference per token (None without a reference)
    ratio: Any   # [B, T] pi / pi_old per token


def grpo_token_loss(logp, old_logp, advantages, mask, clip: float, beta: float = 0.0, ref_logp=None,
                    loss_type: LossType = "token", max_new_tokens: int | None = None, *, is_weight=None,
                    episode=None, weight=None, clip_high: float | None = None) -> GRPOLoss:
    """GRPO's loss on per-token log-probs [B, T], one advantage per row [B], action mask [B, T].

    loss_type "token" is a token mean over these rows; over an accumulation window the recipe renormalises the
    gradients by the window's tokens (TrainingRecipe.window_grad_scale), which makes it TRL's "dapo";
    "sequence" is TRL's "grpo"; "dr_grpo" is TRL's "dr_grpo" (tests/training/test_losses_vs_trl.py).
    The KL term is beta * k3 without TRL 1.16's importance-ratio factor (use_bias_correction_kl):
    the same loss value on-policy, a different KL gradient off-policy. `is_weight` (truncated
    importance weights, see truncated_is_weight) multiplies the policy-gradient term per token. `weight`
    (token_weights over a whole plan) replaces the aggregation: the loss is then (per_token * weight).sum(),
    this micro-batch's share of the plan's loss. `clip_high`: DAPO's clip-higher upper bound (see clipped_pg)."""
    pg, ratio = clipped_pg(logp, old_logp, advantages, clip, clip_high)
    if is_weight is not None:
        pg = pg * is_weight
    kl = k3_kl(logp, ref_logp) if ref_logp is not None else None
    per_token = pg + beta * kl if (kl is not None and beta > 0) else pg
    if weight is not None:
        return GRPOLoss((per_token * weight).sum(), pg, kl, ratio)
    return GRPOLoss(aggregate(per_token, mask, loss_type, max_new_tokens, episode=episode), pg, kl, ratio)


class PPOLosses(NamedTuple):
    loss: Any    # scalar: masked_mean(pg) + vf_coef * masked_mean(vf) (the entropy bonus is the caller's)
    pg: Any      # [B, T] clipped policy loss per token (times the IS weight when given)
    vf: Any      # [B, T] clipped value loss per token
    ratio: Any   # [B, T] pi / pi_old per token


def ppo_losses(logp, old_logp, advantages, values, old_values, returns, mask, *, clip: float,
               cliprange_value: float, vf_coef: float, is_weight=None, weight=None) -> PPOLosses:
    """PPO's clipped policy loss and clipped value loss 0.5 * max((V - R)^2, (V_clip - R)^2), token means
    (with `weight`, token_weights of the whole plan: this micro-batch's share of the plan's token means)."""
    pg, ratio = clipped_pg(logp, old_logp, advantages, clip)
    if is_weight is not None:
        pg = pg * is_weight
    vf = clipped_value_loss(values, old_values, returns, cliprange_value)
    if weight is not None:
        return PPOLosses((pg * weight).sum() + vf_coef * (vf * weight).sum(), pg, vf, ratio)
    return PPOLosses(masked_mean(pg, mask) + vf_coef * masked_mean(vf, mask), pg, vf, ratio)


def gae(rewards, values, mask, gamma: float, lam: float, episode=None):
    """(advantages, returns) by GAE over the action tokens of each episode: each row, or the consecutive
    rows `episode` gives the same index (a split episode's turns, in order). See the module docstring."""
    import torch

    adv = torch.zeros_like(rewards)
    B = rewards.shape[0]
    ep = list(range(B)) if episode is None else episode.tolist()
    chains: list[list[tuple[int, int]]] = []
    for b in range(B):
        if b == 0 or ep[b] != ep[b - 1]:
            chains.append([])
        chains[-1] += [(b, i) for i in torch.nonzero(mask[b] > 0).flatten().tolist()]
    for chain in chains:
        last_gae, next_value = 0.0, 0.0
        for b, i in reversed(chain):
            delta = rewards[b, i] + gamma * next_value - values[b, i]
            last_gae = delta + gamma * lam * last_gae
            adv[b, i] = last_gae
            next_value = values[b, i]
    return adv, adv + values * mask


def whiten(x, mask, eps: float = 1e-8):
    """(x - mean) / std over the masked entries; 0 outside the mask."""
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return (x - mean) * (var + eps).rsqrt() * mask


def clipped_value_loss(values, old_values, returns, clip: float):
    """Per-token 0.5 * max((V - R)^2, (clip(V, V_old +- c) - R)^2)."""
    import torch

    v_clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    return 0.5 * torch.maximum((values - returns) ** 2, (v_clipped - returns) ** 2)


class DPOLoss(NamedTuple):
    loss: Any     # scalar: mean over pairs of -log sigmoid(beta * margin)
    margin: Any   # [n_pairs] implicit reward margin (log-ratio of chosen minus log-ratio of rejected)
    delta: Any    # [rows, T] masked per-token log pi - log ref


def dpo_loss(logp, ref_logp, mask, n_pairs: int, beta: float, episode=None, *, interleaved: bool = False,
             total_pairs: int | None = None) -> DPOLoss:
    """Sigmoid DPO loss; episodes 0..n-1 are the chosen ones, n..2n-1 their rejected partners (`interleaved`:
    episode 2k is pair k's chosen one, 2k+1 its rejected one; a split episode's rows are summed into its
    episode). Sequence log-probs: sums over the action mask. The mean over pairs divides by `total_pairs`
    when given (a micro-batch of a plan with that many pairs: its share of the plan's loss), else by n_pairs."""
    import torch.nn.functional as F

    delta = (logp - ref_logp) * mask
    seq = per_episode_sum(delta.sum(1), episode)
    margin = seq[0::2] - seq[1::2] if interleaved else seq[:n_pairs] - seq[n_pairs:]
    losses = -F.logsigmoid(beta * margin)
    return DPOLoss(losses.sum() / (total_pairs or n_pairs), margin, delta)


class AdaptiveKLController:
    """The KL coefficient that holds the measured KL near `target` (fixed when target is None), never below
    `floor` (None: no floor)."""

    def __init__(self, init_kl_coef: float, target: float | None, horizon: int = KL_HORIZON,
                 floor: float | None = None):
        self.value = init_kl_coef
        self.target = target
        self.horizon = horizon
        self.floor = floor

    def update(self, current_kl: float, n_steps: int) -> None:
        if self.target is None:
            return
        err = min(max(current_kl / self.target - 1.0, -KL_CLIP), KL_CLIP)
        self.value *= 1.0 + err * n_steps / self.horizon
        if self.floor is not None:
            self.value = max(self.value, self.floor)


# The mean controller's coefficient stays inside these (numerical range only, not a floor that ratchets)
MEAN_KL_COEF_RANGE = (1e-6, 1e3)


class MeanKLController:
    """The KL coefficient that holds the MEAN measured KL at `target`: an unclipped update of log(coef),

        log coef <- log coef + gain * (KL / target - 1)

    Its expected change is zero exactly when E[KL] = target, so the mean per-token KL is what it regulates (the
    statistic the drift bound judges). AdaptiveKLController's error clipped to +-20 % makes it a sign
    controller: it holds the per-step MEDIAN at target, and with heavy-tailed per-step KL (k3 over ~100 tokens)
    the mean then sits well above target (measured 1.4-1.5 x). A step at 10 x target raises the coefficient
    by exp(9 * gain); a step at zero KL lowers it by exp(-gain) at most, so it winds down slowly before the
    policy learns anything. `floor` (None: none) as AdaptiveKLController's.

    `error_cap` (None: unclipped) bounds the error from above, KL / target - 1 <= error_cap, so one step moves
    log coef by at most gain x error_cap: unclipped, one k3 step of 3.7 nats/token at target 0.10 multiplied
    the coefficient by 37 and stopped a make run's learning (docs/benchmarks.md, 2026-11-28). With the cap the
    controller holds a winsorized mean; under lognormal(0, 1) per-step KL a cap of 3 puts the mean at ~1.1 x
    target (the sign controller's at 1.65 x), and a sustained excess still raises the coefficient every step."""

    def __init__(self, init_kl_coef: float, target: float | None, gain: float, floor: float | None = None,
                 error_cap: float | None = None):
        self.value = init_kl_coef
        self.target = target
        self.gain = gain
        self.floor = floor
        self.error_cap = error_cap

    def update(self, current_kl: float, n_steps: int = 1) -> None:
        import math

        if self.target is None:
            return
        lo, hi = MEAN_KL_COEF_RANGE
        error = current_kl / self.target - 1.0
        if self.error_cap is not None:
            error = min(error, self.error_cap)
        log_coef = math.log(max(self.value, lo)) + self.gain * n_steps * error
        self.value = min(max(math.exp(min(log_coef, math.log(hi))), lo), hi)
        if self.floor is not None:
            self.value = max(self.value, self.floor)
