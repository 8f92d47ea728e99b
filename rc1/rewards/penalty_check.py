"""The over-clarification penalty's required behaviour, checked in-process (the overclar_penalty gate runs it).

It sits apart from rc1.rewards.penalties because its last case scores an episode through RewardModel, which
itself applies the penalty; it calls `penalties.overclar_penalty` through the module so that it checks the
function as it is at call time.
"""

from __future__ import annotations

from dataclasses import dataclass

from rc1.config.names import REWARD_DIMENSIONS
from rc1.config.schema import PenaltySection, RewardSection
from rc1.rewards import penalties
from rc1.envs.episode import EpisodeOutcome
from rc1.rewards.reward import RewardModel


@dataclass(frozen=True)
class PenaltyCase:
    name: str
    needs_clarification: bool
    clarifications: int
    expected: float
    measured: float

    @property
    def passed(self) -> bool:
        return abs(self.measured - self.expected) <= 1e-9


def overclar_penalty_cases(alpha: float = 0.07, cap: int = 3) -> list[PenaltyCase]:
    """The penalty's required behaviour, evaluated on the real function and on RewardModel.

    Cases (the same as tests/rewards/test_overclar_penalty.py): no trigger (c = 0), c = 1, 2, 5
    (5 is above the cap), and an item that needs clarification (never penalized). Expected values
    are written from the rule, not from the function under test. A final case scores one episode
    through RewardModel with the penalty on and off and checks the totals differ by exactly the
    penalty's share of the reward, shaping_scale * penalty / (1 + alpha * cap) (so the switch is
    really wired into the reward).
    """
    penalty = penalties.overclar_penalty
    expected = {0: 0.0, 1: alpha * 1, 2: alpha * 2, 5: alpha * min(5, cap)}
    cases = [PenaltyCase(f"c={c}" if c else "no trigger (c=0)", False, c, exp, penalty(False, c, alpha, cap))
             for c, exp in expected.items()]
    cases.append(PenaltyCase("needs_clarification=true, c=2", True, 2, 0.0, penalty(True, 2, alpha, cap)))
    cases.append(_wired_case(alpha, cap))
    return cases


def _wired_case(alpha: float, cap: int) -> PenaltyCase:
    cfg = RewardSection(overclar=PenaltySection(alpha=alpha, cap=cap), difficulty_beta=0.0)
    weights = {d: 1.0 / len(REWARD_DIMENSIONS) for d in REWARD_DIMENSIONS}
    item = {"id": "penalty-check", "task": "gsm8k", "question": "Tom has 3 apples and buys 4. How many?",
            "answer": "7", "aliases": [], "supporting": [], "needs_clarification": False, "bucket": "medium"}
    ep = EpisodeOutcome(item_id="penalty-check", task="gsm8k", final_answer="7", turns=3, tool_hops=0,
                        clarifications=2, truncated=False, model_text="3 + 4 = 7\nANSWER: 7")
    on = RewardModel(weights, cfg, use_overclar_penalty=True).score(item, ep).total
    off = RewardModel(weights, cfg, use_overclar_penalty=False).score(item, ep).total
    share = cfg.shaping_scale / (1.0 + alpha * cap)
    return PenaltyCase("RewardModel total(off) - total(on), c=2", False, 2, share * alpha * min(2, cap), off - on)
