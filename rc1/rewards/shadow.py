"""Shadow run: the old reward vs the new one on base-model responses to the shadow set.

old = the reward before the current one: the seven dimensions with the weights that the last
      calibration replaced (configs/weights.<sha12>.json, named in the current file's `previous`),
      no penalty, no bonus. With no calibration yet, the current weights without penalty and bonus.
new = `RewardModel.from_config(cfg)` (configs/weights.json + over-clarification penalty + difficulty bonus)

Report (reports/shadow_run_<tag>.json): spearman and kendall_tau between old and new scores,
top10_overlap / top20_overlap (share of the top 10 % / 20 % by old also in the top by new),
corr_to_success_old / _new (Pearson, i.e. point-biserial, with verifier success),
corr_improve_pct = (new - old) / |old| * 100, plus the sha256 of every input so the round 2 gate
can tell that the report was made from the current shadow set, responses, weights and penalty.
"""

from __future__ import annotations

import math
import time

import numpy as np

from rc1.config.schema import TrainConfig
from rc1.rewards.responses import obtain_responses, pair_rows, responses_path
from rc1.rewards.reward import RewardModel, ScoredEpisode
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
    from scipy import stats

    rho = stats.spearmanr(old, new).statistic if len(old) > 1 else float("nan")
    tau = stats.kendalltau(old, new).statistic if len(old) > 1 else float("nan")
    c_old, c_new = _corr(old, success), _corr(new, success)
    improve = (c_new - c_old) / abs(c_old) * 100 if c_old and not math.isnan(c_old) else float("nan")
    return {"spearman": float(rho), "kendall_tau": float(tau), "top10_overlap": top_overlap(old, new, 0.10),
            "top20_overlap": top_overlap(old, new, 0.20), "corr_to_success_old": c_old,
            "corr_to_success_new": c_new, "corr_improve_pct": float(improve)}


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


def shadow_run(ws: Workspace, cfg: TrainConfig, *, n: int = 245, seed: int = 20250820, stratify: bool = True,
               tag: str = "pre_run_check", regenerate: bool = False, max_turns: int | None = None,
               batch_size: int = 8, source: str = "sample") -> dict:
    """Score base-model responses to the shadow set with the old and the new reward.

    source "sample": `n` items (stratified, seeded) answered with the training sampler settings
    (data/shadow_responses_<tag>.jsonl). source "eval_base": the greedy base-model episodes of the
    eval's held-out pass (eval.n_shadow items, reports/eval_cache), generated once and shared with
    `rc1 eval`, so the reward is checked on exactly the answers the trained model is compared to."""
    new_model = RewardModel.from_config(cfg, ws)
    old_model, old_info = old_reward(ws, cfg)
    if source == "eval_base":
        from rc1.eval.harness import base_episodes

        items, episodes, info = base_episodes(ws, cfg)
        pairs = [(it, ScoredEpisode.from_dict(ep)) for it, ep in zip(items, episodes)]
        meta = {"shadow_set": info["shadow_set"], "shadow_set_sha256": info["shadow_set_sha256"],
                "sha256": info["cache_sha256"], "max_new_tokens": info["generation"]["max_new_tokens"],
                "temperature": 0.0, "max_turns": info["generation"]["max_turns"], "generations": 1,
                "generation_seconds": info["throughput"].get("seconds"), "created": None}
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
    metrics = compare(old, new, success)
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
                                                 "generation_seconds", "created")},
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
