"""Scorer probe: is the judge live, and does it tell correct answers from wrong ones? (SPEC §3, §5)

`run_probe` builds n generated items per task (hotpotqa, strategyqa, gsm8k; easy/medium/hard in turn),
and for each item three responses with known outcomes:

  gold        the supporting reasoning and the gold answer                      (correct)
  perturbed   the same reasoning and a wrong answer: another entity of the item, a slipped number,
              the other yes/no                                                  (wrong)
  other_item  the gold response to another item of the same task with another answer   (wrong)

The verifier (rc1.envs.verifiers) labels every response; a perturbation the verifier accepts is
replaced. The judge grades all of them and the probe measures:

  discrimination  AUC of grade vs verified correctness (Mann-Whitney U / n_correct n_wrong), with a
                  bootstrap CI that resamples items (an item's three responses stay together). The
                  probe passes only when the CI's lower bound reaches the gates config's
                  `scorer.auc_min`. A constant judge (every grade equal: AUC 0.5 exactly), a judge at
                  chance (CI around 0.5) and an inverted one (AUC below 0.5) fail and are named.
  agreement       share of responses where "judged correct" (grade >= AGREE_AT) equals the verifier's
                  verdict, overall and per kind (reported, not gated).

It also records what really happened: latency, billable tokens, provenance of every sample. With
`live=True` (`--live`) every sample is a real call: the cache is not read (an identical request asked
before is asked again; reference_match requests repeat across probes, e.g. reference "yes", answer
"no"), and a probe whose calls do not come back live does not pass.

`liveness` reads the score ledger: over the last `window` scores and over the most recent judge
run, the cache hit rate must be below the threshold and no score may come from a non-live source.
"""

from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass

import numpy as np

from rc1.config.names import TASKS
from rc1.config.schema import TrainConfig
from rc1.judge.cache import TRAIN_RUN_PREFIX, JudgeStore, liveness_summary
from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.errors import ConfigError, GateRefused
from rc1.runtime.fingerprint import register_artifact
from rc1.runtime.layout import JUDGE_STATS, PROBE_REPORT
from rc1.runtime.workspace import Workspace

KINDS = ("gold", "perturbed", "other_item")
AGREE_AT = 0.5  # a grade at or above this counts as "judged correct" for the agreement figure
BOOTSTRAP = 2000
_ENTITY = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")
_NUM = re.compile(r"(?<![\d.])\d+(?![\d.])")
# capitalised words that start sentences rather than name things
_NOT_ENTITIES = set("""The A An In On At Which Who What Where When How Was Is Did Does Do Had Has Could Would If Then
After Afterwards Later Next Since Because Once Meanwhile Soon Before Born Critics According Reportedly Located Records
Sources Historians Commentators Administratively Initial Answer Yes No It Its They She He His Her Their This That
These Those There Between Compare Consider Count Name Suppose Supposing Both Either Neither Today Also""".split())


@dataclass
class ProbeResponse:
    item: dict
    response: str
    kind: str        # gold | perturbed | other_item
    correct: bool    # the verifier's verdict


def reasoning_of(item: dict) -> str:
    return " ".join(item.get("supporting") or [])[:600]


def gold_response(item: dict) -> str:
    reasoning = reasoning_of(item)
    return f"{reasoning}\nANSWER: {item['answer']}" if reasoning else f"ANSWER: {item['answer']}"


def perturbed_answers(item: dict, rng: random.Random) -> list[str]:
    """Wrong answers a solver plausibly gives for this item, most plausible first (shuffled per kind)."""
    gold = str(item.get("answer", ""))
    task = item.get("task")
    if task == "strategyqa":
        return ["no" if gold.strip().lower() in ("yes", "true") else "yes"]
    if task == "gsm8k":
        seen = [n for n in dict.fromkeys(_NUM.findall(reasoning_of(item) + " " + item.get("question", ""))) if n != gold]
        rng.shuffle(seen)
        try:
            g = int(float(gold))
            offsets = [g + d for d in rng.sample([-10, -3, -2, -1, 1, 2, 5, 12], 4) if g + d >= 0]
        except ValueError:
            offsets = []
        return seen[:3] + [str(x) for x in offsets]
    text = item.get("question", "") + " " + reasoning_of(item)
    ents = [e for e in dict.fromkeys(_ENTITY.findall(text)) if e not in _NOT_ENTITIES
            and e.lower() not in gold.lower() and gold.lower() not in e.lower()]
    rng.shuffle(ents)
    return ents


def wrong_responses(item: dict, others: list[dict], rng: random.Random) -> list[tuple[str, str]]:
    """(kind, response) pairs for `item` that the verifier judges wrong: a perturbed answer with the gold
    reasoning, and another item's gold response (same task, another answer). Either may be missing."""
    from rc1.envs.answers import extract_final_answer
    from rc1.envs.verifiers import verify

    def wrong(response: str) -> bool:
        return not verify(item["task"], extract_final_answer(response), item["answer"], item.get("aliases") or ()).success

    out = []
    reasoning = reasoning_of(item)
    for ans in perturbed_answers(item, rng):
        resp = f"{reasoning}\nANSWER: {ans}" if reasoning else f"ANSWER: {ans}"
        if wrong(resp):
            out.append(("perturbed", resp))
            break
    pool = [o for o in others if o is not item and o.get("task") == item.get("task")]
    rng.shuffle(pool)
    for other in pool:
        resp = gold_response(other)
        if wrong(resp):
            out.append(("other_item", resp))
            break
    return out


def probe_items(n: int, seed: int) -> list[dict]:
    """n generated items per task (levels easy, medium, hard in turn); deterministic per seed."""
    from rc1.data import generators as G
    from rc1.data.sources import normalize

    items = []
    for task in TASKS:
        for i in range(n):
            rng = random.Random(f"probe:{seed}:{task}:{i}")
            core = normalize(task, G.generate(task, rng, G.LEVELS[i % len(G.LEVELS)])["source"])
            items.append({"id": f"probe-{seed}-{task}-{i}", "task": task, "question": core["question"],
                          "answer": core["answer"], "aliases": core["aliases"], "supporting": core["supporting"]})
    return items


def probe_set(n: int, seed: int) -> list[ProbeResponse]:
    """Every probe response (gold, perturbed, other_item per item), labelled by the verifier."""
    from rc1.envs.answers import extract_final_answer
    from rc1.envs.verifiers import verify

    items = probe_items(n, seed)
    out = []
    for it in items:
        gold = gold_response(it)
        ok = verify(it["task"], extract_final_answer(gold), it["answer"], it["aliases"]).success
        if not ok:  # the generator's own answer must verify: anything else is a bug worth stopping on
            raise RuntimeError(f"probe item {it['id']}: the gold response does not verify ({it['answer']!r})")
        out.append(ProbeResponse(it, gold, "gold", True))
        for kind, resp in wrong_responses(it, items, random.Random(f"probe-wrong:{seed}:{it['id']}")):
            out.append(ProbeResponse(it, resp, kind, False))
    return out


# ----------------------------------------------------------------------------- discrimination
def auc(grades: np.ndarray, correct: np.ndarray) -> float:
    """P(grade of a correct answer > grade of a wrong one), ties counting half (Mann-Whitney U)."""
    from scipy.stats import mannwhitneyu

    pos, neg = grades[correct], grades[~correct]
    if not len(pos) or not len(neg):
        return float("nan")
    return float(mannwhitneyu(pos, neg).statistic / (len(pos) * len(neg)))


def discrimination(grades, correct, clusters, *, auc_min: float, confidence: float = 0.95,
                   resamples: int = BOOTSTRAP, seed: int = 0, min_each: int = 2) -> dict:
    """AUC of `grades` vs `correct` with a bootstrap CI over `clusters` (e.g. item ids), and a verdict.

    Ungraded responses (None) are left out and counted. verdict: ok | weak | chance | inverted |
    constant | not measurable; `passed` = the CI's lower bound >= auc_min."""
    from scipy.stats import bootstrap

    g_all = [None if g is None else float(g) for g in grades]
    keep = np.array([g is not None for g in g_all], dtype=bool)
    g = np.array([x for x in g_all if x is not None], dtype=float)
    y = np.asarray(correct, dtype=bool)[keep]
    cl = np.asarray(clusters, dtype=object)[keep]
    out = {"auc": None, "ci": [None, None], "confidence": confidence, "auc_min": auc_min,
           "n_correct": int(y.sum()), "n_wrong": int((~y).sum()), "ungraded": int((~keep).sum()),
           "resamples": resamples, "resample_unit": "item (its responses stay together)"}
    if y.sum() < min_each or (~y).sum() < min_each:
        return {**out, "verdict": "not measurable", "passed": False,
                "why": f"only {int(y.sum())} correct and {int((~y).sum())} wrong answers got a grade "
                       f"(at least {min_each} of each needed)"}
    point = auc(g, y)
    if np.ptp(g) == 0:
        return {**out, "auc": point, "ci": [point, point], "verdict": "constant", "passed": False,
                "constant_grade": float(g[0]),
                "why": f"constant judge: every one of the {len(g)} graded answers got {g[0]:.3g}, correct or "
                       f"wrong (AUC {point:.3f})"}
    # Items are resampled, not responses: with cluster multiplicities m, AUC = m'Tm / ((m.P)(m.N)) where
    # T[a, b] sums the pairwise wins (ties 1/2) of item a's correct answers over item b's wrong ones.
    keys = list(dict.fromkeys(cl))
    member = np.array([[c == k for c in cl] for k in keys], dtype=float)  # items x responses
    wins = (g[y][:, None] > g[~y][None, :]) + 0.5 * (g[y][:, None] == g[~y][None, :])
    T = member[:, y] @ wins @ member[:, ~y].T
    P, N = member[:, y].sum(1), member[:, ~y].sum(1)

    def stat(idx, axis=-1):
        m = (np.asarray(idx)[..., None] == np.arange(len(keys))).sum(-2).astype(float)
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.einsum("...i,ij,...j->...", m, T, m) / ((m @ P) * (m @ N))

    res = bootstrap((np.arange(len(keys)),), stat, vectorized=True, n_resamples=resamples,
                    confidence_level=confidence, method="percentile", random_state=np.random.default_rng(seed))
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    level = f"{confidence:.0%} CI [{lo:.3f}, {hi:.3f}]"
    if hi < 0.5:
        verdict, why = "inverted", f"inverted judge: it grades wrong answers above correct ones (AUC {point:.3f}, {level})"
    elif lo <= 0.5:
        verdict, why = "chance", (f"the judge does not tell correct from wrong answers better than chance "
                                  f"(AUC {point:.3f}, {level} includes 0.5)")
    elif lo < auc_min:
        verdict, why = "weak", f"AUC {point:.3f}, {level}: lower bound below {auc_min:g}"
    else:
        verdict, why = "ok", f"AUC {point:.3f}, {level} >= {auc_min:g}"
    return {**out, "auc": point, "ci": [lo, hi], "verdict": verdict, "passed": verdict == "ok", "why": why}


def agreement(grades, correct, kinds) -> dict:
    """Share of graded responses where grade >= AGREE_AT equals the verifier's verdict, overall and per kind."""
    rows = [(g >= AGREE_AT, c, k) for g, c, k in zip(grades, correct, kinds) if g is not None]

    def share(sub):
        return sum(j == c for j, c, _ in sub) / len(sub) if sub else None

    return {"judged_correct_at": AGREE_AT, "n": len(rows), "overall": share(rows),
            "by_kind": {k: share([r for r in rows if r[2] == k]) for k in KINDS}}


# ----------------------------------------------------------------------------- the probe
def run_probe(ws: Workspace, cfg: TrainConfig, *, provider: str | None = None, n: int = 8, live: bool = True,
              seed: int | None = None, client_kwargs: dict | None = None, auc_min: float = 0.80,
              confidence: float = 0.95) -> dict:
    """Grade the probe set through the judge; write reports/scorer_probe.json (see the module docstring)."""
    from rc1.judge.client import JudgeClient

    if n < 1:
        raise ConfigError(f"--n must be >= 1 (got {n})")
    seed = int(seed if seed is not None else time.time_ns() % 2**31)
    t0 = time.perf_counter()
    probe = probe_set(n, seed)
    with JudgeClient(ws, cfg.scorer, cfg.reward, provider=provider, run_id=f"probe-{seed}-{time.time_ns() % 10**6}",
                     **{"use_cache": not live, **(client_kwargs or {})}) as client:
        scores = client.score_many([(p.item, p.response) for p in probe],
                                   [f"{p.item['id']}/{p.kind}" for p in probe])
        stats = client.stats()
        method, k = client.method, client.samples_per_score
    seconds = time.perf_counter() - t0
    samples = [s for sc in scores for s in sc.samples]
    live_ok = [s for s in samples if s.provenance == "live" and s.status != "error"]
    from_cache = [s for s in samples if s.provenance == "cache"]
    grades = [sc.median for sc in scores]
    correct = [p.correct for p in probe]
    disc = discrimination(grades, correct, [p.item["id"] for p in probe], auc_min=auc_min, confidence=confidence,
                          seed=seed)
    by_task = {}
    for task in TASKS:
        idx = [i for i, p in enumerate(probe) if p.item["task"] == task and grades[i] is not None]
        g, y = np.array([grades[i] for i in idx], dtype=float), np.array([correct[i] for i in idx], dtype=bool)
        by_task[task] = {"auc": auc(g, y) if len(idx) else None, "n_correct": int(y.sum()), "n_wrong": int((~y).sum()),
                         "mean_grade_correct": float(g[y].mean()) if y.any() else None,
                         "mean_grade_wrong": float(g[~y].mean()) if (~y).any() else None}
    problems = []
    if not disc["passed"]:
        problems.append(f"judge discrimination: {disc['why']} (gates scorer.auc_min {auc_min:g} on the CI's "
                        "lower bound)")
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
    errors = [(sc.item_id, s) for sc in scores for s in sc.samples if s.status == "error"]
    failed = [(sc.item_id, s) for sc in scores for s in sc.samples if s.status == "failed"]
    if errors:
        problems.append(f"{len(errors)} sample(s) failed after retries, e.g. {errors[0][0]}: {errors[0][1].error}")
    if failed:
        problems.append(f"{len(failed)} judge reply(ies) held no valid grade, e.g. {failed[0][0]}: {failed[0][1].error}")

    def mean(xs):
        return sum(xs) / len(xs) if xs else None

    report = {
        "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "provider": stats["provider"], "model": stats["model"], "base_url": stats["base_url"],
        "method": method, "run_id": stats["run_id"], "n": n, "items": len({p.item["id"] for p in probe}),
        "responses": len(probe), "seed": seed, "samples_per_item": k,
        "live_required": live, "samples": len(samples), "live_samples": len(live_ok),
        "cache_samples": len(from_cache), "failed_samples": len(failed),
        "error_samples": len(errors), "billable_tokens": billable,
        "latency_min_s": min((s.latency_s for s in live_ok if s.latency_s), default=0.0),
        "latency_p50_s": stats["latency_p50_s"], "latency_p95_s": stats["latency_p95_s"],
        "rate_429": stats["rate_429"], "cache_hit_rate": stats["cache_hit_rate"], "seconds": round(seconds, 2),
        "discrimination": disc, "by_task": by_task, "agreement": agreement(grades, correct, [p.kind for p in probe]),
        "mean_grade_correct": mean([g for g, c in zip(grades, correct) if c and g is not None]),
        "mean_grade_wrong": mean([g for g, c in zip(grades, correct) if not c and g is not None]),
        "unstable_scores": sum(sc.unstable for sc in scores),
        "scores": [{"item_id": p.item["id"], "task": p.item["task"], "kind": p.kind, "response_correct": p.correct,
                    "median": sc.median, "variance": sc.variance, "provenance": sc.provenance, "errors": sc.errors}
                   for p, sc in zip(probe, scores)],
        "passed": not problems, "problems": problems,
        "stats_path": JUDGE_STATS, "ledger": cfg.scorer.cache_path,
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
    source: str = "probe"  # training: the scores of the judge in the training loop (once training has begun)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict:
        return {"window": self.window, "last_run": self.last_run, "last_run_id": self.last_run_id,
                "problems": self.problems, "ok": self.ok, "source": self.source}


def liveness(ws: Workspace, cache_path: str, *, cache_hit_lt: float, window: int = 100) -> Liveness:
    """Is the scorer live? Reads the ledger only (never calls the judge): the training-time scores once the
    judge has graded in the training loop, the probe's (and other callers') before."""
    db = ws.path(cache_path)
    if not db.exists():
        return Liveness({}, {}, None, [f"no judge ledger at {cache_path}: the scorer has never been called"])
    with JudgeStore(db, readonly=True) as store:
        source = "training" if store.last_run_id(TRAIN_RUN_PREFIX) else "probe"
        prefix = TRAIN_RUN_PREFIX if source == "training" else None
        rows = store.recent(window, prefix)
        run_id = store.last_run_id(prefix)
        run_rows = store.run_rows(run_id) if run_id else []
    win, last = liveness_summary(rows), liveness_summary(run_rows)
    problems = []
    if not rows:
        problems.append("the judge ledger holds no scores")
    scope = "training-time " if source == "training" else ""
    for label, s in ((f"last {window} {scope}scores", win), (f"last {scope}judge run {run_id}", last)):
        if s.get("non_live"):
            problems.append(f"{label}: {s['non_live']} score(s) from a non-live source {s['non_live_sources']}")
        rate = s.get("cache_hit_rate")
        if rate is not None and rate >= cache_hit_lt:
            problems.append(f"{label}: cache hit rate {rate:.3f} is not below {cache_hit_lt:g}")
        if s.get("answered") == 0 and s.get("scores"):
            problems.append(f"{label}: no judge call was answered")
    if rows and win["billable_tokens"] < 1:
        problems.append(f"last {window} {scope}scores: no billable usage (no live call reported tokens)")
    return Liveness(win, last, run_id, problems, source)


def assert_live(ws: Workspace, cache_path: str, *, cache_hit_lt: float, window: int = 100) -> Liveness:
    result = liveness(ws, cache_path, cache_hit_lt=cache_hit_lt, window=window)
    if not result.ok:
        raise GateRefused("scorer is not live: " + result.problems[0], lines=result.problems[1:])
    return result
