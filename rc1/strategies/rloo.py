"""RLOO: GRPO's clipped objective with a leave-one-out baseline instead of group normalisation.

    A_i = scale_i * (r_i - mean_{j != i} r_j)
"""

from __future__ import annotations

from rc1.strategies.grpo import GRPOStrategy
from rc1.strategies.rl_math import rloo_advantages


class RLOOStrategy(GRPOStrategy):
    name = "rloo"

    def advantages(self, rewards):
        return rloo_advantages(rewards, self.group_size)
