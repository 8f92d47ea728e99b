"""RLOO: GRPO's clipped objective with a leave-one-out baseline instead of group normalisation.

    A_i = r_i - mean_{j != i} r_j
"""

from __future__ import annotations

from rc1.strategies.grpo import GRPOStrategy


def rloo_advantages(rewards, group_size: int):
    """r_i minus the mean of the other rewards of its group of `group_size` consecutive rewards."""
    g = rewards.view(-1, group_size)
    baseline = (g.sum(1, keepdim=True) - g) / (group_size - 1)
    return (g - baseline).view(-1)


class RLOOStrategy(GRPOStrategy):
    name = "rloo"

    def advantages(self, rewards):
        return rloo_advantages(rewards, self.group_size)
