"""GRPO: group-relative advantages over `num_generations` completions of each prompt.

    A_i    = scale_i * (r_i - mean(group)) / std          std: strategy.scale_rewards (group | batch | none),
                                                         then re-centred per group (rl_math.scale_group_advantages)
    loss   = aggregate over action tokens of  max(-A r_t, -A clip(r_t, 1-c, 1+c)) + beta * KL_t
    r_t    = pi(a_t) / pi_old(a_t),   KL_t = k3 estimator toward the reference policy

scale_i is the item's difficulty factor (RewardBreakdown.advantage_scale). The aggregation is
strategy.loss_type (token | sequence | dr_grpo, see rc1.strategies.rl_math). pi_old is the policy
that generated the rollouts (one update per batch, as in TRL's default), so its log-probs are the
detached current ones. The reference is the base model (LoRA adapters disabled; a frozen copy with
full fine-tuning); it is used when beta > 0, or when `target_kl` is set (to measure the KL).
beta = strategy.kl_coef, adapted toward target_kl by rc1.training.kl when kl_control is adaptive.

Log-probs are scored under the sampling distribution (model.temperature, model.top_p), as the sampler
drew the tokens. When the sampler's numerics differ from the trainer's (`Policy.sampler_differs`: a
bf16 sampling copy) each token's policy-gradient term is weighted by min(pi_old / pi_sampler, C),
C = strategy.importance_sampling_cap (None: off); `sampler_mismatch_kl` is logged whenever the
episodes carry the sampler's log-probs (rc1.strategies.rl_math).

A split multi-turn episode (rc1.envs.env) is several rows, one per model turn; each row gets its
episode's advantage.

Rows without a gradient skip forward and backward: with no KL term (beta 0 and no target_kl), a row whose
advantage is 0 (its group's rewards all equal) has a loss of exactly 0 per token, at any ratio and IS weight,
so the loss reads only the rows whose advantage is not 0 (their token weights are still the whole plan's:
the same gradient). A micro-batch with none runs no forward: its loss is `Policy.zero_loss()`, whose
backward gives every trainable parameter the zero gradient the full batch would (so AdamW steps as after
any batch, its moments carrying on, and data-parallel ranks still all-reduce together). Early in training
most groups have no signal (every answer wrong), and their forward and backward were most of a step. The
loss metrics (entropy, ratio, clip_frac, and sampler_mismatch_kl, which needs the trainer's log-probs) are
those of the rows the loss read (None, or absent, when it read none); `loss_rows_frac` is their share.
"""

from __future__ import annotations

from dataclasses import replace

from rc1.engines.contract import Batch, LossOutput, PlanTensors, Policy, StepPlan
from rc1.strategies.common import (RolloutStrategy, ScoredRollout, collate, forward_rows, sampler_metrics,
                                   sampling_kwargs)
from rc1.strategies.rl_math import (grpo_advantages, grpo_token_loss, masked_mean, scale_group_advantages, token_weights,
                                   truncated_is_weight)


class GRPOStrategy(RolloutStrategy):
    # the header and __init__ look like PPO's (duplicates lists the pair by shape); each reads its own settings
    name = "grpo"

    def __init__(self, cfg, reward_model):
        super().__init__(cfg, reward_model)
        self.beta = cfg.strategy.kl_coef
        self.clip = cfg.engine.clip_coef
        self.clip_high = cfg.engine.clip_coef_high
        self.measure_kl = self.beta > 0 or cfg.effective_target_kl is not None

    def attach(self, policy: Policy) -> None:
        super().attach(policy)
        if self.measure_kl:
            policy.use_reference()

    def advantages(self, rewards):
        return grpo_advantages(rewards, self.group_size, self.cfg.strategy.scale_rewards)

    def forward_kwargs(self) -> dict:
        return sampling_kwargs(self.cfg)

    def plan(self, batch: Batch, ro: ScoredRollout) -> StepPlan:
        import torch

        t = collate(self.policy, ro.episodes)
        adv = self.advantages(torch.tensor(ro.rewards, dtype=torch.float32))
        adv = scale_group_advantages(adv, torch.tensor(ro.advantage_scales, dtype=torch.float32), self.group_size)
        advantages = self.policy.to_device(adv)[t.episode]  # one per row
        # the loss type's normalisation over the whole plan, so micro-batches of its rows sum to its loss
        weight = token_weights(t.action_mask, self.cfg.strategy.loss_type, self.cfg.model.max_new_tokens,
                               episode=t.episode)
        ref_logp = None
        if self.measure_kl:
            with torch.no_grad():
                ref_logp = forward_rows(self.policy, t, self.cfg.run.micro_batch_size, reference=True,
                                        **self.forward_kwargs()).logp
        tensors = replace(t, advantages=advantages, token_weight=weight, ref_logp=ref_logp)
        return StepPlan(tensors=tensors, loss_fn=self.loss, rollout=ro, metrics=ro.stats.record())

    def rows_with_gradient(self, t: PlanTensors) -> PlanTensors | None:
        """The rows of `t` whose loss can have a gradient (module docstring): all of them with a KL term, else
        those whose advantage is not 0; None when there is none."""
        import torch

        if self.measure_kl or self.beta > 0 or t.advantages is None:
            return t
        keep = torch.nonzero(t.advantages != 0).flatten()
        if keep.numel() == t.rows:
            return t
        return t.take(keep) if keep.numel() else None

    def loss(self, policy: Policy, t: PlanTensors) -> LossOutput:
        import torch

        rows = t.rows
        t = self.rows_with_gradient(t)
        if t is None:
            return LossOutput(policy.zero_loss(), {"kl": None, "kl_coef": self.beta, "ratio": None, "clip_frac": None,
                                                   "entropy": None, "pg_loss": 0.0, "loss_rows_frac": 0.0})
        out = policy.forward(t.input_ids, t.attention_mask, positions=t.action_mask, entropy=True,
                             **self.forward_kwargs())
        logp, mask = out.logp, t.action_mask
        old = logp.detach()  # one update per rollout (strategy.ppo_epochs 1): pi_old is the current policy
        is_weight = None
        if t.sample_logp is not None and self.is_cap is not None:
            is_weight = truncated_is_weight(old, t.sample_logp, self.is_cap)
        loss, pg, kl, ratio = grpo_token_loss(logp, old, t.advantages, mask, self.clip, self.beta, t.ref_logp,
                                              self.cfg.strategy.loss_type, self.cfg.model.max_new_tokens,
                                              is_weight=is_weight, episode=t.episode, weight=t.token_weight,
                                              clip_high=self.clip_high)
        with torch.no_grad():
            high = self.clip if self.clip_high is None else self.clip_high
            clipped = ((ratio < 1 - self.clip) | (ratio > 1 + high)).float()
            metrics = {"kl": None if kl is None else float(masked_mean(kl, mask)),
                       "kl_coef": self.beta, "ratio": float(masked_mean(ratio, mask)),
                       "clip_frac": float(masked_mean(clipped, mask)),
                       "entropy": float(masked_mean(out.entropy, mask)),
                       "pg_loss": float(masked_mean(pg, mask)), "loss_rows_frac": t.rows / max(rows, 1)}
            metrics.update(sampler_metrics(t.sample_logp, old, mask, is_weight))
        return LossOutput(loss, metrics)

    @property
    def kl_coef(self) -> float:
        return self.beta

    def set_kl_coef(self, value: float) -> None:
        self.beta = float(value)

    def state_dict(self) -> dict:
        return {"kl_coef": self.beta}

    def load_state_dict(self, state: dict) -> None:
        if "kl_coef" in state:
            self.beta = float(state["kl_coef"])
