"""What every RL strategy shares: roll out, score with the RewardModel, collate, rollout statistics.

`rollout_stats` is THE rollout-statistics function of rc1: the training metrics of every step, the
learning-signal check before training and the step-0 guard all read it. A group is the
`group_size` consecutive episodes of one prompt; a group whose successes are all equal gives no
correctness signal (every answer right, or every one wrong); a group whose rewards are all equal
gives no signal at all (its GRPO advantages are 0).
"""

from __future__ import annotations

from typing import Any

from rc1.config.names import REWARD_DIMENSIONS
from rc1.engines.contract import Batch, Policy, ScoredRollout
from rc1.rewards.reward import score_all

ZERO_VAR_TOL = 1e-9


def correctness_first(rewards: list[float], successes: list[bool], group_size: int) -> list[float]:
    """Shaping counts only where correctness varies: in a group whose successes are all equal (every answer
    right, or every one wrong) each reward becomes the group's mean reward, so that group's advantages are 0.

    Without this, GRPO's per-group standardisation scales an all-wrong group whose shaping differs by 0.01
    up to unit-size advantages, the weight of a real correctness signal: at a 3-6 % pass rate the gradient
    was mostly format and length. In a mixed group the shaping still orders answers of equal correctness
    (and every correct answer still outscores every wrong one: shaping_scale < 1)."""
    out = list(rewards)
    for lo in range(0, len(out), group_size):
        grp = successes[lo:lo + group_size]
        if len(set(grp)) == 1:
            mean = sum(out[lo:lo + group_size]) / len(grp)
            out[lo:lo + group_size] = [mean] * len(grp)
    return out


def score_rollout(items: list[dict], episodes: list, reward_model, group_size: int) -> ScoredRollout:
    if len(episodes) != len(items):
        raise RuntimeError(f"rollout returned {len(episodes)} episodes for {len(items)} (prompt, generation) pairs")
    scores = score_all(reward_model, items, episodes)  # a live judge grades the whole rollout concurrently
    successes = [bool(s.success) for s in scores]
    totals = [float(s.total) for s in scores]
    if reward_model.cfg.shaping_groups == "mixed":
        totals = correctness_first(totals, successes, group_size)
    ro = ScoredRollout(items, episodes, totals, successes,
                       [dict(s.dims) for s in scores], group_size,
                       advantage_scales=[float(s.advantage_scale) for s in scores],
                       shaping=[float(s.shaping) for s in scores])
    ro.stats = rollout_stats(ro)
    return ro


def rollout_and_score(policy: Policy, reward_model, batch: Batch, group_size: int) -> ScoredRollout:
    prompts = list(batch.items)
    episodes = policy.rollout(prompts, group_size, seed=int(batch.seed))
    items = [it for it in prompts for _ in range(group_size)]
    return score_rollout(items, episodes, reward_model, group_size)


def no_signal_groups(ro: ScoredRollout) -> list[int]:
    """Indices of the groups whose successes are all equal (every answer right, or every one wrong)."""
    g = ro.group_size
    return [i for i, grp in enumerate(_groups(ro.successes, g)) if len(set(grp)) == 1]


def merge_groups(ro: ScoredRollout, index: int, fresh: ScoredRollout) -> ScoredRollout:
    """`ro` with its group `index` replaced by `fresh`'s (one) group; statistics recomputed."""
    g = ro.group_size
    lo, hi = index * g, (index + 1) * g

    def sub(a, b):
        return a[:lo] + b[:g] + a[hi:]
    out = ScoredRollout(sub(ro.items, fresh.items), sub(ro.episodes, fresh.episodes), sub(ro.rewards, fresh.rewards),
                        sub(ro.successes, fresh.successes), sub(ro.dims, fresh.dims), g,
                        advantage_scales=sub(ro.advantage_scales, fresh.advantage_scales),
                        shaping=sub(ro.shaping, fresh.shaping))
    out.stats = rollout_stats(out)
    return out


def _groups(xs: list, g: int) -> list[list]:
    return [xs[i:i + g] for i in range(0, len(xs), g)]


def rollout_stats(ro: ScoredRollout) -> dict[str, float]:
    n = max(1, len(ro.rewards))
    g = ro.group_size
    reward_groups = _groups(ro.rewards, g)
    success_groups = _groups([float(s) for s in ro.successes], g)
    zero_var = sum(1 for grp in reward_groups if max(grp) - min(grp) < ZERO_VAR_TOL) / max(1, len(reward_groups))
    no_signal = sum(1 for grp in success_groups if max(grp) == min(grp)) / max(1, len(success_groups))
    comp_lens = [sum(ep.action_mask) for ep in ro.episodes]
    out = {
        "reward": sum(ro.rewards) / n,
        "reward_std": _std(ro.rewards),
        "success": sum(ro.successes) / n,
        "pass_at_k": sum(1 for grp in success_groups if max(grp) > 0) / max(1, len(success_groups)),
        "completion_len": sum(comp_lens) / n,
        "truncated": sum(bool(ep.truncated) for ep in ro.episodes) / n,
        "turns": sum(int(ep.turns) for ep in ro.episodes) / n,
        "tool_hops": sum(int(ep.tool_hops) for ep in ro.episodes) / n,
        "clarifications": sum(int(ep.clarifications) for ep in ro.episodes) / n,
        "zero_var_groups": zero_var,
        "no_success_signal_groups": no_signal,
        "completion_tokens": float(sum(comp_lens)),
    }
    if ro.shaping:
        out["reward/shaping"] = sum(ro.shaping) / n
    for d in REWARD_DIMENSIONS:
        out[f"reward/{d}"] = sum(x[d] for x in ro.dims) / n
    return out


def _std(xs: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    m = sum(xs) / len(xs)
    return (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5


def sampler_metrics(sample_logp, old_logp, mask, is_weight=None) -> dict[str, float]:
    """How far the sampler's numerics are from the trainer's (none when the rows carry no sampler log-probs):
    `sampler_mismatch_kl`, k3 KL(pi_sampler || pi_old) in nats/token (tokens were drawn by the sampler), and,
    when the truncated importance-sampling correction is on, its weights' mean and the share it capped."""
    from rc1.strategies.rl_math import k3_kl, masked_mean

    if sample_logp is None:
        return {}
    out = {"sampler_mismatch_kl": float(masked_mean(k3_kl(sample_logp, old_logp), mask))}
    if is_weight is not None:
        raw = (old_logp - sample_logp).exp()
        out["sampler/is_weight_mean"] = float(masked_mean(is_weight, mask))
        out["sampler/is_capped_frac"] = float(masked_mean((raw > is_weight).float(), mask))
    return out


def forward_rows(policy: Policy, t: dict, micro_batch_size: int | None, **kwargs):
    """policy.forward over the plan's rows (no gradient), `micro_batch_size` rows at a time, the outputs
    concatenated: the plan's old / reference log-probs (and PPO's values) then never hold more activations than
    one micro-batch's, as the loss's forward/backward does (rc1.engines.microbatch)."""
    import torch

    from rc1.engines.contract import ForwardOutput
    from rc1.engines.microbatch import row_slices

    parts = [policy.forward(t["input_ids"][s], t["attention_mask"][s], positions=t["action_mask"][s], **kwargs)
             for s in row_slices(t, micro_batch_size)]
    if len(parts) == 1:
        return parts[0]
    return ForwardOutput(*(None if parts[0][i] is None else torch.cat([p[i] for p in parts])
                           for i in range(len(ForwardOutput._fields))))


def sampling_kwargs(cfg) -> dict:
    """The sampling distribution's settings, which `Policy.forward` must score sampled tokens under."""
    return {"temperature": cfg.model.temperature, "top_p": cfg.model.top_p}


def collate(policy: Policy, episodes: list[Any]) -> dict:
    """Right-padded input_ids / attention_mask / action_mask tensors on the policy's device, one row per
    training sample: an episode's samples (`Episode.training_samples()`: its split turns, else the whole
    episode; objects without that method are one sample). `episode` maps each row to its episode's index
    in `episodes` (rows of an episode consecutive, in turn order). With `sample_logp` (the log-probs the
    sampler gave each generated token) when every sample has them."""
    import torch

    samples, owner = [], []
    for e, ep in enumerate(episodes):
        rows = ep.training_samples() if hasattr(ep, "training_samples") else [ep]
        samples += rows
        owner += [e] * len(rows)
    pad = policy.tokenizer.pad_token_id
    if pad is None:
        pad = policy.tokenizer.eos_token_id
    T = max(len(s.input_ids) for s in samples)
    B = len(samples)
    ids = torch.full((B, T), int(pad), dtype=torch.long)
    attn = torch.zeros((B, T), dtype=torch.long)
    act = torch.zeros((B, T), dtype=torch.float32)
    with_lp = all(len(getattr(s, "logprobs", None) or []) == sum(s.action_mask) for s in samples)
    slp = torch.zeros((B, T), dtype=torch.float32)
    for i, s in enumerate(samples):
        n = len(s.input_ids)
        ids[i, :n] = torch.tensor(s.input_ids, dtype=torch.long)
        attn[i, :n] = 1
        act[i, :n] = torch.tensor(s.action_mask, dtype=torch.float32)
        if with_lp and s.logprobs:
            slp[i, :n][act[i, :n] > 0] = torch.tensor(s.logprobs, dtype=torch.float32)
    # log-probs are over input_ids[:, 1:], so the per-token tensors are shifted the same way
    out = {"input_ids": ids, "attention_mask": attn, "action_mask": act[:, 1:],
           "episode": torch.tensor(owner, dtype=torch.long)}
    if with_lp:
        out["sample_logp"] = slp[:, 1:]
    return policy.to_device(out)
