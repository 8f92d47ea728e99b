"""GRPO: group-relative advantages over `num_generations` completions of each prompt.

    A_i    = (r_i - mean(group)) / (std(group) + eps)
    loss   = token-mean over action tokens of  max(-A r_t, -A clip(r_t, 1-c, 1+c)) + beta * KL_t
    r_t    = pi(a_t) / pi_old(a_t),   KL_t = k3 estimator toward the reference policy

pi_old is the policy that generated the rollouts (one update per batch, as in TRL's default), so
its log-probs are the detached current ones. The reference is the base model (LoRA adapters
disabled; a frozen copy with full fine-tuning). beta = strategy.kl_coef.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rc1.strategies.common import clipped_pg_loss, collate, k3_kl, masked_mean, rollout_and_score

ADV_EPS = 1e-4


class GRPOLoss(NamedTuple):
    loss: Any    # scalar: token mean over every action token of the batch of pg + beta * kl
    pg: Any      # (B, T) clipped policy loss per token
    kl: Any      # (B, T) k3 KL toward the reference per token (zeros without one)
    ratio: Any   # (B, T) pi / pi_old per token


def grpo_advantages(rewards, group_size: int, eps: float = ADV_EPS):
    """(r - mean(group)) / (std(group) + eps) per group of `group_size` consecutive rewards (unbiased std)."""
    g = rewards.view(-1, group_size)
    return ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + eps)).view(-1)


def grpo_token_loss(logp, old_logp, advantages, mask, clip: float, beta: float = 0.0, ref_logp=None) -> GRPOLoss:
    """GRPO's loss on per-token log-probs (B, T), one advantage per sequence (B,), action mask (B, T).

    Normalised by the number of action tokens in the whole (micro-)batch, as TRL's loss_type "bnpo"
    (and "dapo" when a generation batch is one micro-batch); TRL's "grpo" averages each sequence over
    its own tokens first, "dr_grpo" divides the token sum by B * max_completion_length."""
    import torch

    pg, ratio = clipped_pg_loss(logp, old_logp, advantages.unsqueeze(1), clip)
    kl = k3_kl(logp, ref_logp) if ref_logp is not None else torch.zeros_like(logp)
    return GRPOLoss(masked_mean(pg + beta * kl, mask), pg, kl, ratio)


class GRPOStrategy:
    name = "grpo"

    def __init__(self, cfg, reward_model):
        self.cfg = cfg
        self.reward_model = reward_model
        self.group_size = cfg.strategy.num_generations
        self.beta = cfg.strategy.kl_coef
        self.clip = cfg.engine.clip_coef
        self.engine = None

    def attach_engine(self, engine) -> None:
        self.engine = engine
        if self.beta > 0:
            engine.needs_reference()

    def advantages(self, rewards):
        return grpo_advantages(rewards, self.group_size)

    def on_batch(self, batch: dict) -> dict[str, float]:
        import torch

        ro = rollout_and_score(self.engine, self.reward_model, batch, self.group_size)
        tensors = collate(self.engine, ro.episodes)
        tensors["advantages"] = self.engine.to_device(self.advantages(torch.tensor(ro.rewards, dtype=torch.float32)))
        if self.beta > 0:
            with torch.no_grad():
                tensors["ref_logp"] = self.engine.forward(tensors["input_ids"], tensors["attention_mask"],
                                                          positions=tensors["action_mask"], reference=True)["logp"]
        batch["tensors"] = tensors
        batch["loss_fn"] = self.loss
        batch["rollout"] = ro
        return dict(ro.stats)

    def loss(self, engine, t: dict):
        import torch

        out = engine.forward(t["input_ids"], t["attention_mask"], positions=t["action_mask"], entropy=True)
        logp, mask = out["logp"], t["action_mask"]
        old = t.get("old_logp")
        if old is None:
            old = t["old_logp"] = logp.detach()
        loss, pg, kl, ratio = grpo_token_loss(logp, old, t["advantages"], mask, self.clip, self.beta, t.get("ref_logp"))
        with torch.no_grad():
            clipped = ((ratio < 1 - self.clip) | (ratio > 1 + self.clip)).float()
            metrics = {"kl": float(masked_mean(kl, mask)), "ratio": float(masked_mean(ratio, mask)),
                       "clip_frac": float(masked_mean(clipped, mask)),
                       "entropy": float(masked_mean(out["entropy"], mask)),
                       "pg_loss": float(masked_mean(pg, mask))}
        return loss, metrics

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
