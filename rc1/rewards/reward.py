"""The reward RL optimizes: verified success first, weighted dimensions and penalties as shaping.

    s        = sum_d w_d * dim_d - penalty              weights from configs/weights.json (>= 0, sum 1);
                                                        penalty = alpha * min(c, cap) for c clarification
                                                        turns on an item that needed none
    shaping  = (s + P) / (1 + P)      in [0, 1]         P = alpha * cap, the largest penalty
    total    = I[success] + shaping_scale * shaping     success: rc1.envs.verifiers.verify_episode
                                                        (reward.pay_success false drops I[success]: a broken
                                                        reward for `rc1 bench gates --case hacking`)

`shaping_scale` < 1 (schema), so every correct answer outscores every wrong answer to the same
item, whatever the weights and penalties: the shaping dimensions order answers of equal
correctness and can never lift a wrong answer above a correct one (a property test checks it).

Difficulty bonus: `advantage_scale = 1 + beta * (I[hard] - I[easy])`. It is NOT a factor on the
reward: a factor shared by a whole GRPO group cancels in the group z-score. Strategies multiply the
advantages by it, so a hard item's advantage is larger than an easy item's with the same outcomes.

Sources (`reward.source`): the dimensions come from the rules (rc1.rewards.dimensions), or, for the
dimensions `RewardSection.judge_dimensions()` names, from the live LLM judge (rc1.judge.live: one
rubric prompt per episode, K samples, median). The verifier decides `success` whatever the source, so
the order above holds for judged dimensions too. A judge grade with a variance above
reward.unstable_variance multiplies the episode's `advantage_scale` by reward.unstable_downweight.

The "old" reward of the shadow run is `RewardModel.plain(w)`: the same seven dimensions with the
weights the last calibration replaced and neither penalty nor bonus (rc1.rewards.shadow.old_reward).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from rc1.config.names import REWARD_DIMENSIONS
from rc1.config.schema import RewardSection, TrainConfig
from rc1.envs.episode import EpisodeOutcome
from rc1.rewards.dimensions import score_dimensions
from rc1.rewards.penalties import difficulty_factor, overclar_penalty
from rc1.rewards.weights import check_weights, read_weights

log = logging.getLogger("rc1.train")


@dataclass
class RewardBreakdown:
    total: float
    dims: dict[str, float]
    success: bool
    penalty: float
    shaping: float             # in [0, 1], before shaping_scale
    advantage_scale: float     # difficulty bonus x unstable-grade down-weight, applied to advantages
    judge: dict | None = None  # the judge's grade of this episode (variance, unstable, provenance), when judged

    def to_dict(self) -> dict:
        return {"total": self.total, "dims": dict(self.dims), "success": self.success, "penalty": self.penalty,
                "shaping": self.shaping, "advantage_scale": self.advantage_scale, "judge": self.judge}


def score_all(reward_model, items: list[dict], episodes: list) -> list:
    """One breakdown per (item, episode): in one concurrent batch where the reward model can (`score_many`: a
    live judge grades the batch), else one by one (any object with `score`)."""
    if hasattr(reward_model, "score_many"):
        return reward_model.score_many(items, episodes)
    return [reward_model.score(it, ep) for it, ep in zip(items, episodes)]


class RewardModel:
    """Called for every completion inside training: rules alone, or rules and the live judge (`judge`, a
    rc1.judge.live.TrainingJudge grading the dimensions it names)."""

    def __init__(self, weights: dict[str, float], cfg: RewardSection, use_overclar_penalty: bool, judge=None):
        self.weights = check_weights(weights)
        self.cfg = cfg
        self.use_overclar_penalty = bool(use_overclar_penalty)
        self.judge = judge

    @classmethod
    def from_config(cls, cfg: TrainConfig, ws, judge=None) -> "RewardModel":
        return cls(read_weights(ws, cfg.reward.weights), cfg.reward, cfg.use_overclar_penalty, judge=judge)

    @classmethod
    def for_training(cls, cfg: TrainConfig, ws, run_tag: str) -> "RewardModel":
        """The reward of a training run: the rules alone, or the rules and the live judge for the dimensions
        `reward.source` gives it (checked with one call before the first step: a refused key is a ConfigError
        naming its variable). `run_tag` names this process's judge calls in the ledger."""
        return cls.from_config(cfg, ws, judge=training_judge(cfg, ws, run_tag))

    @classmethod
    def plain(cls, weights: dict[str, float]) -> "RewardModel":
        """Weighted dimensions only: no over-clarification penalty, no difficulty bonus."""
        return cls(dict(weights), RewardSection(difficulty_beta=0.0), use_overclar_penalty=False)

    def combine(self, dims: dict[str, float]) -> float:
        return sum(self.weights[d] * dims[d] for d in REWARD_DIMENSIONS)

    @property
    def max_penalty(self) -> float:
        """P: the largest over-clarification penalty (the shaping's floor is -P)."""
        return self.cfg.overclar.alpha * self.cfg.overclar.cap

    def total_of(self, success: bool, dims: dict[str, float], penalty: float) -> tuple[float, float]:
        """(total, shaping) of an answer with these outcomes (see the module docstring)."""
        P = self.max_penalty
        shaping = (self.combine(dims) - penalty + P) / (1.0 + P)
        paid = float(success) if self.cfg.pay_success else 0.0  # reward.pay_success false: the shaping alone
        return paid + self.cfg.shaping_scale * shaping, shaping

    def score_many(self, items: list[dict], episodes: list) -> list[RewardBreakdown]:
        """One breakdown per (item, episode); the judge grades them all in one concurrent batch."""
        if self.judge is None:
            return [self.score(it, ep) for it, ep in zip(items, episodes)]
        grades = self.judge.grade(items, episodes)  # JudgeFault when any episode has no grade: never a 0
        out = []
        for it, ep, g in zip(items, episodes, grades):
            dims, success = score_dimensions(it, ep)
            dims.update(g.dims)
            b = self._breakdown(it, ep, dims, success)
            b.advantage_scale *= g.weight
            b.judge = {"variance": g.variance, "unstable": g.unstable, "weight": g.weight,
                       "provenance": g.provenance}
            out.append(b)
        return out

    def score(self, item: dict, episode: EpisodeOutcome) -> RewardBreakdown:
        if self.judge is not None:
            return self.score_many([item], [episode])[0]
        dims, success = score_dimensions(item, episode)
        return self._breakdown(item, episode, dims, success)

    def _breakdown(self, item: dict, episode: EpisodeOutcome, dims: dict[str, float], success: bool) -> RewardBreakdown:
        penalty = 0.0
        if self.use_overclar_penalty:
            penalty = overclar_penalty(bool(item.get("needs_clarification")),
                                       int(episode.clarifications or 0),
                                       self.cfg.overclar.alpha, self.cfg.overclar.cap)
        total, shaping = self.total_of(success, dims, penalty)
        return RewardBreakdown(total=total, dims=dims, success=success, penalty=penalty, shaping=shaping,
                               advantage_scale=difficulty_factor(item.get("bucket"), self.cfg.difficulty_beta))

    def __call__(self, item: dict, episode: EpisodeOutcome) -> float:
        return self.score(item, episode).total


def training_judge(cfg: TrainConfig, ws, run_tag: str):
    """The live judge of reward.source judge | hybrid (preflighted), or None when the rules score every dimension."""
    from rc1.judge.cache import TRAIN_RUN_PREFIX
    from rc1.judge.live import TrainingJudge, rules_note

    if not cfg.reward.judge_dimensions():
        note = rules_note(cfg)
        log.info("reward dimensions from the rules (%s)", note or f"reward.source {cfg.reward.source}")
        return None
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    judge = TrainingJudge(ws, cfg, run_id=f"{TRAIN_RUN_PREFIX}{run_tag}-{stamp}")
    judge.preflight()
    log.info("reward dimensions %s graded by the judge %s (%s), K=%d, concurrency %d; the rest by the rules",
             ", ".join(judge.dims), judge.client.provider.name, judge.client.provider.model,
             cfg.scorer.samples, cfg.scorer.concurrency)
    return judge
