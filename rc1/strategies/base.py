"""The registry mapping `strategy.name` to a class (lazy imports); the Strategy protocol (SPEC §6) is in
rc1.engines.contract with the rest of the training contract.

A strategy turns a batch of prompts into a StepPlan (rc1.engines.contract) in two calls:
`rollout(batch)` rolls out episodes through the policy and scores them with the rc1 RewardModel
(a ScoredRollout; None for SFT, which learns from gold answers), and `plan(batch, rollout)` computes
advantages / pairs / targets and returns the collated tensors with the loss function and the rollout
metrics. Between the two the recipe may replace groups without a learning signal (dynamic
sampling). The recipe runs the plan; the strategy calls nothing on the engine beyond `Policy`.
"""

from __future__ import annotations

from rc1.config import registry
from rc1.runtime.errors import ConfigError


def strategy_class(name: str):
    if name not in registry.STRATEGIES:
        raise ConfigError(f"strategy.name: unknown strategy {name!r}; known: {sorted(registry.STRATEGIES)}")
    return registry.load(registry.STRATEGIES[name])
