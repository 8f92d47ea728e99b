"""Shadow run: the old reward vs the new one on base-model responses to the shadow set.

old = the reward before the current one: the seven dimensions with the weights that the last
      calibration replaced (configs/weights.<sha12>.json, named in the current file's `previous`),
      no penalty, no bonus. With no calibration yet, the current weights without penalty and bonus.
new = `RewardModel.from_config(cfg)` (configs/weights.json + over-clarification penalty + difficulty bonus)

Report (reports/shadow_run_<tag>.json): spearman and kendall_tau between old and new shaping (the
reward without its I[success] term, which both share and which would make any two rewards agree),
top10_overlap / top20_overlap (share of the top 10 % / 20 % by old shaping also in the top by new;
total_* are the same on the totals, reported only), and how well each reward tracks verifier success
beyond the verifier itself. Both totals contain I[success],
and `correctness` is the verifier's score, so their correlation with success is automatic (reported
as total_corr_to_success_*, not judged). What calibration changes, and what is compared, is the rest:
free_old / free_new = the weighted dimensions other than correctness (minus the new reward's penalty).
corr_to_success_old / _new are their Pearson (point-biserial) correlations with success,
corr_improve_pct = (new - old) / |old| * 100, with a bootstrap CI over the answers
(corr_improve_pct_ci). `weights_changed` says whether the free weights differ at all. Plus the sha256
of every input so the round 2 gate can tell that the report was made from the current shadow set,
responses, weights and penalty.
"""

from __future__ import annotations

import math
import time

import numpy as np

from rc1.config.names import REWARD_DIMENSIONS
from rc1.config.schema import TrainConfig
from rc1.rewards.calibrate import HELD
from rc1.rewards.responses import obtain_responses, pair_rows, responses_path
from rc1.envs.episode import EpisodeOutcome
from rc1.rewards.reward import RewardModel
from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import register_artifact, sha256_file
from rc1.runtime.workspace import Workspace


def top_overlap(a: np.ndarray, b: np.ndarray, frac: float) -> float:
    """|top-k(a) ∩ top-k(b)| / k with k = ceil(frac * n); ties broken by position (stable)."""
    k = max(1, math.ceil(frac * len(a)))
    ta = set(np.argsort(-a, kind="stable")[:k].tolist())
    tb = set(np.argsort(-b, kind="stable")[:k].tolist())
    return len(ta & tb) / k


def _corr(x: np.ndarray, y: np.ndarray) -> float:
    if len(x) < 2 or np.std(x) == 0 or np.std(y) == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])


def compare(old: np.ndarray, new: np.ndarray, success: np.ndarray) -> dict:
    """Agreement of two reward vectors and their correlation with success."""
    from scipy import stats

    rho = stats.spearmanr(old, new).statistic if len(old) > 1 else float("nan")
    tau = stats.kendalltau(old, new).statistic if len(old) > 1 else float("nan")
    c_old, c_new = _corr(old, success), _corr(new, success)
    return {"spearman": float(rho), "kendall_tau": float(tau), "top10_overlap": top_overlap(old, new, 0.10),
            "top20_overlap": top_overlap(old, new, 0.20), "corr_to_success_old": c_old,
            "corr_to_success_new": c_new, "corr_improve_pct": _improve(c_old, c_new)}


def _improve(c_old: float, c_new: float) -> float:
    return (c_new - c_old) / abs(c_old) * 100 if c_old and not math.isnan(c_old) and not math.isnan(c_new) else float("nan")


def improvement_ci(old: np.ndarray, new: np.ndarray, success: np.ndarray, *, confidence: float = 0.95,
                   resamples: int = 2000, seed: int = 0) -> dict:
    """Bootstrap CI (over answers) of the improvement in correlation with success, new vs old (%)."""
    from scipy.stats import bootstrap

    def stat(idx, axis=-1):
        idx = np.atleast_2d(idx)
        out = []
        for row in idx:
            o, n_, y = old[row], new[row], success[row]
            out.append(_improve(_corr(o, y), _corr(n_, y)))
        return np.array(out) if len(out) > 1 else out[0]

    if len(success) < 3 or success.min() == success.max():
        return {"lo": None, "hi": None, "confidence": confidence}
    res = bootstrap((np.arange(len(success)),), stat, vectorized=True, n_resamples=resamples,
                    confidence_level=confidence, method="percentile", random_state=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return {"lo": None if math.isnan(lo) else lo, "hi": None if math.isnan(hi) else hi, "confidence": confidence,
            "resamples": resamples}


def free_part(model: RewardModel, breakdowns) -> np.ndarray:
    """The reward's weighted dimensions other than correctness, minus its penalty (what calibration fits)."""
    return np.array([sum(model.weights[d] * b.dims[d] for d in REWARD_DIMENSIONS if d not in HELD) - b.penalty
                     for b in breakdowns])


def penalty_settings(cfg: TrainConfig) -> dict:
    return {"use_overclar_penalty": cfg.use_overclar_penalty, "alpha": cfg.reward.overclar.alpha,
            "cap": cfg.reward.overclar.cap, "difficulty_beta": cfg.reward.difficulty_beta}


def old_reward(ws: Workspace, cfg: TrainConfig) -> tuple[RewardModel, dict]:
    """The shadow run's old reward and how it is described in the report (see the module docstring)."""
    from rc1.rewards.weights import previous_weights, read_weights

    prev = previous_weights(ws, cfg.reward.weights)
    if prev is None:
        weights = read_weights(ws, cfg.reward.weights)
        return RewardModel.plain(weights), {
            "name": "current weights, no penalty, no bonus (no calibration has replaced the weights)",
            "weights": weights, "weights_path": cfg.reward.weights}
    weights, rel = prev
    return RewardModel.plain(weights), {"name": "previous weights (before calibration), no penalty, no bonus",
                                        "weights": weights, "weights_path": rel,
                                        "weights_sha256": sha256_file(ws.path(rel))}


def shadow_run(ws: Workspace, cfg: TrainConfig, *, n: int | None = None, seed: int = 20250820, stratify: bool = True,
               tag: str = "pre_run_check", regenerate: bool = False, max_turns: int | None = None,
               batch_size: int = 8, source: str | None = None, confidence: float = 0.95) -> dict:
    """Score base-model responses to the shadow set with the old and the new reward. `n`, `max_turns` and
    `source` default to the run config's eval.shadow_run_n (else the shadow set's pool.shadow_n),
    eval.shadow_run_max_turns and eval.shadow_run_source.

    source "sample": `n` items (stratified, seeded) answered with the training sampler settings
    (data/shadow_responses_<tag>.jsonl). source "eval_base": the greedy base-model episodes of the
    eval's held-out pass (eval.n_shadow items, reports/eval_cache), generated once and shared with
    `rc1 eval`, so the reward is checked on exactly the answers the trained model is compared to."""
    ev = cfg.eval
    n, max_turns = n or ev.shadow_run_n or cfg.pool.shadow_n, max_turns or ev.shadow_run_max_turns
    source = source or ev.shadow_run_source
    new_model = RewardModel.from_config(cfg, ws)
    old_model, old_info = old_reward(ws, cfg)
    if source == "eval_base":
        from rc1.eval.harness import base_episodes

        items, episodes, info = base_episodes(ws, cfg)
        pairs = [(it, EpisodeOutcome.from_dict(ep)) for it, ep in zip(items, episodes)]
        meta = {"shadow_set": info["shadow_set"], "shadow_set_sha256": info["shadow_set_sha256"],
                "sha256": info["cache_sha256"], "max_new_tokens": info["generation"]["max_new_tokens"],
                "temperature": 0.0, "max_turns": info["generation"]["max_turns"], "generations": 1,
                "generation_seconds": info["throughput"].get("seconds"), "created": None,
                "backends": [info["throughput"].get("backend")]}
        responses_rel, seed, stratify = info["cache"], None, True
    elif source == "sample":
        items, rows, meta = obtain_responses(ws, cfg, n=n, seed=seed, stratify=stratify, tag=tag,
                                             regenerate=regenerate, max_turns=max_turns, batch_size=batch_size)
        pairs = pair_rows({it["id"]: it for it in items}, rows)
        responses_rel = responses_path(tag)
    else:
        raise ConfigError(f"--source must be 'sample' or 'eval_base' (got {source!r})")
    t0 = time.perf_counter()
    old_b = [old_model.score(it, ep) for it, ep in pairs]
    new_b = [new_model.score(it, ep) for it, ep in pairs]
    score_s = time.perf_counter() - t0
    old = np.array([b.total for b in old_b])
    new = np.array([b.total for b in new_b])
    success = np.array([float(b.success) for b in new_b])
    totals = compare(old, new, success)
    shaping = compare(np.array([b.shaping for b in old_b]), np.array([b.shaping for b in new_b]), success)
    free_old, free_new = free_part(old_model, old_b), free_part(new_model, new_b)
    free = compare(free_old, free_new, success)
    metrics = {k: shaping[k] for k in ("spearman", "kendall_tau", "top10_overlap", "top20_overlap")}
    metrics.update({f"total_{k}": totals[k] for k in ("spearman", "kendall_tau", "top10_overlap", "top20_overlap")})
    metrics.update({"corr_to_success_old": free["corr_to_success_old"], "corr_to_success_new": free["corr_to_success_new"],
                    "corr_improve_pct": free["corr_improve_pct"],
                    "corr_improve_pct_ci": improvement_ci(free_old, free_new, success, confidence=confidence,
                                                          seed=len(success)),
                    "corr_basis": "weighted dimensions other than correctness (minus the penalty) vs verifier success",
                    "weights_changed": any(abs(old_model.weights[d] - new_model.weights[d]) > 1e-9
                                           for d in REWARD_DIMENSIONS if d not in HELD),
                    "total_corr_to_success_old": totals["corr_to_success_old"],
                    "total_corr_to_success_new": totals["corr_to_success_new"]})
    by_task = {}
    for task in sorted({it["task"] for it, _ in pairs}):
        idx = np.array([it["task"] == task for it, _ in pairs])
        by_task[task] = {"n": int(idx.sum()), "success": float(success[idx].mean()),
                         "old_mean": float(old[idx].mean()), "new_mean": float(new[idx].mean())}
    weights_path = cfg.reward.weights
    report = {
        "tag": tag, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "n": len(pairs),
        "n_items": len(items), "source": source, "seed": seed, "stratify": stratify, **metrics,
        "n_success": int(success.sum()), "n_failure": int(len(success) - success.sum()),
        "success_rate": float(success.mean()) if len(success) else float("nan"),
        "overclar_rate": _overclar_rate(pairs),
        "old_reward": {**old_info, "mean": float(old.mean())},
        "new_reward": {"name": "weights file + overclar penalty + difficulty bonus", "mean": float(new.mean()),
                       "weights": new_model.weights, **penalty_settings(cfg)},
        "by_task": by_task, "score_seconds": score_s, "model_base": cfg.model.base,
        "generation": {k: meta.get(k) for k in ("max_new_tokens", "temperature", "max_turns", "generations",
                                                 "generation_seconds", "created", "backends")},
        "inputs": {"shadow_set": meta["shadow_set"], "shadow_set_sha256": meta["shadow_set_sha256"],
                   "responses": responses_rel, "responses_sha256": meta["sha256"],
                   "weights": weights_path, "weights_sha256": sha256_file(ws.path(weights_path))},
    }
    out = f"reports/shadow_run_{tag}.json"
    atomic_write_json(ws.path(out), report)
    register_artifact(ws, out, "shadow_run", tag=tag)
    report["report_path"] = out
    return report


def _overclar_rate(pairs) -> float:
    no_need = [ep for it, ep in pairs if not it.get("needs_clarification")]
    return sum(ep.clarifications > 0 for ep in no_need) / len(no_need) if no_need else 0.0
