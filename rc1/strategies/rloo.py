"""RLOO: GRPO's clipped objective with a leave-one-out baseline instead of group normalisation.

    A_i = r_i - mean_{j != i} r_j
"""

from __future__ import annotations

from rc1.strategies.grpo import GRPOStrategy


class RLOOStrategy(GRPOStrategy):
    name = "rloo"

    def advantages(self, rewards):
        g = rewards.view(-1, self.group_size)
        baseline = (g.sum(1, keepdim=True) - g) / (self.group_size - 1)
        return (g - baseline).view(-1)
