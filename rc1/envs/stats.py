"""Rollout statistics for the zero-signal guard: can training learn anything from these episodes?

GRPO-style advantages are reward minus the group mean: a group (the `num_generations`
consecutive episodes of one item) whose rewards are all equal gives zero gradient. When most
groups are like that — every answer wrong, or every one right, or every episode truncated —
the run burns compute without learning; `summarize` measures it and `zero_signal_warnings`
says so in words.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Sequence


@dataclass(frozen=True)
class RolloutStats:
    episodes: int
    groups: int
    pass_rate: float                   # fraction of episodes judged successful
    truncation_rate: float             # fraction cut by max_new_tokens / max_turns / max_length
    zero_variance_group_frac: float    # fraction of groups whose rewards are all equal
    reward_mean: float
    reward_std: float
    mean_turns: float
    mean_tool_hops: float
    mean_clarifications: float
    mean_completion_tokens: float
    answered_rate: float               # fraction with a final answer at all

    def to_dict(self) -> dict:
        return asdict(self)


def _reward_value(r) -> float:
    return float(getattr(r, "total", r))


def summarize(episodes: Sequence, rewards: Sequence, *, num_generations: int,
              successes: Sequence[bool] | None = None, tol: float = 1e-6) -> RolloutStats:
    """Statistics of `episodes` (consecutive groups of `num_generations`) and their rewards.

    `rewards`: floats, or reward breakdowns with `.total` (and `.success`, used when `successes`
    is not given). Without any success information an episode passes when its reward is > 0.
    """
    n = len(episodes)
    if n == 0:
        raise ValueError("no episodes to summarize")
    if len(rewards) != n:
        raise ValueError(f"{len(rewards)} rewards for {n} episodes")
    if num_generations < 1 or n % num_generations:
        raise ValueError(f"{n} episodes do not split into groups of {num_generations}")
    values = [_reward_value(r) for r in rewards]
    if successes is None:
        successes = [bool(getattr(r, "success", v > 0)) for r, v in zip(rewards, values)]
    groups = [values[i:i + num_generations] for i in range(0, n, num_generations)]
    flat = sum(1 for g in groups if max(g) - min(g) <= tol)
    mean = sum(values) / n
    std = (sum((v - mean) ** 2 for v in values) / n) ** 0.5
    return RolloutStats(
        episodes=n, groups=len(groups), pass_rate=sum(map(bool, successes)) / n,
        truncation_rate=sum(bool(e.truncated) for e in episodes) / n,
        zero_variance_group_frac=flat / len(groups), reward_mean=mean, reward_std=std,
        mean_turns=sum(e.turns for e in episodes) / n, mean_tool_hops=sum(e.tool_hops for e in episodes) / n,
        mean_clarifications=sum(e.clarifications for e in episodes) / n,
        mean_completion_tokens=sum(sum(e.action_mask) for e in episodes) / n,
        answered_rate=sum(e.final_answer is not None for e in episodes) / n)


def zero_signal_warnings(stats: RolloutStats, *, max_zero_variance: float = 0.8, max_truncation: float = 0.5,
                         min_pass: float = 0.0) -> list[str]:
    """Plain-language reasons training may not learn from rollouts like these (empty: looks fine)."""
    out = []
    if stats.zero_variance_group_frac > max_zero_variance:
        out.append(f"{stats.zero_variance_group_frac:.0%} of rollout groups have zero reward variance "
                   f"(> {max_zero_variance:.0%}): group-relative advantages are zero, so there is almost no gradient")
    if stats.truncation_rate > max_truncation:
        out.append(f"{stats.truncation_rate:.0%} of episodes are truncated (> {max_truncation:.0%}): "
                   "raise max_new_tokens / max_turns or the model never finishes")
    if stats.pass_rate <= min_pass:
        out.append(f"base pass rate is {stats.pass_rate:.1%}: with no successes there is nothing to reinforce")
    return out
