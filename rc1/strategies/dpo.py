"""Online DPO: preference pairs from scored rollouts of the same prompt.

For each prompt, its `num_generations` rollouts are scored by the RewardModel; the highest-reward
episode is `chosen`, the lowest `rejected` (a group whose rewards are all equal gives no pair).

    loss = -log sigmoid(beta * ((log pi(c) - log ref(c)) - (log pi(r) - log ref(r))))

with sequence log-probabilities summed over action tokens and beta = strategy.dpo_beta. A batch
without any pair contributes no gradient (its micro-step still counts toward accumulation).
"""

from __future__ import annotations

from typing import Any, NamedTuple

from rc1.strategies.common import collate, masked_mean, rollout_and_score

PAIR_MIN_GAP = 1e-6


class DPOLoss(NamedTuple):
    loss: Any     # scalar: mean over pairs of -log sigmoid(beta * margin)
    margin: Any   # (n_pairs,) implicit reward margin (log-ratio of chosen minus log-ratio of rejected)
    delta: Any    # (2 n_pairs, T) masked per-token log pi - log ref


def dpo_loss(logp, ref_logp, mask, n_pairs: int, beta: float) -> DPOLoss:
    """Sigmoid DPO loss; rows 0..n-1 are the chosen episodes, rows n..2n-1 their rejected partners.

    Sequence log-probs are sums of the per-token log-probs (B, T) over the action mask (B, T)."""
    import torch.nn.functional as F

    delta = (logp - ref_logp) * mask          # per-token log pi - log ref
    seq = delta.sum(1)
    margin = seq[:n_pairs] - seq[n_pairs:]
    return DPOLoss(-F.logsigmoid(beta * margin).mean(), margin, delta)


class DPOStrategy:
    name = "dpo"

    def __init__(self, cfg, reward_model):
        self.cfg = cfg
        self.reward_model = reward_model
        self.group_size = cfg.strategy.num_generations
        self.beta = cfg.strategy.dpo_beta
        self.engine = None

    def attach_engine(self, engine) -> None:
        self.engine = engine
        engine.needs_reference()

    def pairs(self, rewards: list[float]) -> list[tuple[int, int]]:
        g = self.group_size
        out = []
        for start in range(0, len(rewards), g):
            grp = rewards[start:start + g]
            hi = max(range(g), key=lambda i: (grp[i], -i))
            lo = min(range(g), key=lambda i: (grp[i], i))
            if grp[hi] - grp[lo] > PAIR_MIN_GAP:
                out.append((start + hi, start + lo))
        return out

    def on_batch(self, batch: dict) -> dict[str, float]:
        import torch

        ro = rollout_and_score(self.engine, self.reward_model, batch, self.group_size)
        pairs = self.pairs(ro.rewards)
        batch["rollout"] = ro
        batch["loss_fn"] = self.loss
        metrics = {**ro.stats, "dpo/pairs": len(pairs)}
        if not pairs:
            batch["tensors"] = {}
            return metrics
        order = [c for c, _ in pairs] + [r for _, r in pairs]
        t = collate(self.engine, [ro.episodes[i] for i in order])
        with torch.no_grad():
            t["ref_logp"] = self.engine.forward(t["input_ids"], t["attention_mask"], positions=t["action_mask"],
                                                reference=True)["logp"]
        t["n_pairs"] = len(pairs)
        batch["tensors"] = t
        return metrics

    def loss(self, engine, t: dict):
        import torch

        if not t:
            return None, {"kl": 0.0, "ratio": 1.0, "clip_frac": 0.0, "entropy": None}
        out = engine.forward(t["input_ids"], t["attention_mask"], positions=t["action_mask"], entropy=True)
        logp, mask, n = out["logp"], t["action_mask"], t["n_pairs"]
        loss, margin, delta = dpo_loss(logp, t["ref_logp"], mask, n, self.beta)
        with torch.no_grad():
            metrics = {"kl": float(masked_mean(delta.detach(), mask)),
                       "ratio": float(masked_mean(torch.exp(delta.detach()), mask)),
                       "clip_frac": 0.0,  # DPO has no clipping
                       "entropy": float(masked_mean(out["entropy"], mask)),
                       "dpo/margin": float(margin.mean()), "dpo/accuracy": float((margin > 0).float().mean())}
        return loss, metrics

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass
