"""Weight calibration: non-negative least squares with an L2 prior toward the current weights.

    minimize ||X w - y||^2 + lambda * ||w - w0||^2   s.t. 0 <= w_i <= cap, sum w = 1 - (held weights)

Features never contain the target. X = the reward dimensions of each scored response except
`correctness`, which IS the verifier's score (the `success` target, or nearly so for hotpotqa's F1)
and which the reward already carries as I[success]: its weight is held at its current value and the
other six are fitted to share the rest. y = the calibration target:
  - `success` (default): the verifier's task success of the response (1/0), real outcomes;
  - `judge`: the LLM judge's median grade of the response (failed scores dropped, unstable ones
    down-weighted as the judge client reports them).

Solver: scipy.optimize.lsq_linear (bounded-variable least squares) on the augmented system
[X; sqrt(l) I; sqrt(M) 1'] w = [y; sqrt(l) w0; sqrt(M) total] (the sum as a stiff penalty row), projected
exactly onto the capped simplex; the final fit is polished by SLSQP with the exact equality.

lambda is chosen by K-fold cross-validation (folds over items, so an item's answers stay together):
the best out-of-fold Spearman correlation with the target (a reward's job is to rank responses;
GRPO/RLOO use ranks within a group), ties within RANK_TIE_REL going to the stronger prior.

Acceptance is tested on resamples that were not used for that choice: each of the bootstrap
resamples (over items) repeats the whole procedure on its in-bag items only (CV choice of lambda,
then the fit) and compares the prior and the fitted weights on its out-of-bag items: improvement of
the rank correlation with the target (%) and reduction of the MAE (%). Acceptance (gates
calibration section) is judged on the lower bound of each improvement's CI (`confidence`): rank-corr
improvement >= rank_corr_improve_pct_min and MAE reduction >= mae_reduce_pct_min; the medians are
reported beside them.
"""

from __future__ import annotations

import math
import time

import numpy as np

from rc1.config.gates import GatesConfig
from rc1.config.names import REWARD_DIMENSIONS
from rc1.config.schema import TrainConfig
from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import register_artifact, sha256_file
from rc1.runtime.workspace import Workspace

LAMBDA_GRID = (0.0, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0)  # x n (the prior's pull does not shrink with n)
RANK_TIE_REL = 0.01  # CV rank correlations within 1 % of the best count as equally good
HELD = ("correctness",)  # dimensions that contain the target: held at their current weight, never fitted
_SUM_PENALTY = 1e8


def project_capped_simplex(v: np.ndarray, cap: float = 0.5, total: float = 1.0) -> np.ndarray:
    """Euclidean projection onto {w : 0 <= w_i <= cap, sum w = total}: w = clip(v - t, 0, cap) with the
    shift t where the (piecewise linear, decreasing) sum meets `total`, found between its breakpoints."""
    v = np.asarray(v, dtype=float)
    if cap * len(v) < total - 1e-12:
        raise ValueError(f"infeasible: {len(v)} weights capped at {cap} cannot sum to {total}")
    knots = np.unique(np.concatenate([v, v - cap]))
    sums = np.clip(v[None, :] - knots[:, None], 0.0, cap).sum(1)  # decreasing in the knot
    i = int(np.searchsorted(-sums, -total))  # first knot whose sum is <= total
    if i == 0:
        t = knots[0]
    else:
        s0, s1 = sums[i - 1], sums[i]
        t = knots[i - 1] + (knots[i] - knots[i - 1]) * ((s0 - total) / (s0 - s1) if s0 != s1 else 0.0)
    return np.clip(v - t, 0.0, cap)


def fit_weights(X: np.ndarray, y: np.ndarray, w0: np.ndarray, lam: float, cap: float = 0.5,
                sample_weight: np.ndarray | None = None, total: float = 1.0, exact: bool = True) -> np.ndarray:
    """argmin ||Xw - y||^2 + lam ||w - w0||^2 over {0 <= w <= cap, sum w = total} (see the module docstring)."""
    from scipy.optimize import lsq_linear

    sw = np.sqrt(sample_weight) if sample_weight is not None else np.ones(len(y))
    Xs, ys = X * sw[:, None], y * sw
    d = X.shape[1]
    A = np.vstack([Xs, math.sqrt(lam) * np.eye(d)]) if lam > 0 else Xs
    b = np.concatenate([ys, math.sqrt(lam) * w0]) if lam > 0 else ys
    stiff = math.sqrt(_SUM_PENALTY)
    start = lsq_linear(np.vstack([A, stiff * np.ones((1, d))]), np.concatenate([b, [stiff * total]]),
                       bounds=(0.0, cap), method="bvls").x
    start = project_capped_simplex(start, cap, total)
    if not exact:
        return start
    from scipy.optimize import minimize

    AtA, Atb = A.T @ A, A.T @ b

    def f(w):
        return float(w @ AtA @ w - 2 * Atb @ w)

    res = minimize(f, start, jac=lambda w: 2 * (AtA @ w - Atb), method="SLSQP", bounds=[(0.0, cap)] * d,
                   constraints=[{"type": "eq", "fun": lambda w: w.sum() - total, "jac": lambda w: np.ones(d)}],
                   options={"ftol": 1e-12, "maxiter": 200})
    w = project_capped_simplex(res.x, cap, total)  # remove SLSQP's 1e-10 constraint slop
    return w if f(w) <= f(start) + 1e-12 else start


def rank_corr(pred: np.ndarray, y: np.ndarray) -> float:
    import warnings

    from scipy.stats import spearmanr

    if len(y) < 3 or np.ptp(y) == 0 or np.ptp(pred) <= 1e-12:
        return float("nan")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # near-constant predictions: NaN is the answer, not a warning
        return float(spearmanr(pred, y).statistic)


def mae(pred: np.ndarray, y: np.ndarray) -> float:
    return float(np.mean(np.abs(pred - y)))


def _pct(new: float, old: float, higher_is_better: bool) -> float:
    if not np.isfinite(new) or not np.isfinite(old) or old == 0:
        return float("nan")
    return (new - old) / abs(old) * 100 if higher_is_better else (old - new) / abs(old) * 100


def group_folds(groups: np.ndarray, k: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Row indices of k folds over the distinct groups (an item's answers stay in one fold)."""
    uniq = np.unique(groups)
    k = max(2, min(k, len(uniq)))
    return [np.flatnonzero(np.isin(groups, part)) for part in np.array_split(rng.permutation(uniq), k)]


def cross_validate(X, y, w0, lam, folds: list[np.ndarray], cap=0.5, sw=None, total=1.0) -> dict:
    """Out-of-fold predictions for one lambda: Spearman and MAE with the target, fitted vs prior."""
    pred_fit, pred_prior = np.empty(len(y)), X @ w0
    for test in folds:
        train = np.setdiff1d(np.arange(len(y)), test)
        w = fit_weights(X[train], y[train], w0, lam * len(train), cap, None if sw is None else sw[train], total,
                        exact=False)
        pred_fit[test] = X[test] @ w
    return {"lambda": lam, "mae_fit": mae(pred_fit, y), "mae_prior": mae(pred_prior, y),
            "rank_corr_fit": rank_corr(pred_fit, y), "rank_corr_prior": rank_corr(pred_prior, y)}


def choose_lambda(cv: list[dict]) -> float:
    """The largest lambda whose CV rank correlation is within RANK_TIE_REL of the best."""
    scored = [r for r in cv if np.isfinite(r["rank_corr_fit"])]
    if not scored:  # no ranking signal (e.g. a constant target): fall back to out-of-fold MAE
        return min(cv, key=lambda r: (r["mae_fit"], -r["lambda"]))["lambda"]
    best = max(r["rank_corr_fit"] for r in scored)
    limit = best - RANK_TIE_REL * abs(best)
    return max(r["lambda"] for r in scored if r["rank_corr_fit"] >= limit - 1e-12)


def select_lambda(X, y, w0, groups, grid, k, seed, cap=0.5, sw=None, total=1.0) -> tuple[float, list[dict]]:
    folds = group_folds(groups, k, np.random.default_rng(seed))
    cv = [cross_validate(X, y, w0, lam, folds, cap, sw, total) for lam in grid]
    return choose_lambda(cv), cv


def _ci(xs, confidence: float = 0.95) -> dict:
    a = np.array([x for x in xs if np.isfinite(x)])
    if not len(a):
        return {"median": float("nan"), "lo": float("nan"), "hi": float("nan"), "n": 0, "confidence": confidence}
    tail = (1 - confidence) / 2 * 100
    return {"median": float(np.median(a)), "lo": float(np.percentile(a, tail)),
            "hi": float(np.percentile(a, 100 - tail)), "n": int(len(a)), "confidence": confidence}


def bootstrap_acceptance(X: np.ndarray, y: np.ndarray, w0: np.ndarray, groups: np.ndarray, *, grid, folds: int,
                         bootstrap: int, seed: int, cap: float = 0.5, sample_weight: np.ndarray | None = None,
                         total: float = 1.0, confidence: float = 0.95, rank_min_pct: float = 8.0,
                         mae_min_pct: float = 5.0) -> dict:
    """Each resample (over groups) chooses lambda by CV and fits on its in-bag rows only, then prior and
    fitted weights are compared on its out-of-bag rows; acceptance on the CI lower bounds."""
    rng = np.random.default_rng(seed)
    uniq = np.unique(groups)
    rows = {g: np.flatnonzero(groups == g) for g in uniq}
    boot = {"lambda": [], "rank_corr_prior": [], "rank_corr_fit": [], "mae_prior": [], "mae_fit": [],
            "rank_improve_pct": [], "mae_reduce_pct": [], "weights": []}
    skipped = 0
    for b in range(bootstrap):
        drawn = rng.choice(uniq, len(uniq), replace=True)
        oob_groups = np.setdiff1d(uniq, drawn)
        inb = np.concatenate([rows[g] for g in drawn])
        oob = np.concatenate([rows[g] for g in oob_groups]) if len(oob_groups) else np.array([], dtype=int)
        if len(oob) < 3 or np.std(y[oob]) == 0 or np.std(y[inb]) == 0:
            skipped += 1  # nothing to rank on (e.g. no success out of bag)
            continue
        swi = None if sample_weight is None else sample_weight[inb]
        # folds by the original item: an item drawn twice stays in one fold, never on both sides of a split
        lam, _ = select_lambda(X[inb], y[inb], w0, groups[inb], grid, folds, seed + 1 + b, cap, swi, total)
        wb = fit_weights(X[inb], y[inb], w0, lam * len(inb), cap, swi, total, exact=False)
        rp, rf = rank_corr(X[oob] @ w0, y[oob]), rank_corr(X[oob] @ wb, y[oob])
        mp, mf = mae(X[oob] @ w0, y[oob]), mae(X[oob] @ wb, y[oob])
        for key, v in (("lambda", lam), ("rank_corr_prior", rp), ("rank_corr_fit", rf), ("mae_prior", mp),
                       ("mae_fit", mf), ("rank_improve_pct", _pct(rf, rp, True)),
                       ("mae_reduce_pct", _pct(mf, mp, False)), ("weights", wb)):
            boot[key].append(v)
    rank_imp, mae_red = _ci(boot["rank_improve_pct"], confidence), _ci(boot["mae_reduce_pct"], confidence)
    measurable = rank_imp["n"] >= max(10, bootstrap // 4)
    passed = bool(measurable and rank_imp["lo"] >= rank_min_pct and mae_red["lo"] >= mae_min_pct)
    return {"boot": boot, "skipped": skipped, "acceptance": {
        "judged_on": f"lower bound of the {confidence:.0%} bootstrap CI (out-of-bag items, lambda chosen in-bag)",
        "rank_corr_improve_pct": rank_imp, "mae_reduce_pct": mae_red,
        "rank_corr_improve_pct_median": rank_imp["median"], "mae_reduce_pct_median": mae_red["median"],
        "rank_corr_improve_pct_min": rank_min_pct, "mae_reduce_pct_min": mae_min_pct,
        "resamples_used": rank_imp["n"], "resamples_skipped": skipped, "measurable": measurable,
        "passed": passed}}


def calibrate_arrays(X: np.ndarray, y: np.ndarray, w0: np.ndarray, *, prior_strength: float | None = None,
                     folds: int = 5, bootstrap: int = 200, seed: int = 20250820, cap: float = 0.5,
                     sample_weight: np.ndarray | None = None, rank_min_pct: float = 8.0, mae_min_pct: float = 5.0,
                     groups: np.ndarray | None = None, held: tuple[str, ...] = HELD, confidence: float = 0.95) -> dict:
    """The numerical core (no I/O): lambda by CV, the fit, and acceptance by nested bootstrap.

    X has one column per REWARD_DIMENSIONS entry; the `held` columns are left out of the fit and keep
    their prior weight (see the module docstring)."""
    n = len(y)
    groups = np.arange(n) if groups is None else np.asarray(groups)
    n_groups = len(np.unique(groups))
    if n < max(folds, 10) or n_groups < folds:
        raise ConfigError(f"calibration needs at least {max(folds, 10)} scored responses to {folds}+ items "
                          f"(got {n} responses to {n_groups} items)")
    t0 = time.perf_counter()
    free = np.array([d not in held for d in REWARD_DIMENSIONS])
    Xf, w0f = X[:, free], w0[free]
    total = 1.0 - float(w0[~free].sum())
    grid = [prior_strength] if prior_strength is not None else list(LAMBDA_GRID)
    lam, cv = select_lambda(Xf, y, w0f, groups, grid, folds, seed, cap, sample_weight, total)
    wf = fit_weights(Xf, y, w0f, lam * n, cap, sample_weight, total)
    res = bootstrap_acceptance(Xf, y, w0f, groups, grid=grid, folds=folds, bootstrap=bootstrap, seed=seed, cap=cap,
                               sample_weight=sample_weight, total=total, confidence=confidence,
                               rank_min_pct=rank_min_pct, mae_min_pct=mae_min_pct)
    boot = res["boot"]
    w = w0.copy()
    w[free] = wf
    dims = [d for d, f in zip(REWARD_DIMENSIONS, free) if f]
    wmat = np.array(boot["weights"]) if boot["weights"] else np.empty((0, len(dims)))
    return {
        "n": n, "n_items": n_groups, "target_mean": float(np.mean(y)), "lambda": lam, "lambda_scaled": lam * n, "cv": cv,
        "lambda_rule": "given" if prior_strength is not None else (
            f"best {folds}-fold CV rank correlation with the target (ties within {RANK_TIE_REL:.0%}: strongest prior)"),
        "features": dims, "held_at_prior": {d: float(w0[i]) for i, d in enumerate(REWARD_DIMENSIONS) if not free[i]},
        "folds": folds, "bootstrap": bootstrap,
        "weights_prior": dict(zip(REWARD_DIMENSIONS, map(float, w0))),
        "weights_new": dict(zip(REWARD_DIMENSIONS, map(float, w))),
        "weights_ci": {d: _ci(wmat[:, i], confidence) for i, d in enumerate(dims)} if len(wmat) else {},
        "lambda_chosen_in_resamples": {str(k): int(v) for k, v in zip(*np.unique(boot["lambda"], return_counts=True))},
        "in_sample": {"rank_corr_prior": rank_corr(Xf @ w0f, y), "rank_corr_new": rank_corr(Xf @ wf, y),
                      "mae_prior": mae(Xf @ w0f, y), "mae_new": mae(Xf @ wf, y)},
        "out_of_bag": {k: _ci(boot[k], confidence) for k in ("rank_corr_prior", "rank_corr_fit", "mae_prior", "mae_fit")},
        "acceptance": res["acceptance"],
        "constraints": {"min": float(w.min()), "max": float(w.max()), "sum": float(w.sum()), "cap": cap},
        "seconds": time.perf_counter() - t0,
    }


def _targets(ws, cfg, pairs, target: str, provider: str | None):
    """X, y, per-row weights, item ids (the resampling groups) and target info of the scored responses."""
    from rc1.rewards.dimensions import score_dimensions

    dims = [score_dimensions(it, ep) for it, ep in pairs]
    X = np.array([[d[k] for k in REWARD_DIMENSIONS] for d, _ in dims])
    groups = np.array([str(it["id"]) for it, _ in pairs])
    if target == "success":
        return X, np.array([float(s) for _, s in dims]), None, groups, {}
    if target != "judge":
        raise ConfigError(f"--target must be 'success' or 'judge' (got {target!r})")
    from rc1.judge.client import JudgeClient

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
    return X[keep], y[keep], sw[keep], groups[keep], info


def calibrate(ws: Workspace, cfg: TrainConfig, gates: GatesConfig, *, responses: str | None = None,
              target: str = "success", prior_strength: float | None = None, folds: int = 5, bootstrap: int = 200,
              seed: int = 20250820, apply: str = "pass", provider: str | None = None, items: str | None = None,
              n: int = 64, max_turns: int | None = None, tag: str = "calibration", generations: int = 1) -> dict:
    """Fit new weights on scored base-model responses and write the calibration report.

    Responses: with `items` (a calibration split, e.g. the dev split), the base model answers `n` of
    them `generations` times each (stratified, seeded; data/responses_<tag>.jsonl, reused while it
    matches), so the shadow run that follows is scored on items the weights were not fitted on. With
    `responses` too: that file's answers to those items. Without `items`: `responses` (or the newest
    data/shadow_responses_*.jsonl), paired with the shadow set.
    """
    from rc1.rewards.responses import (load_item_file, load_responses_file, load_shadow_set, obtain_responses,
                                       pair_rows)
    from rc1.rewards.weights import read_weights, write_weights

    if apply not in ("pass", "always", "never"):
        raise ConfigError(f"--apply must be pass, always or never (got {apply!r})")
    if items is not None and responses is None:
        source, rows, _ = obtain_responses(ws, cfg, n=n, seed=seed, stratify=True, tag=tag, max_turns=max_turns,
                                           items_path=items, generations=generations)
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
    X, y, sw, groups, target_info = _targets(ws, cfg, pairs, target, provider)
    gc = gates.calibration
    core = calibrate_arrays(X, y, w0, prior_strength=prior_strength, folds=folds, bootstrap=bootstrap, seed=seed,
                            cap=cap, sample_weight=sw, rank_min_pct=gc.rank_corr_improve_pct_min,
                            mae_min_pct=gc.mae_reduce_pct_min, groups=groups, confidence=gc.confidence)
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


def current_report(ws: Workspace, weights_rel: str, responses_rel: str) -> dict | None:
    """The newest calibration report made from `responses_rel` as it is now, whose result is the current
    weights file (the weights it wrote, or, not applied, the weights it kept); None if there is none."""
    import json

    from rc1.runtime.fingerprint import verify_artifact

    wp, rp = ws.path(weights_rel), ws.path(responses_rel)
    if not wp.exists() or not rp.exists():
        return None
    w_sha, r_sha = sha256_file(wp), sha256_file(rp)
    for path in sorted(ws.reports.glob("calibration_report_*.json"), reverse=True):
        if not verify_artifact(ws, path):
            continue
        rep = json.loads(path.read_text())
        result = rep.get("weights_new_sha256") if rep.get("applied") else rep.get("weights_prior_sha256")
        if rep.get("responses") == responses_rel and rep.get("responses_sha256") == r_sha and result == w_sha:
            return rep
    return None
