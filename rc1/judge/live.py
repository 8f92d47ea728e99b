"""The live judge in the reward loop: grades a training step's episodes on the judged dimensions.

`reward.source` (rules | judge | hybrid, per-dimension overrides in `reward.dimension_source`) says which
dimensions the judge grades (RewardSection.judge_dimensions). For each episode ONE rubric prompt asks for
all of them (rc1.judge.prompts.dims_messages, rubric version in the cache key); the step's prompts are
graded concurrently (scorer.concurrency in flight), K = scorer.samples samples each -> per-dimension
median, variance recorded; a grade whose variance exceeds reward.unstable_variance goes to
reports/unstable_samples.jsonl and its episode's advantage is scaled by reward.unstable_downweight.

Faults are faults, never a 0 and never a fallback: an episode whose K samples all failed to parse raises
JudgeGradeFailed; one whose requests gave up after the retry policy raises JudgeUnavailable; a 401/403
is found by `preflight` before the first step (ConfigError naming the key variable). The recipe
checkpoints and stops on either (rc1.training.recipe), and `rc1 resume` replays the step: the grades the
judge already gave come from the cache (its key covers endpoint, model, messages, sampling params and
rubric version), so k steps + resume equals an uninterrupted run.

Budgets: scorer.max_billable_tokens and scorer.max_cost (scorer.prices per million tokens) count the
live calls of the run, across resumes (`state_dict` rides in the checkpoint).

Ledger rows of training carry run ids starting with TRAIN_RUN_PREFIX: the scorer gate and `rc1 reward
assert-live` read that window once training has begun.
"""

from __future__ import annotations

import logging
import time

from rc1.judge.cache import TRAIN_RUN_PREFIX
from rc1.judge.client import CallTally, JudgeClient, JudgeRequestError, JudgeScore, percentile
from rc1.judge.prompts import JudgeRequest, dims_messages, reference_text
from rc1.judge.providers import grading_method
from rc1.runtime.layout import JUDGE_STATS_TRAIN
from rc1.runtime.errors import ConfigError, Rc1Error

log = logging.getLogger("rc1.judge.live")

LOCAL_RUBRIC_NOTE = ("judge method reference_match cannot grade rubric dimensions: the local judge "
                     "(SmolLM2-135M) matches answers to the reference; its 0-10 grades did not separate correct "
                     "from wrong answers on the probe (AUC 0.50)")


class JudgeFault(Rc1Error):
    """The judge did not grade an episode; the run checkpoints and stops (`reason` goes in the end record)."""

    reason = "judge_fault"


class JudgeUnavailable(JudgeFault):
    reason = "judge_unavailable"


class JudgeGradeFailed(JudgeFault):
    reason = "judge_grade_failed"


def rules_note(cfg) -> str | None:
    """Why a config with the local judge scores by rules (logged at setup), or None."""
    if cfg.reward.judge_dimensions() or cfg.scorer.provider != "local" or cfg.scorer.method == "grade":
        return None
    return f"reward.source {cfg.reward.source}: {LOCAL_RUBRIC_NOTE}"


class TrainingJudge:
    """JudgeClient wrapper for training: rubric requests, per-step figures, budgets, faults."""

    def __init__(self, ws, cfg, *, run_id: str | None = None, client: JudgeClient | None = None):
        self.cfg = cfg
        self.dims = cfg.reward.judge_dimensions()
        rid = run_id or (f"{TRAIN_RUN_PREFIX}{cfg.run.name}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
        self.client = client or JudgeClient(ws, cfg.scorer, cfg.reward, run_id=rid, stats_path=JUDGE_STATS_TRAIN)
        self.price = cfg.scorer.prices.get(self.client.provider.name)
        self.note = None
        if grading_method(cfg.scorer, self.client.provider) == "reference_match":
            self.note = (f"{LOCAL_RUBRIC_NOTE}; reward.source {cfg.reward.source} grades {', '.join(self.dims)} "
                         "with the rubric prompt anyway: these grades are plumbing, not a discriminative reward")
            log.warning("%s", self.note)
        self.totals = {"calls": 0, "live": 0, "cache": 0, "billable_tokens": 0, "cost": 0.0, "unstable": 0,
                       "seconds": 0.0}
        self._step = self._fresh_step()

    @staticmethod
    def _fresh_step() -> dict:
        return {"tally": CallTally(), "latencies": [], "unstable": 0, "seconds": 0.0}

    # ------------------------------------------------------------------ setup
    def preflight(self) -> None:
        """One live call before the first step: a refused key (401/403) stops here, naming its variable."""
        try:
            self.client._call([{"role": "user", "content": "Reply with 0."}],
                              {"max_tokens": 1, "temperature": 0.0})
        except JudgeRequestError as exc:
            raise ConfigError(f"scorer.provider {self.client.provider.name}: {exc.message}") from None
        except Exception as exc:  # noqa: BLE001 - _GiveUp: unreachable beyond the retry policy
            raise JudgeUnavailable(f"judge {self.client.provider.name} at {self.client.provider.base_url} is "
                                   f"unreachable before the first step: {exc}") from None

    # ------------------------------------------------------------------ grading
    def request(self, item: dict, episode) -> JudgeRequest:
        return JudgeRequest(str(item.get("id", "")), dims_messages(
            item.get("question", ""), reference_text(item), getattr(episode, "model_text", "") or "",
            int(getattr(episode, "clarifications", 0) or 0), self.dims), dims=self.dims)

    def grade(self, items: list[dict], episodes: list) -> list[JudgeScore]:
        """One grade per episode (all requested concurrently); raises JudgeFault when any is missing."""
        t0 = time.perf_counter()
        n_lat = len(self.client._latencies)
        try:
            scores = self.client.score_requests([self.request(it, ep) for it, ep in zip(items, episodes)])
        except JudgeRequestError as exc:
            raise JudgeUnavailable(str(exc)) from None
        finally:
            self._step["seconds"] += time.perf_counter() - t0
        s = self._step
        with self.client._lock:
            s["latencies"] += self.client._latencies[n_lat:]
        for sc in scores:
            for smp in sc.samples:
                s["tally"].add(smp)
            s["unstable"] += sc.unstable
        for sc in scores:
            if sc.ok:
                continue
            why = "; ".join(sc.errors) or "no sample"
            if any(smp.status == "error" for smp in sc.samples):
                raise JudgeUnavailable(f"judge {self.client.provider.name} did not answer for {sc.item_id} "
                                       f"within the retry policy (scorer.max_retries {self.cfg.scorer.max_retries}): "
                                       f"{why}")
            raise JudgeGradeFailed(f"judge {self.client.provider.name} gave no valid grade for {sc.item_id} in "
                                   f"{len(sc.samples)} sample(s): {why}")
        return scores

    # ------------------------------------------------------------------ figures
    def cost_of(self, prompt_tokens: int, completion_tokens: int) -> float:
        if self.price is None:
            return 0.0
        return (prompt_tokens * self.price.input_per_mtok + completion_tokens * self.price.output_per_mtok) / 1e6

    def step_figures(self) -> dict:
        """The judge's metrics of the step since the last call (metrics.jsonl `judge/*`), totals added."""
        s, self._step = self._step, self._fresh_step()
        n = s["tally"]
        tokens = n.prompt_tokens + n.completion_tokens
        cost = self.cost_of(n.prompt_tokens, n.completion_tokens)
        t = self.totals
        t["calls"] += n.samples
        t["live"] += n.live
        t["cache"] += n.cache_hits
        t["billable_tokens"] += tokens
        t["cost"] += cost
        t["unstable"] += s["unstable"]
        t["seconds"] += s["seconds"]
        self.client.write_stats()
        return {"judge/calls": n.samples, "judge/live": n.live, "judge/cache": n.cache_hits,
                "judge/failed": n.failed, "judge/errors": n.errors, "judge/n429": n.n429,
                "judge/billable_tokens": tokens, "judge/cost": cost,
                "judge/latency_p50_s": percentile(s["latencies"], 0.5),
                "judge/latency_p95_s": percentile(s["latencies"], 0.95),
                "judge/unstable": s["unstable"], "judge/seconds": s["seconds"],
                "judge/billable_tokens_total": t["billable_tokens"], "judge/cost_total": t["cost"],
                "judge/calls_total": t["calls"], "judge/unstable_total": t["unstable"]}

    def budget_exceeded(self, billable_tokens: int | None = None, cost: float | None = None) -> str | None:
        """Why the run must stop for its judge budget, or None (default: this judge's own totals)."""
        sc = self.cfg.scorer
        tokens = self.totals["billable_tokens"] if billable_tokens is None else billable_tokens
        cost = self.totals["cost"] if cost is None else cost
        if sc.max_billable_tokens is not None and tokens >= sc.max_billable_tokens:
            return (f"judge budget reached: {tokens} billable tokens >= scorer.max_billable_tokens "
                    f"{sc.max_billable_tokens}")
        if sc.max_cost is not None and cost >= sc.max_cost:
            return f"judge budget reached: cost {cost:.4f} >= scorer.max_cost {sc.max_cost:g}"
        return None

    def summary(self) -> dict:
        return {"provider": self.client.provider.name, "model": self.client.provider.model,
                "dimensions": list(self.dims), "samples": self.cfg.scorer.samples, "run_id": self.client.run_id,
                "note": self.note, **self.totals}

    def state_dict(self) -> dict:
        return dict(self.totals)

    def load_state_dict(self, state: dict) -> None:
        self.totals.update({k: v for k, v in (state or {}).items() if k in self.totals})

    def close(self) -> None:
        self.client.write_stats()
        self.client.close()
