"""Can this run learn at all? The base policy, rolled out BEFORE training exactly as training will roll
it out: the training sampler draws the prompts, the training generation settings sample
`num_generations` episodes per prompt, the training reward scores them.

Measured (rc1.engines.contract.RolloutStats, the statistics the training metrics use):
  pass rate        fraction of episodes verified correct
  pass@k           fraction of prompts with at least one correct episode among k = num_generations
  truncation rate  fraction of episodes cut by max_new_tokens / the turn limit / max_length
  zero-variance    fraction of groups whose rewards are all equal (GRPO advantages all 0), and the
                   fraction whose successes are all equal (no correctness signal)

Written to reports/learning_signal.json with the identity of everything that decides those numbers
(model, generation settings, group size, sampler settings, the training data and reward weights by
sha256), so the round-2 learning-signal gate (rc1.gates.learning_signal) can refuse a report made
for another config. The base policy's weights are fixed here, so the episodes come from rc1.generation
(generation.backend: llama.cpp when it agrees with torch) with the training rollout's settings and seeds
(a TRL run is single-turn: its episodes are capped at one turn here too).
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict

from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.fingerprint import register_artifact, sha256_file, sha256_json
from rc1.runtime.layout import FIT_TRAIN
from rc1.runtime.layout import LEARNING_SIGNAL_REPORT as REPORT

log = logging.getLogger("rc1.train")

REPORT_VERSION = 1
MAX_ROUNDS = 3   # rounds of `prompts` prompts at most, while the informative-groups bound straddles its threshold


def informative_bounds(groups: int, no_signal_frac: float, cfg) -> tuple[int, float, float, int]:
    """(informative groups measured, Wilson 95 % bounds of their share, groups the run plans)."""
    from rc1.training.fit import wilson

    informative = round(groups * (1.0 - no_signal_frac))
    lo, hi = wilson(informative, groups)
    planned = cfg.run.max_steps * cfg.strategy.prompts_per_step * cfg.run.gradient_accumulation
    return informative, lo, hi, planned


def signal_identity(ws, cfg) -> tuple[str, dict]:
    """(sha256, settings) of everything the learning-signal numbers depend on."""
    def sha(rel):
        p = ws.path(rel)
        return sha256_file(p) if p.exists() else None

    settings = {
        "model": cfg.model.base, "revision": cfg.model.revision, "max_new_tokens": cfg.model.max_new_tokens,
        "temperature": cfg.model.temperature, "top_p": cfg.model.top_p, "max_length": cfg.data.max_length,
        "max_turns": 1 if cfg.engine.name == "trl" else cfg.strategy.max_turns, "engine": cfg.engine.name,
        "num_generations": cfg.strategy.num_generations, "seed": cfg.run.seed,
        "sampler": cfg.priority_sampling.model_dump(mode="json"),
        "reward": cfg.reward.model_dump(mode="json"), "use_overclar_penalty": cfg.use_overclar_penalty,
        "difficulty_fit": cfg.difficulty_fit.model_dump(mode="json") if cfg.difficulty_fit.enable else None,
        "fit_train_sha256": sha(FIT_TRAIN) if cfg.difficulty_fit.enable else None,
        "data": {"seed_pool": cfg.seed_pool, "seed_pool_sha256": sha(cfg.seed_pool),
                 "train_path": cfg.data.train_path, "train_sha256": sha(cfg.data.train_path),
                 "weights_sha256": sha(cfg.reward.weights)},
    }
    return sha256_json(settings), settings


def measure(ws, cfg, *, prompts: int, progress=None, informative_min: float | None = None) -> dict:
    """Roll out the base policy on `prompts` training prompts and write the report (see the module docstring).

    With `informative_min` (the gate's informative_groups_min): while the expected informative groups over the
    run straddle it (planned x the Wilson lower bound under it, planned x the upper bound over it), another
    `prompts` prompts are measured and pooled, up to MAX_ROUNDS rounds, so a healthy run is not refused on a
    small sample's chance low (make run seed 20250830: 5 of 24 groups informative, bound 18.5 < 30, while
    its twin seed measured 10 of 24 and trained with 45 % informative groups)."""
    from rc1.generation import SamplingParams, base_ref, open_sampler
    from rc1.rewards.reward import RewardModel
    from rc1.strategies.common import score_rollout
    from rc1.training.base import rollout_seed
    from rc1.training.sampler import load_training_items, make_sampler

    cfg = cfg.model_copy(deep=True)
    if cfg.engine.name == "trl":
        cfg.strategy.max_turns = 1
    ident, settings = signal_identity(ws, cfg)
    seed_items, other_items, _ = load_training_items(ws, cfg)
    sampler_of_items = make_sampler(cfg, seed_items, other_items)
    reward = RewardModel.from_config(cfg, ws)
    G, P = cfg.strategy.num_generations, cfg.strategy.prompts_per_step
    generator, note, check = open_sampler(cfg, base_ref(cfg))
    t0 = time.perf_counter()
    items, episodes = [], []
    step, target, rounds = 0, prompts, 1
    try:
        while True:
            if len(items) >= target * G:
                if informative_min is None or rounds >= MAX_ROUNDS:
                    break
                stats = score_rollout(items, episodes, reward, G).stats
                _, lo, hi, planned = informative_bounds(len(items) // G, stats.no_success_signal_groups, cfg)
                if not planned * lo < informative_min <= planned * hi:
                    break
                target, rounds = target + prompts, rounds + 1
                log.info("learning signal: expected informative groups [%.1f, %.1f] straddle %g: %d more prompts",
                         planned * lo, planned * hi, informative_min, prompts)
            batch = sampler_of_items.next_batch(step, min(P, target - len(items) // G))
            # the training rollout's settings (rc1.engines.pure_pt rollout), with the step's training seed
            params = SamplingParams.training(cfg, seed=rollout_seed(cfg.run.seed, step), rows=len(batch) * G)
            episodes += generator.episodes(batch, num_generations=G, params=params)
            items += [it for it in batch for _ in range(G)]
            step += 1
            if progress:
                progress(f"learning signal: {len(items) // G}/{target} prompts ({generator.backend})")
    finally:
        generator.close()
    seconds = time.perf_counter() - t0
    ro = score_rollout(items, episodes, reward, G)
    stats = ro.stats
    by_task: dict[str, list] = defaultdict(list)
    by_bucket: dict[str, list] = defaultdict(list)
    for it, s, ep in zip(items, ro.successes, ro.episodes):
        by_task[it.get("task", "?")].append((s, ep.truncated))
        by_bucket[it.get("bucket") or "medium"].append((s, ep.truncated))

    def part(rows):
        return {"episodes": len(rows), "pass_rate": sum(s for s, _ in rows) / len(rows),
                "truncation_rate": sum(bool(t) for _, t in rows) / len(rows)}
    report = {
        "version": REPORT_VERSION, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "identity": ident, "settings": settings, "prompts": len(items) // G, "group_size": G, "rounds": rounds,
        "episodes": len(items), "pass_rate": stats.success, "pass_at_k": stats.pass_at_k,
        "truncation_rate": stats.truncated, "zero_variance_group_frac": stats.zero_var_groups,
        "no_success_signal_group_frac": stats.no_success_signal_groups,
        "completion_len": stats.completion_len, "reward_mean": stats.reward,
        "by_task": {k: part(v) for k, v in sorted(by_task.items())},
        "by_bucket": {k: part(v) for k, v in sorted(by_bucket.items())},
        "item_pass_rates": ro.group_success(), "seconds": round(seconds, 2),
        "generation": {"backend": generator.backend, "note": note or None, "check": check or None},
        "episodes_per_s": round(len(items) / max(seconds, 1e-9), 3),
    }
    path = atomic_write_json(ws.path(REPORT), report)
    register_artifact(ws, path, "learning_signal", identity=ident)
    log.info("learning signal: pass rate %.3f, pass@%d %.3f, truncated %.3f over %d episodes (%.0f s)",
             report["pass_rate"], G, report["pass_at_k"], report["truncation_rate"], len(items), seconds)
    return report
