"""Evaluation metrics with 95 % confidence intervals, from per-item episode records.

One record per (item, model): did the episode succeed, did it ask for clarification, how many
turns and tool hops. Proportions get Wilson intervals; differences between the base model and
a checkpoint on the SAME items get a paired bootstrap interval (resampling items, seeded, so a
report is reproducible), with Newcombe's hybrid score interval beside it for proportions.

Definitions (SPEC §7, seeds 003/004):
  success                    verifier success of the final answer (rc1.envs.verifiers.verify)
  over-clarification rate    items NOT needing clarification where the model asked >= once,
                             / items not needing clarification
  clarification precision    asked AND needed / asked          (per task and overall)
  clarification recall       asked AND needed / needed
  hard success (hq+sq)       success on bucket == hard items of hotpotqa and strategyqa together
  success, non-truncated     success among the episodes that were not truncated (a truncated
                             episode always fails: this separates "wrong" from "cut off")
  majority-class baseline    per task, the score of giving every evaluated item the most common gold
                             answer of the task's TRAINING items (`majority_baseline(items, train)`);
                             a closed answer set (yes/no, option letters, a few fixed labels) makes it
                             the majority class; for an open answer (numbers, free text) it is only
                             the commonest training answer, and its rate on the evaluated items is
                             reported as such. Without training items it falls back to the evaluated
                             items' own labels (an upper bound on what a constant answer scores)
  pooled over seeds          several trained runs (one per seed) against one base pass: the mean of the
                             seeds' deltas, with a two-level bootstrap CI (resample seeds, then items
                             within each resampled seed; `pooled_bootstrap`, `pooled_compare`). With one
                             seed it is the paired bootstrap itself
  minimum detectable effect  the smallest success increase a paired test detects at this n (`mde_paired`)
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Sequence

from rc1.config.names import BUCKETS, TASKS, task_order

Z95 = 1.959963984540054  # scipy.stats.norm.ppf(0.975); a test checks it against scipy
BOOTSTRAP_B = 2000
BOOTSTRAP_SEED = 20250820
HARD_TASKS = ("hotpotqa", "strategyqa")


@dataclass(frozen=True)
class EpisodeRecord:
    """What eval keeps of one episode: enough to recompute every metric and to pair base vs trained."""

    item_id: str
    task: str
    bucket: str | None
    needs_clarification: bool
    success: bool
    score: float
    clarifications: int
    turns: int
    tool_hops: int
    truncated: bool
    final_answer: str | None = None

    @property
    def asked(self) -> bool:
        return self.clarifications > 0

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "EpisodeRecord":
        return cls(**{k: d.get(k) for k in cls.__dataclass_fields__})

    @classmethod
    def of(cls, item: dict, episode: Any) -> "EpisodeRecord":
        from rc1.envs.verifiers import verify_episode

        verdict = verify_episode(item, episode)
        return cls(item_id=str(item["id"]), task=item["task"], bucket=item.get("bucket"),
                   needs_clarification=bool(item.get("needs_clarification")), success=bool(verdict.success),
                   score=float(verdict.score), clarifications=int(episode.clarifications or 0),
                   turns=int(episode.turns or 0), tool_hops=int(episode.tool_hops or 0),
                   truncated=bool(episode.truncated), final_answer=episode.final_answer)


# ----------------------------------------------------------------------------- intervals
def wilson(k: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """Wilson score interval for k successes out of n (None when n == 0)."""
    if n <= 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def newcombe_diff(k1: int, n1: int, k2: int, n2: int, z: float = Z95) -> tuple[float, float] | None:
    """Newcombe's hybrid score interval for p2 - p1 (independent samples; conservative for paired)."""
    a, b = wilson(k1, n1, z), wilson(k2, n2, z)
    if a is None or b is None:
        return None
    p1, p2 = k1 / n1, k2 / n2
    d = p2 - p1
    lo = d - math.sqrt((p2 - b[0]) ** 2 + (a[1] - p1) ** 2)
    hi = d + math.sqrt((b[1] - p2) ** 2 + (p1 - a[0]) ** 2)
    return max(-1.0, lo), min(1.0, hi)


def mean_ci(xs: Sequence[float], z: float = Z95) -> tuple[float | None, tuple[float, float] | None]:
    """Mean with a normal-approximation 95 % CI (t-quantile for small n)."""
    n = len(xs)
    if n == 0:
        return None, None
    m = sum(xs) / n
    if n == 1:
        return m, (m, m)
    from scipy import stats

    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    q = float(stats.t.ppf(0.975, n - 1)) if n < 30 else z
    half = q * math.sqrt(var / n)
    return m, (m - half, m + half)


def paired_bootstrap(base: Sequence[float], trained: Sequence[float],
                     stat: Callable[[Any, Any], float] | None = None, *, b: int = BOOTSTRAP_B,
                     seed: int = BOOTSTRAP_SEED) -> tuple[float, float] | None:
    """95 % percentile interval of stat(trained_sample, base_sample) over item resamples.

    `base[i]` and `trained[i]` belong to the same item; default stat is the difference of means.
    Resamples where the statistic is undefined (NaN) are dropped.
    """
    import numpy as np

    n = len(base)
    if n == 0 or n != len(trained):
        return None
    x, y = np.asarray(base, dtype=float), np.asarray(trained, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(b, n))
    if stat is None:
        vals = y[idx].mean(axis=1) - x[idx].mean(axis=1)
    else:
        vals = np.array([stat(y[i], x[i]) for i in idx], dtype=float)
    vals = vals[~np.isnan(vals)]
    if vals.size == 0:
        return None
    return float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))


def _rel_from_means(trained_mean, base_mean):
    """(base - trained) / base of pooled means, NaN where the base rate is 0 (vectorised)."""
    import numpy as np

    t, b = np.asarray(trained_mean, dtype=float), np.asarray(base_mean, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(b == 0, np.nan, (b - t) / np.where(b == 0, 1.0, b))


def pooled_bootstrap(per_seed: Sequence[tuple[Sequence[float], Sequence[float]]],
                     stat: Callable[[Any, Any], Any] | None = None, *, b: int = BOOTSTRAP_B,
                     seed: int = BOOTSTRAP_SEED) -> tuple[float, float] | None:
    """95 % percentile interval of a statistic pooled over seeds, by a two-level bootstrap.

    `per_seed[s]` = (base values, trained values) of seed s, paired by item. Each replicate draws S seeds
    with replacement, then, for every drawn seed, its items with replacement (base and trained together);
    the replicate's pooled base and trained means are the averages of the drawn seeds' means, and the
    statistic is stat(pooled trained mean, pooled base mean) (vectorised; default: their difference).
    With one seed this is `paired_bootstrap` itself (same draws, same interval). NaN replicates are dropped.
    """
    import numpy as np

    if not per_seed or any(len(x) == 0 or len(x) != len(y) for x, y in per_seed):
        return None
    if len(per_seed) == 1:
        x, y = per_seed[0]
        one = None if stat is None else (lambda ys, xs: float(stat(ys.mean(), xs.mean())))
        return paired_bootstrap(x, y, one, b=b, seed=seed)
    n_seeds = len(per_seed)
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, n_seeds, size=(b, n_seeds))
    bm, tm = np.empty((b, n_seeds)), np.empty((b, n_seeds))
    for s, (x, y) in enumerate(per_seed):
        slots = pick == s
        if not slots.any():
            continue
        xa, ya = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        idx = rng.integers(0, len(xa), size=(int(slots.sum()), len(xa)))
        bm[slots], tm[slots] = xa[idx].mean(axis=1), ya[idx].mean(axis=1)
    pb, pt = bm.mean(axis=1), tm.mean(axis=1)
    vals = pt - pb if stat is None else np.asarray(stat(pt, pb), dtype=float)
    vals = vals[~np.isnan(vals)]
    if vals.size == 0:
        return None
    return float(np.percentile(vals, 2.5)), float(np.percentile(vals, 97.5))


# ----------------------------------------------------------------------------- summaries
def proportion(k: int, n: int) -> dict:
    ci = wilson(k, n)
    return {"k": k, "n": n, "rate": (k / n) if n else None, "ci95": list(ci) if ci else None}


def _success(records: Iterable[EpisodeRecord]) -> dict:
    rs = list(records)
    return proportion(sum(r.success for r in rs), len(rs))


def hard_records(records: Iterable[EpisodeRecord]) -> list[EpisodeRecord]:
    return [r for r in records if r.bucket == "hard" and r.task in HARD_TASKS]


def clarification_pr(records: Sequence[EpisodeRecord]) -> dict:
    asked = [r for r in records if r.asked]
    needed = [r for r in records if r.needs_clarification]
    tp = sum(r.needs_clarification for r in asked)
    return {"asked": len(asked), "needed": len(needed), "asked_and_needed": tp,
            "precision": proportion(tp, len(asked)), "recall": proportion(tp, len(needed))}


def _behaviour(rs: Sequence[EpisodeRecord]) -> dict:
    not_needed = [r for r in rs if not r.needs_clarification]
    mean, ci = mean_ci([r.turns for r in rs])
    return {"overclar": proportion(sum(r.asked for r in not_needed), len(not_needed)),
            "avg_turns": {"mean": mean, "ci95": list(ci) if ci else None}}


def flat_split(summary: dict, delta: dict | None) -> dict:
    """The seeds' flat names: success_<bucket>, delta_pp_<bucket>, overclar_rate_<bucket>, avg_turns_<bucket>."""
    out = {}
    for b in BUCKETS:
        if b not in summary["by_bucket"]:
            continue
        out[f"success_{b}"] = summary["by_bucket"][b]["rate"]
        out[f"overclar_rate_{b}"] = summary["by_bucket_behaviour"][b]["overclar"]["rate"]
        out[f"avg_turns_{b}"] = summary["by_bucket_behaviour"][b]["avg_turns"]["mean"]
        if delta and b in delta["by_bucket"]:
            out[f"delta_pp_{b}"] = delta["by_bucket"][b]["delta_pp"]
    return out


def summarize(records: Sequence[EpisodeRecord]) -> dict:
    """Every metric of one model on one item set."""
    rs = list(records)
    not_needed = [r for r in rs if not r.needs_clarification]
    needed = [r for r in rs if r.needs_clarification]
    turns_mean, turns_ci = mean_ci([r.turns for r in rs])
    hops_mean, hops_ci = mean_ci([r.tool_hops for r in rs])
    return {
        "n": len(rs),
        "success": _success(rs),
        "by_task": {t: _success(r for r in rs if r.task == t) for t in task_order(r.task for r in rs)},
        "by_bucket": {b: _success(r for r in rs if r.bucket == b) for b in BUCKETS if any(r.bucket == b for r in rs)},
        "hard_hq_sq": _success(hard_records(rs)),
        "needs_clar_success": _success(needed),
        "overclar": proportion(sum(r.asked for r in not_needed), len(not_needed)),
        "avg_turns": {"mean": turns_mean, "ci95": list(turns_ci) if turns_ci else None},
        "avg_tool_hops": {"mean": hops_mean, "ci95": list(hops_ci) if hops_ci else None},
        "truncated": proportion(sum(r.truncated for r in rs), len(rs)),
        "non_truncated": {"success": _success(r for r in rs if not r.truncated),
                          "by_task": {t: _success(r for r in rs if r.task == t and not r.truncated)
                                      for t in task_order(r.task for r in rs)},
                          "truncated_by_task": {t: proportion(sum(r.truncated for r in rs if r.task == t),
                                                              sum(r.task == t for r in rs))
                                                for t in task_order(r.task for r in rs)}},
        # seed 003 §4.3: the difficulty split also covers over-clarification and turns
        "by_bucket_behaviour": {b: _behaviour([r for r in rs if r.bucket == b]) for b in BUCKETS
                                if any(r.bucket == b for r in rs)},
        "clarification": {"all": clarification_pr(rs),
                          **{t: clarification_pr([r for r in rs if r.task == t]) for t in task_order(r.task for r in rs)}},
    }


def _paired(base: Sequence[EpisodeRecord], trained: Sequence[EpisodeRecord]) -> tuple[list, list]:
    """Records of both models on the items both have, in the same order."""
    t_by_id = {r.item_id: r for r in trained}
    b = [r for r in base if r.item_id in t_by_id]
    return b, [t_by_id[r.item_id] for r in b]


def _delta_prop(base: list[EpisodeRecord], trained: list[EpisodeRecord], pick: Callable[[EpisodeRecord], bool],
                value: Callable[[EpisodeRecord], bool]) -> dict:
    pairs = [(bb, tt) for bb, tt in zip(base, trained) if pick(bb)]
    n = len(pairs)
    if n == 0:
        return {"n": 0, "base": None, "trained": None, "delta_pp": None, "ci95_pp": None, "newcombe95_pp": None}
    xb = [float(value(bb)) for bb, _ in pairs]
    xt = [float(value(tt)) for _, tt in pairs]
    kb, kt = int(sum(xb)), int(sum(xt))
    ci = paired_bootstrap(xb, xt)
    nc = newcombe_diff(kb, n, kt, n)
    return {"n": n, "base": kb / n, "trained": kt / n, "delta_pp": 100.0 * (kt - kb) / n,
            "ci95_pp": [100 * ci[0], 100 * ci[1]] if ci else None,
            "newcombe95_pp": [100 * nc[0], 100 * nc[1]] if nc else None}


def _rel_reduction(trained_sample, base_sample) -> float:
    b = float(base_sample.mean())
    return float("nan") if b == 0 else (b - float(trained_sample.mean())) / b


def compare(base: Sequence[EpisodeRecord], trained: Sequence[EpisodeRecord]) -> dict:
    """Trained vs base on the same items: deltas in pp with paired-bootstrap 95 % CIs."""
    b, t = _paired(base, trained)
    succ = lambda r: r.success  # noqa: E731
    out: dict[str, Any] = {
        "n_paired": len(b),
        "success": _delta_prop(b, t, lambda r: True, succ),
        "by_task": {task: _delta_prop(b, t, lambda r, task=task: r.task == task, succ)
                    for task in task_order(r.task for r in b)},
        "by_bucket": {bk: _delta_prop(b, t, lambda r, bk=bk: r.bucket == bk, succ)
                      for bk in BUCKETS if any(r.bucket == bk for r in b)},
        "hard_hq_sq": _delta_prop(b, t, lambda r: r.bucket == "hard" and r.task in HARD_TASKS, succ),
        "needs_clar_success": _delta_prop(b, t, lambda r: r.needs_clarification, succ),
    }
    oc = _delta_prop(b, t, lambda r: not r.needs_clarification, lambda r: r.asked)
    xb = [float(bb.asked) for bb, _ in zip(b, t) if not bb.needs_clarification]
    xt = [float(tt.asked) for bb, tt in zip(b, t) if not bb.needs_clarification]
    rel = None
    if oc["n"] and oc["base"]:
        rel = (oc["base"] - oc["trained"]) / oc["base"]
    rel_ci = paired_bootstrap(xb, xt, _rel_reduction) if rel is not None else None
    out["overclar"] = {**oc, "rel_reduction": rel, "rel_reduction_ci95": list(rel_ci) if rel_ci else None}
    tb, tt_ = [float(r.turns) for r in b], [float(r.turns) for r in t]
    ci = paired_bootstrap(tb, tt_)
    out["avg_turns"] = {"base": sum(tb) / len(tb) if tb else None, "trained": sum(tt_) / len(tt_) if tt_ else None,
                        "delta": (sum(tt_) - sum(tb)) / len(tb) if tb else None, "ci95": list(ci) if ci else None}
    hb, ht = [float(r.tool_hops) for r in b], [float(r.tool_hops) for r in t]
    ci = paired_bootstrap(hb, ht)
    out["avg_tool_hops"] = {"base": sum(hb) / len(hb) if hb else None, "trained": sum(ht) / len(ht) if ht else None,
                            "delta": (sum(ht) - sum(hb)) / len(hb) if hb else None, "ci95": list(ci) if ci else None}
    return out


def _pooled_prop(pairs: Sequence[tuple[list, list]], pick: Callable[[EpisodeRecord], bool],
                 value: Callable[[EpisodeRecord], Any]) -> tuple[dict, list]:
    """(pooled delta of value's mean over the seeds' paired items that `pick` keeps, the per-seed values)."""
    per = []
    for b, t in pairs:
        kept = [(bb, tt) for bb, tt in zip(b, t) if pick(bb)]
        per.append(([float(value(bb)) for bb, _ in kept], [float(value(tt)) for _, tt in kept]))
    if not per or any(not xb for xb, _ in per):
        return {"n": 0, "seeds": len(per), "base": None, "trained": None, "delta_pp": None, "ci95_pp": None,
                "per_seed_delta_pp": []}, per
    base = sum(sum(xb) / len(xb) for xb, _ in per) / len(per)
    trained = sum(sum(xt) / len(xt) for _, xt in per) / len(per)
    per_seed = [100.0 * (sum(xt) - sum(xb)) / len(xb) for xb, xt in per]
    ci = pooled_bootstrap(per)
    return {"n": len(per[0][0]), "seeds": len(per), "base": base, "trained": trained,
            "delta_pp": sum(per_seed) / len(per_seed), "ci95_pp": [100 * ci[0], 100 * ci[1]] if ci else None,
            "per_seed_delta_pp": per_seed}, per


def pooled_compare(base: Sequence[EpisodeRecord], trained_runs: Sequence[Sequence[EpisodeRecord]],
                   baseline_success: dict[str, bool] | None = None) -> dict:
    """Every seed's run vs the one base pass on the same items, pooled over seeds (`pooled_bootstrap`):
    the mean delta with its two-level 95 % CI, for what the RC1 gate judges. `baseline_success` (item id ->
    success of the majority-class baseline) adds the pooled margin of the trained runs over it."""
    pairs = [_paired(base, t) for t in trained_runs]
    succ = lambda r: r.success  # noqa: E731
    tasks = task_order(r.task for r in (pairs[0][0] if pairs else []))
    out: dict[str, Any] = {
        "seeds": len(pairs), "n_paired": len(pairs[0][0]) if pairs else 0,
        "success": _pooled_prop(pairs, lambda r: True, succ)[0],
        "by_task": {task: _pooled_prop(pairs, lambda r, task=task: r.task == task, succ)[0] for task in tasks},
        "hard_hq_sq": _pooled_prop(pairs, lambda r: r.bucket == "hard" and r.task in HARD_TASKS, succ)[0],
        "needs_clar_success": _pooled_prop(pairs, lambda r: r.needs_clarification, succ)[0],
    }
    oc, per = _pooled_prop(pairs, lambda r: not r.needs_clarification, lambda r: r.asked)
    rel = (oc["base"] - oc["trained"]) / oc["base"] if oc["n"] and oc["base"] else None
    rel_ci = pooled_bootstrap(per, _rel_from_means) if rel is not None else None
    out["overclar"] = {**oc, "rel_reduction": rel, "rel_reduction_ci95": list(rel_ci) if rel_ci else None}
    turns, per = _pooled_prop(pairs, lambda r: True, lambda r: r.turns)
    seen = {v for xb, xt in per for v in (*xb, *xt)}
    ci = pooled_bootstrap(per) if turns["n"] else None
    out["avg_turns"] = {"n": turns["n"], "base": turns["base"], "trained": turns["trained"],
                        "delta": None if turns["base"] is None else turns["trained"] - turns["base"],
                        "ci95": list(ci) if ci else None,
                        # every episode of every model took this many turns: turns cannot show a difference
                        "constant": next(iter(seen)) if len(seen) == 1 else None}
    if baseline_success is not None:
        from dataclasses import replace

        vs = []
        for b, t in pairs:
            rs = [r for r in t if r.item_id in baseline_success]
            vs.append(([replace(r, success=bool(baseline_success[r.item_id])) for r in rs], rs))
        out["vs_majority"] = {"success": _pooled_prop(vs, lambda r: True, succ)[0],
                              "by_task": {task: _pooled_prop(vs, lambda r, task=task: r.task == task, succ)[0]
                                          for task in tasks}}
    return out


# ----------------------------------------------------------------------------- baselines and power
def _gold_text(item: dict) -> str:
    gold = item["answer"]
    return ("yes" if gold else "no") if isinstance(gold, bool) else str(gold)


CLOSED_VERIFIERS = ("yes_no", "choice")
FIXED_LABELS_MAX = 10  # an `exact` task whose training answers take at most this many values has a fixed label set


def answer_set(task_items: Sequence[dict], train_items: Sequence[dict] = ()) -> str:
    """'closed' when a task's answers come from a fixed set (yes/no, option letters, a few exact labels),
    else 'open' (numbers, free text): only a closed set has a majority class worth beating."""
    from rc1.envs.verifiers import verifier_of

    spec = verifier_of(task_items[0])
    if spec in CLOSED_VERIFIERS:
        return "closed"
    labels = {_gold_text(it).strip().lower() for it in (train_items or task_items)}
    return "closed" if spec == "exact" and len(labels) <= FIXED_LABELS_MAX else "open"


def majority_baseline(items: Sequence[dict], train_items: Sequence[dict] | None = None, *,
                      train_source: str | None = None) -> dict:
    """Per task, the score of answering every item of `items` with one constant answer.

    With `train_items` (the training split) the answer is the task's most common TRAINING gold answer
    (counted on the gold text, case folded; ties: the first in sorted order) and `items` only score it, so
    the baseline never peeks at the evaluated labels. Without training items of a task it is the gold answer
    that, given to every evaluated item, the items' own verifier accepts most often ("12" and "12.0", or an
    alias, count as one), computed on these items' own labels. Each task says whether its answers are a
    closed set (`answer_set`): only there is it a majority class; for an open answer it is the commonest
    training answer and its rate on these items."""
    from collections import Counter
    from types import SimpleNamespace

    from rc1.envs.verifiers import verify_episode

    per_item: dict[str, bool] = {}
    by_task: dict[str, dict] = {}
    for task in task_order(it["task"] for it in items):
        its = [it for it in items if it["task"] == task]
        train = [t for t in (train_items or ()) if t.get("task") == task and "answer" in t]
        kind = answer_set(its, train)
        if train:
            counts = Counter(_gold_text(t).strip().lower() for t in train)
            top = max(counts.values())
            answer = sorted(a for a, c in counts.items() if c == top)[0]
            said = SimpleNamespace(truncated=False, final_answer=answer)
            hits = [verify_episode(it, said).success for it in its]
            source = {"source": "training", "train_n": len(train), "train_rate": top / len(train)}
        else:
            best: tuple[int, str, list[bool]] | None = None
            for cand in sorted({_gold_text(it) for it in its}):
                said = SimpleNamespace(truncated=False, final_answer=cand)
                h = [verify_episode(it, said).success for it in its]
                if best is None or sum(h) > best[0]:
                    best = (sum(h), cand, h)
            assert best is not None
            _, answer, hits = best
            source = {"source": "evaluated items", "train_n": 0, "train_rate": None}
        per_item.update({str(it["id"]): h for it, h in zip(its, hits)})
        by_task[task] = {"answer": answer, "answer_set": kind, **source, **proportion(sum(hits), len(its))}
    trained_on = train_source or "the training split"
    return {"by_task": by_task, "overall": proportion(sum(per_item.values()), len(per_item)), "items": per_item,
            "train_source": train_source if train_items else None,
            "definition": (f"each task's most common gold answer in {trained_on} given to every evaluated item of "
                           "that task (a majority class for a closed answer set; for an open answer, the "
                           "commonest training answer)" if train_items else
                           "each task's most common gold answer given to every item of that task, computed on "
                           "the evaluated items themselves")}


def versus_baseline(records: Sequence[EpisodeRecord], baseline_success: dict[str, bool]) -> dict:
    """A model vs a fixed-answer baseline on the same items: paired success deltas (pp) with bootstrap CIs."""
    from dataclasses import replace

    rs = [r for r in records if r.item_id in baseline_success]
    base = [replace(r, success=bool(baseline_success[r.item_id])) for r in rs]
    succ = lambda r: r.success  # noqa: E731
    return {"n": len(rs), "success": _delta_prop(base, rs, lambda r: True, succ),
            "by_task": {t: _delta_prop(base, rs, lambda r, t=t: r.task == t, succ)
                        for t in task_order(r.task for r in rs)}}


MDE_ALPHA, MDE_POWER = 0.05, 0.80
MDE_ASSUMPTION = (
    "smallest success increase d over the base rate p0 that a two-sided paired test (McNemar, alpha 0.05) detects "
    "with 80 % power at this n; Connor (1987): n = (z_0.975 sqrt(psi) + z_0.80 sqrt(psi - d^2))^2 / d^2 with the "
    "discordant-pair rate psi = p0 (1 - p1) + p1 (1 - p0), p1 = p0 + d, i.e. the two models' successes independent "
    "given the item; models that agree on most items have a smaller psi, so this MDE is conservative")


def mde_paired(n: int, p0: float | None, alpha: float = MDE_ALPHA, power: float = MDE_POWER) -> float | None:
    """Minimum detectable increase of a success rate from `p0` with `n` paired items (see MDE_ASSUMPTION).

    None when n == 0 or p0 is unknown; 1 - p0 (as large as it can be) is returned as None too when even
    that increase is not detectable at this n."""
    if n <= 0 or p0 is None:
        return None
    from scipy.optimize import brentq
    from scipy.stats import norm

    za, zb = float(norm.ppf(1 - alpha / 2)), float(norm.ppf(power))

    def n_needed(d: float) -> float:
        p1 = p0 + d
        psi = p0 * (1 - p1) + p1 * (1 - p0)
        return (za * math.sqrt(psi) + zb * math.sqrt(max(psi - d * d, 0.0))) ** 2 / (d * d)

    top = 1.0 - p0
    if top <= 1e-12 or n_needed(top) > n:
        return None
    return float(brentq(lambda d: n_needed(d) - n, 1e-9, top, xtol=1e-10))


def mde_table(records: Sequence[EpisodeRecord]) -> dict:
    """MDE of a paired success comparison overall and per task, at the base records' own rates."""
    def one(rs: list[EpisodeRecord]) -> dict:
        p0 = (sum(r.success for r in rs) / len(rs)) if rs else None
        return {"n": len(rs), "base_rate": p0, "mde": mde_paired(len(rs), p0)}

    rs = list(records)
    return {"overall": one(rs), "by_task": {t: one([r for r in rs if r.task == t]) for t in task_order(r.task for r in rs)},
            "alpha": MDE_ALPHA, "power": MDE_POWER, "assumption": MDE_ASSUMPTION}


def spread(values: Sequence[float | None]) -> dict:
    """min / mean / max / sample sd of one quantity across seeds (None values left out)."""
    xs = [float(v) for v in values if v is not None]
    if not xs:
        return {"n": 0, "min": None, "mean": None, "max": None, "sd": None}
    m = sum(xs) / len(xs)
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) if len(xs) > 1 else None
    return {"n": len(xs), "min": min(xs), "mean": m, "max": max(xs), "sd": sd}


# metric name (cfg.eval.metric) -> value in a summary; higher is better except where noted
METRICS: dict[str, Callable[[dict], float | None]] = {
    "success": lambda s: s["success"]["rate"],
    "needs_clar_success": lambda s: s["needs_clar_success"]["rate"],
    "hard_success": lambda s: s["hard_hq_sq"]["rate"],
    "neg_overclar": lambda s: None if s["overclar"]["rate"] is None else -s["overclar"]["rate"],
}
METRIC_ALIASES = {"eval/success": "success", "overall_success": "success", "hard_hq_sq": "hard_success"}


def metric_value(name: str, summary: dict) -> float | None:
    key = METRIC_ALIASES.get(name, name)
    if key.startswith("success_") and key[len("success_"):] in TASKS + BUCKETS:
        sub = key[len("success_"):]
        part = summary["by_task" if sub in TASKS else "by_bucket"].get(sub)
        return part["rate"] if part else None
    if key not in METRICS:
        from rc1.runtime.errors import ConfigError

        known = sorted(METRICS) + [f"success_{x}" for x in TASKS + BUCKETS]
        raise ConfigError(f"eval.metric {name!r}: unknown metric; known: {', '.join(known)}")
    return METRICS[key](summary)
