"""PPO (actor-critic) on the pure PyTorch engine.

- Critic: a value head (Linear(hidden, 1)) on the policy's last hidden state, trained with it.
- Rewards per action token: -kl_coef * (log pi_old - log pi_ref), plus the episode's rc1 reward on
  its last action token.
- GAE (gamma, gae_lambda) over each episode's action tokens in order (tool / user tokens between
  turns are the environment's and are skipped), advantages whitened over the batch.
- Loss: clipped policy loss + vf_coef * clipped value loss - entropy_coef * entropy.
- Adaptive KL coefficient (Ziegler et al. 2019): after each batch
      kl_coef *= 1 + clip(KL / target - 1, -0.2, 0.2) * n / KL_HORIZON
  toward `cfg.effective_target_kl` (fixed when no target is configured). It is strategy state and
  is checkpointed.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rc1.strategies.common import clipped_pg_loss, collate, masked_mean, rollout_and_score

KL_HORIZON = 10000
KL_CLIP = 0.2


class PPOLosses(NamedTuple):
    loss: Any    # scalar: masked_mean(pg) + vf_coef * masked_mean(vf) (the entropy bonus is the caller's)
    pg: Any      # (B, T) clipped policy loss per token
    vf: Any      # (B, T) clipped value loss per token
    ratio: Any   # (B, T) pi / pi_old per token


def ppo_losses(logp, old_logp, advantages, values, old_values, returns, mask, *, clip: float,
               cliprange_value: float, vf_coef: float) -> PPOLosses:
    """PPO's clipped policy loss and clipped value loss 0.5 * max((V - R)^2, (V_clip - R)^2), token means."""
    import torch

    pg, ratio = clipped_pg_loss(logp, old_logp, advantages, clip)
    v_clipped = old_values + torch.clamp(values - old_values, -cliprange_value, cliprange_value)
    vf = 0.5 * torch.maximum((values - returns) ** 2, (v_clipped - returns) ** 2)
    return PPOLosses(masked_mean(pg, mask) + vf_coef * masked_mean(vf, mask), pg, vf, ratio)


class AdaptiveKLController:
    def __init__(self, init_kl_coef: float, target: float | None, horizon: int = KL_HORIZON):
        self.value = init_kl_coef
        self.target = target
        self.horizon = horizon

    def update(self, current_kl: float, n_steps: int) -> None:
        if self.target is None:
            return
        err = min(max(current_kl / self.target - 1.0, -KL_CLIP), KL_CLIP)
        self.value *= 1.0 + err * n_steps / self.horizon


class PPOStrategy:
    name = "ppo"

    def __init__(self, cfg, reward_model):
        s = cfg.strategy
        self.cfg = cfg
        self.reward_model = reward_model
        self.group_size = s.num_generations
        self.clip = cfg.engine.clip_coef
        self.kl_ctl = AdaptiveKLController(s.kl_coef, cfg.effective_target_kl)
        self.engine = None

    def attach_engine(self, engine) -> None:
        import torch

        self.engine = engine
        engine.needs_reference()
        hidden = engine.model.config.get_text_config().hidden_size
        head = torch.nn.Linear(hidden, 1)
        torch.nn.init.normal_(head.weight, std=1.0 / (hidden + 1) ** 0.5)
        torch.nn.init.zeros_(head.bias)
        engine.register_module("value_head", head)

    def values(self, hidden):
        return self.engine.extra_modules["value_head"](hidden).squeeze(-1)

    def on_batch(self, batch: dict) -> dict[str, float]:
        import torch

        s = self.cfg.strategy
        ro = rollout_and_score(self.engine, self.reward_model, batch, self.group_size)
        t = collate(self.engine, ro.episodes)
        mask = t["action_mask"]
        with torch.no_grad():
            cur = self.engine.forward(t["input_ids"], t["attention_mask"], positions=mask, hidden=True)
            ref = self.engine.forward(t["input_ids"], t["attention_mask"], positions=mask, reference=True)["logp"]
            old_logp, old_values = cur["logp"], self.values(cur["hidden"])
            kl_tok = (old_logp - ref) * mask
            token_rewards = -self.kl_ctl.value * kl_tok
            last = (mask * torch.arange(mask.shape[1], device=mask.device)).argmax(1)
            scores = self.engine.to_device(torch.tensor(ro.rewards, dtype=torch.float32))
            has_action = mask.sum(1) > 0
            token_rewards[torch.arange(len(last)), last] += torch.where(has_action, scores, torch.zeros_like(scores))
            adv, returns = gae(token_rewards, old_values, mask, s.gamma, s.gae_lambda)
            adv = whiten(adv, mask)
        t.update(old_logp=old_logp, old_values=old_values, advantages=adv, returns=returns)
        seq_kl = float((kl_tok.sum(1)).mean())
        self.kl_ctl.update(seq_kl, len(ro.episodes))
        batch["tensors"] = t
        batch["loss_fn"] = self.loss
        batch["rollout"] = ro
        batch["multi_epoch"] = True
        return {**ro.stats, "kl_coef": self.kl_ctl.value, "seq_kl": seq_kl}

    def loss(self, engine, t: dict):
        import torch

        s = self.cfg.strategy
        out = engine.forward(t["input_ids"], t["attention_mask"], positions=t["action_mask"], hidden=True,
                             entropy="grad" if s.entropy_coef else True)
        logp, mask = out["logp"], t["action_mask"]
        values = self.values(out["hidden"])
        loss, pg, vf, ratio = ppo_losses(logp, t["old_logp"], t["advantages"], values, t["old_values"], t["returns"],
                                         mask, clip=self.clip, cliprange_value=s.cliprange_value, vf_coef=s.vf_coef)
        ent = out["entropy"]
        if s.entropy_coef:
            loss = loss - s.entropy_coef * masked_mean(ent, mask)
        with torch.no_grad():
            clipped = ((ratio < 1 - self.clip) | (ratio > 1 + self.clip)).float()
            kl = masked_mean(logp.detach() - t["old_logp"], mask)
            metrics = {"kl": float(kl), "ratio": float(masked_mean(ratio, mask)),
                       "clip_frac": float(masked_mean(clipped, mask)), "entropy": float(masked_mean(ent.detach(), mask)),
                       "pg_loss": float(masked_mean(pg, mask)), "vf_loss": float(masked_mean(vf, mask)),
                       "value_mean": float(masked_mean(values.detach(), mask))}
        return loss, metrics

    def state_dict(self) -> dict:
        return {"kl_coef": self.kl_ctl.value}

    def load_state_dict(self, state: dict) -> None:
        self.kl_ctl.value = float(state["kl_coef"])


def gae(rewards, values, mask, gamma: float, lam: float):
    """GAE over the action tokens of each row (non-action positions are skipped, not zeroed into the chain)."""
    import torch

    adv = torch.zeros_like(rewards)
    B, T = rewards.shape
    for b in range(B):
        idx = torch.nonzero(mask[b] > 0).flatten().tolist()
        last_gae, next_value = 0.0, 0.0
        for i in reversed(idx):
            delta = rewards[b, i] + gamma * next_value - values[b, i]
            last_gae = delta + gamma * lam * last_gae
            adv[b, i] = last_gae
            next_value = values[b, i]
    return adv, adv + values * mask


def whiten(x, mask, eps: float = 1e-8):
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    return (x - mean) * (var + eps).rsqrt() * mask
