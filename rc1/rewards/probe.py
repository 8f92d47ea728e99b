"""Scorer probe and anti-simulation check (SPEC §3 round 1 'scorer').

`run_probe` grades n generated arithmetic items (half with a correct response, half with a wrong
one) through the configured judge and records what really happened: latency, billable tokens,
provenance of every sample. With `live=True` a probe served from the cache does not pass.

`liveness` reads the score ledger: over the last `window` scores and over the most recent judge
run, the cache hit rate must be below the threshold and no score may come from a non-live source.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from rc1.config.schema import TrainConfig
from rc1.rewards.cache import JudgeStore, liveness_summary
from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.errors import ConfigError, GateRefused
from rc1.runtime.fingerprint import register_artifact
from rc1.runtime.workspace import Workspace

PROBE_REPORT = "reports/scorer_probe.json"


def probe_items(n: int, seed: int) -> list[tuple[dict, str, bool]]:
    """(item, response, response_is_correct) for n arithmetic questions; deterministic per seed."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b, c = rng.randint(2, 60), rng.randint(2, 40), rng.randint(2, 9)
        gold = a + b * c
        correct = i % 2 == 0
        shown = gold if correct else gold + rng.choice([-7, -3, 4, 9, 11])
        item = {"id": f"probe-{seed}-{i}", "task": "gsm8k", "question": f"What is {a} + {b} * {c}?",
                "answer": str(gold), "aliases": []}
        response = f"{b} * {c} = {b * c}, then {a} + {b * c} = {shown}.\nANSWER: {shown}"
        out.append((item, response, correct))
    return out


def run_probe(ws: Workspace, cfg: TrainConfig, *, provider: str | None = None, n: int = 8, live: bool = True,
              seed: int | None = None, client_kwargs: dict | None = None) -> dict:
    from rc1.rewards.judge import JudgeClient

    if n < 1:
        raise ConfigError(f"--n must be >= 1 (got {n})")
    seed = int(seed if seed is not None else time.time_ns() % 2**31)
    items = probe_items(n, seed)
    with JudgeClient(ws, cfg.scorer, cfg.reward, provider=provider, run_id=f"probe-{seed}-{time.time_ns() % 10**6}",
                     **(client_kwargs or {})) as client:
        scores = client.score_many([(it, resp) for it, resp, _ in items])
        stats = client.stats()
    samples = [s for sc in scores for s in sc.samples]
    live_ok = [s for s in samples if s.provenance == "live" and s.status != "error"]
    from_cache = [s for s in samples if s.provenance == "cache"]
    parsed = [s for s in samples if s.score is not None]
    problems = []
    if live and from_cache:
        problems.append(f"{len(from_cache)}/{len(samples)} samples came from the cache, not a live call "
                        "(probe other prompts: a different --seed)")
    if live and not live_ok:
        problems.append("no live judge call succeeded")
    if live_ok and min(s.latency_s or 0.0 for s in live_ok) <= 0:
        problems.append("a live call reported no latency")
    billable = sum(s.prompt_tokens + s.completion_tokens for s in live_ok)
    if live and billable < 1:
        problems.append("live calls reported no billable usage (usage.prompt_tokens + completion_tokens = 0)")
    errors = [s for s in samples if s.status == "error"]
    if errors:
        problems.append(f"{len(errors)} sample(s) failed after retries: {errors[0].error}")
    if len(parsed) < len(samples) / 2:
        problems.append(f"only {len(parsed)}/{len(samples)} judge replies held a grade")

    def mean(xs):
        return sum(xs) / len(xs) if xs else None

    report = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "provider": stats["provider"], "model": stats["model"], "base_url": stats["base_url"],
        "run_id": stats["run_id"], "n": n, "seed": seed, "samples_per_item": cfg.scorer.samples,
        "live_required": live, "samples": len(samples), "live_samples": len(live_ok),
        "cache_samples": len(from_cache), "failed_samples": sum(s.status == "failed" for s in samples),
        "error_samples": len(errors), "billable_tokens": billable,
        "latency_min_s": min((s.latency_s for s in live_ok if s.latency_s), default=0.0),
        "latency_p50_s": stats["latency_p50_s"], "latency_p95_s": stats["latency_p95_s"],
        "rate_429": stats["rate_429"], "cache_hit_rate": stats["cache_hit_rate"],
        "mean_grade_correct": mean([sc.median for sc, (_, _, ok) in zip(scores, items) if ok and sc.ok]),
        "mean_grade_wrong": mean([sc.median for sc, (_, _, ok) in zip(scores, items) if not ok and sc.ok]),
        "unstable_scores": sum(sc.unstable for sc in scores),
        "scores": [{"item_id": sc.item_id, "median": sc.median, "variance": sc.variance,
                    "provenance": sc.provenance, "response_correct": ok} for sc, (_, _, ok) in zip(scores, items)],
        "passed": not problems, "problems": problems,
        "stats_path": "reports/judge_stats.json", "ledger": cfg.scorer.cache_path,
    }
    atomic_write_json(ws.path(PROBE_REPORT), report)
    register_artifact(ws, PROBE_REPORT, "scorer_probe", provider=report["provider"], passed=report["passed"])
    return report


@dataclass
class Liveness:
    window: dict
    last_run: dict
    last_run_id: str | None
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict:
        return {"window": self.window, "last_run": self.last_run, "last_run_id": self.last_run_id,
                "problems": self.problems, "ok": self.ok}


def liveness(ws: Workspace, cache_path: str, *, cache_hit_lt: float, window: int = 100) -> Liveness:
    """Is the scorer live? Reads the ledger only (never calls the judge)."""
    db = ws.path(cache_path)
    if not db.exists():
        return Liveness({}, {}, None, [f"no judge ledger at {cache_path}: the scorer has never been called"])
    with JudgeStore(db, readonly=True) as store:
        rows = store.recent(window)
        run_id = store.last_run_id()
        run_rows = store.run_rows(run_id) if run_id else []
    win, last = liveness_summary(rows), liveness_summary(run_rows)
    problems = []
    if not rows:
        problems.append("the judge ledger holds no scores")
    for label, s in (("last %d scores" % window, win), (f"last judge run {run_id}", last)):
        if s.get("non_live"):
            problems.append(f"{label}: {s['non_live']} score(s) from a non-live source {s['non_live_sources']}")
        rate = s.get("cache_hit_rate")
        if rate is not None and rate >= cache_hit_lt:
            problems.append(f"{label}: cache hit rate {rate:.3f} is not below {cache_hit_lt:g}")
        if s.get("answered") == 0 and s.get("scores"):
            problems.append(f"{label}: no judge call was answered")
    if rows and win["billable_tokens"] < 1:
        problems.append(f"last {window} scores: no billable usage (no live call reported tokens)")
    return Liveness(win, last, run_id, problems)


def assert_live(ws: Workspace, cache_path: str, *, cache_hit_lt: float, window: int = 100) -> Liveness:
    result = liveness(ws, cache_path, cache_hit_lt=cache_hit_lt, window=window)
    if not result.ok:
        raise GateRefused("scorer is not live: " + result.problems[0], lines=result.problems[1:])
    return result
