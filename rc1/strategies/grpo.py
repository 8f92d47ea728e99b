"""GRPO: group-relative advantages over `num_generations` completions of each prompt.

    A_i    = (r_i - mean(group)) / (std(group) + eps)
    loss   = token-mean over action tokens of  max(-A r_t, -A clip(r_t, 1-c, 1+c)) + beta * KL_t
    r_t    = pi(a_t) / pi_old(a_t),   KL_t = k3 estimator toward the reference policy

pi_old is the policy that generated the rollouts (one update per batch, as in TRL's default), so
its log-probs are the detached current ones. The reference is the base model (LoRA adapters
disabled; a frozen copy with full fine-tuning). beta = strategy.kl_coef.
"""

from __future__ import annotations

from rc1.strategies.common import collate, k3_kl, masked_mean, rollout_and_score

ADV_EPS = 1e-4


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
        g = rewards.view(-1, self.group_size)
        return ((g - g.mean(1, keepdim=True)) / (g.std(1, keepdim=True) + ADV_EPS)).view(-1)

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
        ratio = torch.exp(logp - old)
        adv = t["advantages"].unsqueeze(1)
        pg = torch.maximum(-adv * ratio, -adv * torch.clamp(ratio, 1 - self.clip, 1 + self.clip))
        kl = k3_kl(logp, t["ref_logp"]) if "ref_logp" in t else torch.zeros_like(logp)
        loss = masked_mean(pg + self.beta * kl, mask)
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
