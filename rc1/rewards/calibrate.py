"""Weight calibration: non-negative least squares with an L2 prior toward the current weights.

    minimize ||X w - y||^2 + lambda * ||w - w0||^2   s.t. 0 <= w_i <= 0.5, sum w = 1

X = the seven rule-based dimensions of each scored response, y = the calibration target:
  - `success` (default): the verifier's task success of the response (1/0), real outcomes;
  - `judge`: the LLM judge's median grade of the response (K samples; failed or unstable
    scores are dropped / down-weighted as the judge client reports them).

Solver: scipy.optimize.nnls on the augmented system [X; sqrt(l) I] w = [y; sqrt(l) w0] gives the
unconstrained-sum NNLS solution; it is projected exactly onto the capped simplex and used as the
start of SLSQP with bounds [0, cap] and the equality sum w = 1 (the exact constrained optimum).
lambda is picked unless given: from the grid, the strongest prior (closest to the current weights)
whose bootstrap acceptance passes, the smallest move that gives the required improvement (the round
2 shadow run also asks the new reward to keep the old one's top answers). When none passes, the best
5-fold CV Spearman correlation with the target wins (a reward's job is to rank responses: GRPO/RLOO
use ranks within a group), ties within RANK_TIE_REL going to the stronger prior. (A one-standard-error
rule was tried first: with a rare binary target the rank correlation's standard error is so wide,
0.075 on 120 answers with 7 successes, that it always picked the strongest prior and calibration
could never move the weights.) Out-of-fold MAE and rank correlation are reported for every lambda.
200 bootstrap resamples (the same ones for every lambda) refit with a lambda and compare prior vs
fitted weights on the out-of-bag rows: rank correlation (Spearman) with the target and MAE, with
95 % intervals. Acceptance (gates calibration section): median
rank-corr improvement >= 8 % and median MAE reduction >= 5 % vs the prior weights.
"""

from __future__ import annotations

import math
import time

import numpy as np

from rc1.config.schema import REWARD_DIMENSIONS, GatesConfig, TrainConfig
from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import register_artifact, sha256_file
from rc1.runtime.workspace import Workspace

LAMBDA_GRID = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0)  # x n (the prior's pull does not shrink with n)
RANK_TIE_REL = 0.01  # CV rank correlations within 1 % of the best count as equally good


def project_capped_simplex(v: np.ndarray, cap: float = 0.5, total: float = 1.0) -> np.ndarray:
    """Euclidean projection onto {w : 0 <= w_i <= cap, sum w = total} (bisection on the shift)."""
    v = np.asarray(v, dtype=float)
    if cap * len(v) < total - 1e-12:
        raise ValueError(f"infeasible: {len(v)} weights capped at {cap} cannot sum to {total}")
    lo, hi = v.min() - cap - 1.0, v.max() + 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        s = np.clip(v - mid, 0.0, cap).sum()
        if s > total:
            lo = mid
        else:
            hi = mid
    w = np.clip(v - (lo + hi) / 2, 0.0, cap)
    return w * (total / w.sum()) if w.sum() > 0 else np.full(len(v), total / len(v))


def fit_weights(X: np.ndarray, y: np.ndarray, w0: np.ndarray, lam: float, cap: float = 0.5,
                sample_weight: np.ndarray | None = None) -> np.ndarray:
    from scipy.optimize import minimize, nnls

    sw = np.sqrt(sample_weight) if sample_weight is not None else np.ones(len(y))
    Xs, ys = X * sw[:, None], y * sw
    d = X.shape[1]
    A = np.vstack([Xs, math.sqrt(lam) * np.eye(d)]) if lam > 0 else Xs
    b = np.concatenate([ys, math.sqrt(lam) * w0]) if lam > 0 else ys
    w_nnls, _ = nnls(A, b)
    start = project_capped_simplex(w_nnls, cap)
    AtA, Atb = A.T @ A, A.T @ b

    def f(w):
        return float(w @ AtA @ w - 2 * Atb @ w)

    def g(w):
        return 2 * (AtA @ w - Atb)

    res = minimize(f, start, jac=g, method="SLSQP", bounds=[(0.0, cap)] * d,
                   constraints=[{"type": "eq", "fun": lambda w: w.sum() - 1.0, "jac": lambda w: np.ones(d)}],
                   options={"ftol": 1e-12, "maxiter": 200})
    w = project_capped_simplex(res.x, cap)  # remove SLSQP's 1e-10 constraint slop
    return w if f(w) <= f(start) + 1e-12 else start


def rank_corr(pred: np.ndarray, y: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if len(y) < 3 or np.std(y) == 0 or np.std(pred) == 0:
        return float("nan")
    return float(spearmanr(pred, y).statistic)


def mae(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - y)))


def _pct(new: float, old: float, higher_is_better: bool) -> float:
    if not np.isfinite(new) or not np.isfinite(old) or old == 0:
        return float("nan")
    return (new - old) / abs(old) * 100 if higher_is_better else (old - new) / abs(old) * 100


def _folds(n: int, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    return np.array_split(rng.permutation(n), k)


def cross_validate(X, y, w0, lam, k, rng, cap=0.5, sw=None, se_resamples: int = 200) -> dict:
    """Out-of-fold predictions for one lambda: MAE and Spearman with the target, and the Spearman's
    standard error (bootstrap over items of the out-of-fold predictions; per-fold correlations are
    useless when the target is rare, e.g. a few successes in a fold or none)."""
    pred_fit, pred_prior = np.empty(len(y)), X @ w0
    for test in _folds(len(y), k, rng):
        train = np.setdiff1d(np.arange(len(y)), test)
        w = fit_weights(X[train], y[train], w0, lam * len(train), cap, None if sw is None else sw[train])
        pred_fit[test] = X[test] @ w
    boot_rng = np.random.default_rng(int(rng.integers(2**32)))
    boots = [rank_corr(pred_fit[idx], y[idx]) for idx in boot_rng.integers(0, len(y), (se_resamples, len(y)))]
    finite = np.array([b for b in boots if np.isfinite(b)])
    se = float(np.std(finite, ddof=1)) if len(finite) > 1 else 0.0
    return {"lambda": lam, "mae_fit": mae(pred_fit, y), "mae_prior": mae(pred_prior, y),
            "rank_corr_fit": rank_corr(pred_fit, y), "rank_corr_fit_se": se, "rank_corr_prior": rank_corr(pred_prior, y)}


def choose_lambda(cv: list[dict]) -> float:
    """The largest lambda whose CV rank correlation is within RANK_TIE_REL of the best."""
    scored = [r for r in cv if np.isfinite(r["rank_corr_fit"])]
    if not scored:  # no ranking signal (e.g. a constant target): fall back to out-of-fold MAE
        return min(cv, key=lambda r: (r["mae_fit"], -r["lambda"]))["lambda"]
    best = max(r["rank_corr_fit"] for r in scored)
    limit = best - RANK_TIE_REL * abs(best)
    return max(r["lambda"] for r in scored if r["rank_corr_fit"] >= limit - 1e-12)


def _ci(xs) -> dict:
    a = np.array([x for x in xs if np.isfinite(x)])
    if not len(a):
        return {"median": float("nan"), "lo95": float("nan"), "hi95": float("nan"), "n": 0}
    return {"median": float(np.median(a)), "lo95": float(np.percentile(a, 2.5)),
            "hi95": float(np.percentile(a, 97.5)), "n": int(len(a))}


def bootstrap_acceptance(X: np.ndarray, y: np.ndarray, w0: np.ndarray, lam: float, *, bootstrap: int, seed: int,
                         cap: float = 0.5, sample_weight: np.ndarray | None = None, rank_min_pct: float = 8.0,
                         mae_min_pct: float = 5.0) -> dict:
    """Refit with `lam` on `bootstrap` resamples; compare prior vs fitted weights on the out-of-bag rows.

    The resamples depend on `seed` only, so every lambda is judged on the same ones."""
    n = len(y)
    rng = np.random.default_rng(seed)
    boot = {"rank_corr_prior": [], "rank_corr_fit": [], "mae_prior": [], "mae_fit": [], "rank_improve_pct": [],
            "mae_reduce_pct": [], "weights": []}
    for _ in range(bootstrap):
        idx = rng.integers(0, n, n)
        oob = np.setdiff1d(np.arange(n), idx)
        if len(oob) < 3:
            continue
        wb = fit_weights(X[idx], y[idx], w0, lam * n, cap, None if sample_weight is None else sample_weight[idx])
        rp, rf = rank_corr(X[oob] @ w0, y[oob]), rank_corr(X[oob] @ wb, y[oob])
        mp, mf = mae(X[oob] @ w0, y[oob]), mae(X[oob] @ wb, y[oob])
        boot["rank_corr_prior"].append(rp)
        boot["rank_corr_fit"].append(rf)
        boot["mae_prior"].append(mp)
        boot["mae_fit"].append(mf)
        boot["rank_improve_pct"].append(_pct(rf, rp, True))
        boot["mae_reduce_pct"].append(_pct(mf, mp, False))
        boot["weights"].append(wb)
    rank_imp, mae_red = _ci(boot["rank_improve_pct"]), _ci(boot["mae_reduce_pct"])
    passed = bool(rank_imp["median"] >= rank_min_pct and mae_red["median"] >= mae_min_pct)
    return {"boot": boot, "acceptance": {
        "rank_corr_improve_pct_median": rank_imp["median"], "rank_corr_improve_pct_ci": rank_imp,
        "mae_reduce_pct_median": mae_red["median"], "mae_reduce_pct_ci": mae_red,
        "rank_corr_improve_pct_min": rank_min_pct, "mae_reduce_pct_min": mae_min_pct, "passed": passed}}


def calibrate_arrays(X: np.ndarray, y: np.ndarray, w0: np.ndarray, *, prior_strength: float | None = None,
                     folds: int = 5, bootstrap: int = 200, seed: int = 20250820, cap: float = 0.5,
                     sample_weight: np.ndarray | None = None, rank_min_pct: float = 8.0,
                     mae_min_pct: float = 5.0) -> dict:
    """The numerical core (no I/O): CV over the lambda grid, choose lambda, fit, bootstrap, acceptance.

    Lambda (unless given): the strongest prior whose bootstrap acceptance passes, i.e. the weights closest
    to the current ones that still improve rank correlation and MAE by the required margins. The
    round 2 shadow run then asks the new reward to keep the old one's top answers (top-10 % overlap,
    Spearman); the smallest sufficient move is what serves both. When no lambda passes, the best CV
    rank correlation is kept (choose_lambda) and the report says the acceptance failed."""
    n = len(y)
    if n < max(folds, 10):
        raise ConfigError(f"calibration needs at least {max(folds, 10)} scored responses (got {n})")
    t0 = time.perf_counter()
    grid = [prior_strength] if prior_strength is not None else list(LAMBDA_GRID)
    cv = [cross_validate(X, y, w0, lam, folds, np.random.default_rng(seed), cap, sample_weight) for lam in grid]
    opts = dict(bootstrap=bootstrap, seed=seed, cap=cap, sample_weight=sample_weight, rank_min_pct=rank_min_pct,
                mae_min_pct=mae_min_pct)
    tried: list[dict] = []
    chosen = None
    if prior_strength is None:
        for lam in sorted(grid, reverse=True):
            res = bootstrap_acceptance(X, y, w0, lam, **opts)
            a = res["acceptance"]
            tried.append({"lambda": lam, "rank_corr_improve_pct_median": a["rank_corr_improve_pct_median"],
                          "mae_reduce_pct_median": a["mae_reduce_pct_median"], "passed": a["passed"]})
            if a["passed"]:
                chosen = (lam, res)
                break
        rule = "strongest prior whose bootstrap acceptance passes"
    if chosen is None:
        lam = prior_strength if prior_strength is not None else choose_lambda(cv)
        chosen = (lam, bootstrap_acceptance(X, y, w0, lam, **opts))
        rule = "given" if prior_strength is not None else (
            f"none passed: best CV rank correlation (ties within {RANK_TIE_REL:.0%}: strongest prior)")
    lam, res = chosen
    boot = res["boot"]
    w = fit_weights(X, y, w0, lam * n, cap, sample_weight)
    wmat = np.array(boot["weights"]) if boot["weights"] else np.empty((0, len(w0)))
    return {
        "n": n, "lambda": lam, "lambda_scaled": lam * n, "cv": cv, "lambda_rule": rule, "lambdas_tried": tried,
        "folds": folds, "bootstrap": len(boot["weights"]),
        "weights_prior": dict(zip(REWARD_DIMENSIONS, map(float, w0))),
        "weights_new": dict(zip(REWARD_DIMENSIONS, map(float, w))),
        "weights_ci": {d: _ci(wmat[:, i]) for i, d in enumerate(REWARD_DIMENSIONS)} if len(wmat) else {},
        "in_sample": {"rank_corr_prior": rank_corr(X @ w0, y), "rank_corr_new": rank_corr(X @ w, y),
                      "mae_prior": mae(X @ w0, y), "mae_new": mae(X @ w, y)},
        "out_of_bag": {k: _ci(boot[k]) for k in ("rank_corr_prior", "rank_corr_fit", "mae_prior", "mae_fit")},
        "acceptance": res["acceptance"],
        "constraints": {"min": float(w.min()), "max": float(w.max()), "sum": float(w.sum()), "cap": cap},
        "seconds": time.perf_counter() - t0,
    }


def _targets(ws, cfg, pairs, target: str, provider: str | None):
    """y (and per-row weights) for the scored responses."""
    from rc1.rewards.dimensions import score_dimensions

    dims = [score_dimensions(it, ep) for it, ep in pairs]
    X = np.array([[d[k] for k in REWARD_DIMENSIONS] for d, _ in dims])
    if target == "success":
        return X, np.array([float(s) for _, s in dims]), None, {}
    if target != "judge":
        raise ConfigError(f"--target must be 'success' or 'judge' (got {target!r})")
    from rc1.rewards.judge import JudgeClient

    with JudgeClient(ws, cfg.scorer, cfg.reward, provider=provider) as client:
        scores = client.score_many([(it, ep.model_text) for it, ep in pairs], [ep.item_id for _, ep in pairs])
        stats = client.stats()
    keep = np.array([s.ok for s in scores])
    if keep.sum() < 10:
        raise ConfigError(f"only {int(keep.sum())} responses got a judge grade; cannot calibrate on judge scores")
    y = np.array([s.median if s.ok else 0.0 for s in scores])
    sw = np.array([s.weight for s in scores])
    info = {"judge_run_id": stats["run_id"], "judge_provider": stats["provider"], "judge_model": stats["model"],
            "dropped_unscored": int((~keep).sum()), "unstable": int(sum(s.unstable for s in scores)),
            "judge_cache_hit_rate": stats["cache_hit_rate"]}
    return X[keep], y[keep], sw[keep], info


def calibrate(ws: Workspace, cfg: TrainConfig, gates: GatesConfig, *, responses: str | None = None,
              target: str = "success", prior_strength: float | None = None, folds: int = 5, bootstrap: int = 200,
              seed: int = 20250820, apply: str = "pass", provider: str | None = None, items: str | None = None,
              n: int = 64, max_turns: int | None = None, tag: str = "calibration") -> dict:
    """Fit new weights on scored base-model responses and write the calibration report.

    Responses: with `items` (a calibration split, e.g. the training items), the base model answers
    `n` of them (stratified, seeded; data/responses_<tag>.jsonl, reused while it matches), so the
    shadow run that follows is scored on items the weights were not fitted on. Without `items`:
    `responses` (or the newest data/shadow_responses_*.jsonl), paired with the shadow set.
    """
    from rc1.rewards.responses import (load_item_file, load_responses_file, load_shadow_set, obtain_responses,
                                       pair_rows)
    from rc1.rewards.weights import read_weights, write_weights

    if apply not in ("pass", "always", "never"):
        raise ConfigError(f"--apply must be pass, always or never (got {apply!r})")
    if items is not None and responses is None:
        source, rows, _ = obtain_responses(ws, cfg, n=n, seed=seed, stratify=True, tag=tag, max_turns=max_turns,
                                           items_path=items)
        from rc1.rewards.responses import responses_path

        responses = responses_path(tag, shadow=False)
    else:
        if responses is None:
            found = sorted(ws.data.glob("shadow_responses_*.jsonl"), key=lambda p: p.stat().st_mtime)
            if not found:
                raise ConfigError("no scored responses: run `rc1 reward shadow-run` first, or pass --responses or --items")
            responses = ws.rel(found[-1])
        rows = load_responses_file(ws, responses)
        source = load_item_file(ws, items)[0] if items is not None else load_shadow_set(ws, cfg)[0]
    pairs = pair_rows({it["id"]: it for it in source}, rows)
    cap = gates.reward.weight_max
    weights_rel = cfg.reward.weights
    w0 = np.array([read_weights(ws, weights_rel, max_weight=cap)[d] for d in REWARD_DIMENSIONS])
    X, y, sw, target_info = _targets(ws, cfg, pairs, target, provider)
    core = calibrate_arrays(X, y, w0, prior_strength=prior_strength, folds=folds, bootstrap=bootstrap, seed=seed,
                            cap=cap, sample_weight=sw, rank_min_pct=gates.calibration.rank_corr_improve_pct_min,
                            mae_min_pct=gates.calibration.mae_reduce_pct_min)
    ts = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    prior_sha = sha256_file(ws.path(weights_rel))
    applied = apply == "always" or (apply == "pass" and core["acceptance"]["passed"])
    archived = None
    if applied:
        archived = write_weights(ws.path(weights_rel), core["weights_new"], version=f"calibrated-{ts}",
                                 note=f"rc1 reward calibrate: target {target}, n {core['n']}, lambda {core['lambda']:g}, "
                                      f"prior sha256 {prior_sha[:12]}", max_weight=cap)
        register_artifact(ws, weights_rel, "weights", calibrated=ts)
    report = {"time": ts, "target": target, "target_doc": (
        "verifier task success (1/0) of each scored response" if target == "success"
        else "judge median grade (0-1) of each scored response"), **target_info,
        "responses": responses, "responses_sha256": sha256_file(ws.path(responses)), "items": items,
        "weights_path": weights_rel, "weights_prior_sha256": prior_sha,
        "weights_new_sha256": sha256_file(ws.path(weights_rel)) if applied else None,
        "applied": applied, "apply_policy": apply, "archived": ws.rel(archived) if archived else None, **core}
    out = f"reports/calibration_report_{ts}.json"
    atomic_write_json(ws.path(out), report)
    register_artifact(ws, out, "calibration_report", passed=core["acceptance"]["passed"], applied=applied)
    report["report_path"] = out
    return report
