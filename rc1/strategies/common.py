"""What every RL strategy shares: roll out, score with the RewardModel, collate, rollout metrics."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rc1.config.schema import REWARD_DIMENSIONS


@dataclass
class ScoredRollout:
    items: list[dict]            # one per episode (each prompt repeated group_size times, consecutive)
    episodes: list[Any]
    rewards: list[float]
    successes: list[bool]
    dims: list[dict[str, float]]
    group_size: int
    stats: dict[str, float] = field(default_factory=dict)

    def group_success(self) -> dict[str, float]:
        """item id -> success rate of its group (feeds the priority sampler)."""
        out: dict[str, list[bool]] = {}
        for it, s in zip(self.items, self.successes):
            out.setdefault(it["id"], []).append(bool(s))
        return {k: sum(v) / len(v) for k, v in out.items()}


def rollout_and_score(engine, reward_model, batch: dict, group_size: int) -> ScoredRollout:
    prompts = batch["items"]
    episodes = engine.rollout(prompts, group_size, seed=int(batch["seed"]))
    items = [it for it in prompts for _ in range(group_size)]
    if len(episodes) != len(items):
        raise RuntimeError(f"rollout returned {len(episodes)} episodes for {len(items)} (prompt, generation) pairs")
    scores = [reward_model.score(it, ep) for it, ep in zip(items, episodes)]
    rewards = [float(s.total) for s in scores]
    ro = ScoredRollout(items, episodes, rewards, [bool(s.success) for s in scores], [dict(s.dims) for s in scores],
                       group_size)
    ro.stats = rollout_stats(ro)
    return ro


def rollout_stats(ro: ScoredRollout) -> dict[str, float]:
    n = max(1, len(ro.rewards))
    g = ro.group_size
    groups = [ro.rewards[i:i + g] for i in range(0, len(ro.rewards), g)]
    zero_var = sum(1 for grp in groups if max(grp) - min(grp) < 1e-9) / max(1, len(groups))
    comp_lens = [sum(ep.action_mask) for ep in ro.episodes]
    out = {
        "reward": sum(ro.rewards) / n,
        "reward_std": _std(ro.rewards),
        "success": sum(ro.successes) / n,
        "completion_len": sum(comp_lens) / n,
        "truncated": sum(bool(ep.truncated) for ep in ro.episodes) / n,
        "turns": sum(int(ep.turns) for ep in ro.episodes) / n,
        "tool_hops": sum(int(ep.tool_hops) for ep in ro.episodes) / n,
        "clarifications": sum(int(ep.clarifications) for ep in ro.episodes) / n,
        "zero_var_groups": zero_var,
        "completion_tokens": float(sum(comp_lens)),
    }
    for d in REWARD_DIMENSIONS:
        out[f"reward/{d}"] = sum(x[d] for x in ro.dims) / n
    return out


def _std(xs: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    m = sum(xs) / len(xs)
    return (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5


def collate(engine, episodes: list[Any]) -> dict:
    """Right-padded input_ids / attention_mask / action_mask tensors on the engine's device."""
    import torch

    pad = engine.tokenizer.pad_token_id
    if pad is None:
        pad = engine.tokenizer.eos_token_id
    T = max(len(ep.input_ids) for ep in episodes)
    B = len(episodes)
    ids = torch.full((B, T), int(pad), dtype=torch.long)
    attn = torch.zeros((B, T), dtype=torch.long)
    act = torch.zeros((B, T), dtype=torch.float32)
    for i, ep in enumerate(episodes):
        n = len(ep.input_ids)
        ids[i, :n] = torch.tensor(ep.input_ids, dtype=torch.long)
        attn[i, :n] = 1
        act[i, :n] = torch.tensor(ep.action_mask, dtype=torch.float32)
    # log-probs are over input_ids[:, 1:], so the action mask is shifted the same way
    return engine.to_device({"input_ids": ids, "attention_mask": attn, "action_mask": act[:, 1:]})


def masked_mean(x, mask):
    """Mean of x over the positions where mask is 1 (0 when the mask is empty)."""
    return (x * mask).sum() / mask.sum().clamp(min=1.0)


def k3_kl(logp, ref_logp):
    """Per-token KL(pi || ref) estimator exp(r - l) - (r - l) - 1 (non-negative, unbiased)."""
    import torch

    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def clipped_pg_loss(logp, old_logp, advantages, clip: float):
    """Per-token PPO clipped surrogate max(-A r, -A clip(r, 1-c, 1+c)) with r = exp(logp - old_logp).

    Returns (loss per token, r). `advantages` broadcasts against logp ((B, 1) per sequence or (B, T))."""
    import torch

    ratio = torch.exp(logp - old_logp)
    pg = torch.maximum(-advantages * ratio, -advantages * torch.clamp(ratio, 1 - clip, 1 + clip))
    return pg, ratio
