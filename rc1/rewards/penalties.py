"""Over-clarification penalty and difficulty bonus (SPEC §5); their in-process check is rc1.rewards.penalty_check.

penalty = alpha * min(c, cap)   when the item does NOT need clarification (c = clarification turns)
bonus   = 1 + beta * (I[hard] - I[easy])     a factor on the ADVANTAGES of the item's rollouts (rc1.rewards.reward)
"""

from __future__ import annotations


def overclar_penalty(needs_clarification: bool, clarifications: int, alpha: float, cap: int) -> float:
    if needs_clarification or clarifications <= 0:
        return 0.0
    return alpha * min(int(clarifications), int(cap))


def difficulty_factor(bucket: str | None, beta: float) -> float:
    return 1.0 + beta * ((bucket == "hard") - (bucket == "easy"))
