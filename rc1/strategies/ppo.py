"""PPO (actor-critic) on the pure PyTorch engine.

- Critic: a value head (Linear(hidden, 1)) on the policy's last hidden state, trained with it.
- Rewards per action token: -kl_coef * (log pi_old - log pi_ref), plus the episode's rc1 reward on
  its last action token.
- GAE (gamma, gae_lambda) over each episode's action tokens in order (tool / user tokens between
  turns are the environment's and are skipped), advantages whitened over the batch, then scaled by
  each item's difficulty factor.
- Loss: clipped policy loss + vf_coef * clipped value loss - entropy_coef * entropy, for
  strategy.ppo_epochs passes over the rollouts (the recipe runs the passes: StepPlan.epochs).
- Old log-probs and values are computed with the same deterministic forward as the loss (the engine
  turns dropout off for RL), so the ratio is exactly 1 at the start of the first epoch.
- KL: `kl` is the per-token k3 KL(pi || ref), mean over action tokens, in nats (the quantity every
  strategy logs and `target_kl` is compared with). The coefficient kl_coef of the reward penalty is
  adapted toward target_kl by the recipe (rc1.training.monitor.KLControl), as for every strategy.
  `policy_kl` is k3 KL(pi_old || pi): how far the epochs moved the policy from the one that sampled.
- Sampling: log-probs are scored under the sampling distribution (model.temperature, model.top_p). When
  the sampler's numerics differ from the trainer's (`Policy.sampler_differs`: a bf16 sampling copy) the
  policy-gradient term of each token is weighted by min(pi_old / pi_sampler, importance_sampling_cap);
  `sampler_mismatch_kl` is logged whenever the episodes carry the sampler's log-probs.
- A split multi-turn episode (rc1.envs.env) is one row per model turn; GAE runs across its rows in order
  and its reward sits on the last action token of its last row.
"""

from __future__ import annotations

from dataclasses import replace

from rc1.engines.contract import Batch, LossOutput, PlanTensors, Policy, StepPlan
from rc1.strategies.common import (RolloutStrategy, ScoredRollout, collate, forward_rows, sampler_metrics,
                                   sampling_kwargs)
from rc1.strategies.rl_math import (gae, k3_kl, masked_mean, ppo_losses, token_weights, truncated_is_weight,
                                   whiten)

VALUE_HEAD = "value_head"


class PPOStrategy(RolloutStrategy):
    name = "ppo"

    def __init__(self, cfg, reward_model):
        super().__init__(cfg, reward_model)
        self.clip = cfg.engine.clip_coef
        self.kl_coef = cfg.strategy.kl_coef
        self.value_head = None

    def attach(self, policy: Policy) -> None:
        import torch

        super().attach(policy)
        policy.use_reference()
        hidden = policy.hidden_size
        head = torch.nn.Linear(hidden, 1)
        torch.nn.init.normal_(head.weight, std=1.0 / (hidden + 1) ** 0.5)
        torch.nn.init.zeros_(head.bias)
        self.value_head = policy.add_module(VALUE_HEAD, head)

    def values(self, hidden):
        return self.value_head(hidden).squeeze(-1)

    def plan(self, batch: Batch, ro: ScoredRollout) -> StepPlan:
        import torch

        s = self.cfg.strategy
        kw = sampling_kwargs(self.cfg)
        t = collate(self.policy, ro.episodes)
        mask, episode = t.action_mask, t.episode
        is_weight = None
        with torch.no_grad():
            micro = self.cfg.run.micro_batch_size
            cur = forward_rows(self.policy, t, micro, hidden=True, **kw)
            ref = forward_rows(self.policy, t, micro, reference=True, **kw).logp
            old_logp, old_values = cur.logp, self.values(cur.hidden)
            del cur
            kl_tok = (old_logp - ref) * mask
            token_rewards = -self.kl_coef * kl_tok
            last = (mask * torch.arange(mask.shape[1], device=mask.device)).argmax(1)
            scores = self.policy.to_device(torch.tensor(ro.rewards, dtype=torch.float32))[episode]
            # the episode's reward on its last action token: the last row of each episode that has one
            ends = torch.ones_like(episode, dtype=torch.bool)
            ends[:-1] = episode[1:] != episode[:-1]
            has_action = (mask.sum(1) > 0) & ends
            token_rewards[torch.arange(len(last)), last] += torch.where(has_action, scores, torch.zeros_like(scores))
            adv, returns = gae(token_rewards, old_values, mask, s.gamma, s.gae_lambda, episode=episode)
            scale = self.policy.to_device(torch.tensor(ro.advantage_scales, dtype=torch.float32))[episode]
            adv = whiten(adv, mask) * scale.unsqueeze(1)
            ref_kl = float(masked_mean(k3_kl(old_logp, ref), mask))
            if t.sample_logp is not None and self.is_cap is not None:
                is_weight = truncated_is_weight(old_logp, t.sample_logp, self.is_cap)
        # token means over the whole plan (rc1.engines.microbatch: micro-batches of its rows sum to its loss)
        t = replace(t, old_logp=old_logp, old_values=old_values, advantages=adv, returns=returns, ref_logp=ref,
                    is_weight=is_weight, token_weight=token_weights(mask))
        return StepPlan(tensors=t, loss_fn=self.loss, epochs=s.ppo_epochs, rollout=ro,
                        metrics={**ro.stats.record(), "kl_coef": self.kl_coef, "rollout_kl": ref_kl})

    def loss(self, policy: Policy, t: PlanTensors) -> LossOutput:
        import torch

        s = self.cfg.strategy
        out = policy.forward(t.input_ids, t.attention_mask, positions=t.action_mask, hidden=True,
                             entropy="grad" if s.entropy_coef else True, **sampling_kwargs(self.cfg))
        logp, mask = out.logp, t.action_mask
        values = self.values(out.hidden)
        loss, pg, vf, ratio = ppo_losses(logp, t.old_logp, t.advantages, values, t.old_values, t.returns,
                                         mask, clip=self.clip, cliprange_value=s.cliprange_value, vf_coef=s.vf_coef,
                                         is_weight=t.is_weight, weight=t.token_weight)
        ent = out.entropy
        if s.entropy_coef:  # the plan's token mean (tensors without token_weight are a whole plan)
            w = t.token_weight
            loss = loss - s.entropy_coef * (masked_mean(ent, mask) if w is None else (ent * w).sum())
        with torch.no_grad():
            lp = logp.detach()
            clipped = ((ratio < 1 - self.clip) | (ratio > 1 + self.clip)).float()
            metrics = {"kl": float(masked_mean(k3_kl(lp, t.ref_logp), mask)),
                       "policy_kl": float(masked_mean(k3_kl(t.old_logp, lp), mask)),
                       "ratio": float(masked_mean(ratio, mask)),
                       "clip_frac": float(masked_mean(clipped, mask)), "entropy": float(masked_mean(ent.detach(), mask)),
                       "pg_loss": float(masked_mean(pg, mask)), "vf_loss": float(masked_mean(vf, mask)),
                       "value_mean": float(masked_mean(values.detach(), mask))}
            metrics.update(sampler_metrics(t.sample_logp, t.old_logp, mask, t.is_weight))
        return LossOutput(loss, metrics)

    def set_kl_coef(self, value: float) -> None:
        self.kl_coef = float(value)

    def state_dict(self) -> dict:
        return {"kl_coef": self.kl_coef}

    def load_state_dict(self, state: dict) -> None:
        self.kl_coef = float(state["kl_coef"])
