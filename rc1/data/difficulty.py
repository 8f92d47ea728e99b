"""Difficulty metrics (SPEC §4), easy/medium/hard buckets per the seeds' table, balanced resampling
per task, and the difficulty report with every bound of the round 1 table.

Bucketing: each dimension of the seeds' table votes easy (0) / medium (1) / hard (2); the item's
score is the mean vote and the bucket is easy below EASY_BELOW, hard from HARD_FROM, medium between
(the seeds allow "majority or score"; a score has no ties).

The buckets are a claim about difficulty; `outcome_gap` tests it against what the base model does:
the success rate on easy items minus the rate on hard items, per task (the three tasks differ far more
in base success than the buckets do, and their bucket mixes differ, so a pooled gap would compare
tasks), combined over tasks with Mantel-Haenszel weights n_easy * n_hard / (n_easy + n_hard), with a
bootstrap CI that resamples items within each task x bucket cell.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter

import numpy as np

from rc1.config.names import BUCKETS, DEFAULT_DIFFICULTY_TARGET, TASKS, task_order
from rc1.data import applicability as A
from rc1.data import vocab as V
from rc1.data.pool import parse_shares
from rc1.data.text import clue_overlap, words
from rc1.data.tokens import TokenCounter, get_counter, prompt_text
from rc1.runtime.errors import ConfigError

EASY_BELOW = 0.625
HARD_FROM = 1.125
DEFAULT_TARGET = DEFAULT_DIFFICULTY_TARGET
METRIC_KEYS = ("len_tokens", "turns", "tool_hops", "entities", "ops_numeric", "connector_density",
               "coref_pronouns", "clue_overlap", "ambiguity_flags", "needs_clarification")
# the seeds' table, as (dimension, easy if <= a, hard if >= b) on the measured value
TABLE = {
    "len_tokens": "easy < 200, medium 200-600, hard > 600",
    "turns": "easy <= 2, medium 3-4, hard >= 5",
    "tool_hops": "easy 0-1, medium 2-3, hard >= 4",
    "ops_numeric": "easy 0-1, medium 2-3, hard >= 4",
    "entities": "easy <= 3, medium 4-6, hard >= 7",
    "connector_density": "easy < 3, medium 3-6, hard > 6 (per 100 words)",
    "clue_overlap": "easy > 0.40, medium 0.20-0.40, hard < 0.20",
    "needs_clarification": "easy false, medium true with turns < 4, hard true with turns >= 4",
}

_ENTITY_EN = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z][a-z]+)*")
_ENTITY_ZH = re.compile(r"[\u4e00-\u9fa5]{2,4}")
_NUMBER = re.compile(r"\b\d+(?:\.\d+)?\b")
_OPS = re.compile(r"\d\s*(?:[+\-*/×÷x%<>])\s*\d|\d\s*%")
_OP_WORDS = re.compile(r"\b(?:twice|double[sd]?|triple[sd]?|quadruple[sd]?|half|percent|each|per|times|"
                       r"older|younger|earlier|later|longer|shorter|wider|narrower|before|after|first|outlive|"
                       r"difference|more than|less than|fewer than)\b", re.I)
_STOP_CAPS = {"The", "A", "An", "If", "In", "On", "At", "How", "What", "Which", "Who", "Where", "When", "Was", "Is",
              "Does", "Did", "Could", "Would", "Then", "After", "Later", "Next", "Since", "Because", "Once",
              "Meanwhile", "Afterwards", "Soon", "Before", "Count", "Consider", "Compare", "Between", "Had", "Name",
              "Supposing", "Suppose", "Movers", "Its", "It", "They", "She", "He", "I", "Records", "Sources",
              "Historians", "Shippers", "Specimens", "Born", "Critics", "According", "Reportedly", "Located", "Yes",
              "No", "There", "This", "That", "Q", "Answer", "Question"}
_VAGUE = ("a certain", "i have in mind", "i am thinking of", "some ", "one particular", "a place i know",
          "the one i mean", "one year", "some year", "another")


def count_entities(text: str) -> int:
    ents = set()
    for m in _ENTITY_EN.finditer(text):
        toks = [t for t in m.group(0).split() if t not in _STOP_CAPS]
        if toks:
            ents.add(" ".join(toks))
    ents.update(_NUMBER.findall(text))
    ents.update(_ENTITY_ZH.findall(text))
    return len(ents)


def count_ops(question: str, supporting: list[str]) -> int:
    text = " ".join(supporting)
    return len(_OPS.findall(text)) + len(_OP_WORDS.findall(question))


def connector_density(text: str) -> float:
    w = words(text)
    if not w:
        return 0.0
    en = sum(1 for t in w if t in _CONNECTORS)
    zh = sum(text.count(c) for c in V.CONNECTORS_ZH)
    return 100.0 * (en + zh) / len(w)


_CONNECTORS = set(V.CONNECTORS_EN)
_PRONOUNS = set(V.PRONOUNS_EN)


def count_pronouns(text: str) -> int:
    return sum(1 for t in words(text) if t in _PRONOUNS) + sum(text.count(p) for p in ("其", "它", "他们", "她们"))


def ambiguity_flags(item: dict, entities_q: int, pronouns: int) -> list[str]:
    q = item.get("question", "")
    ql = q.lower()
    flags = []
    if item.get("needs_clarification") or any(v in ql for v in _VAGUE):
        flags.append("under-specified")
    if entities_q >= 3:
        flags.append("multi-entity")
    if pronouns >= 3:
        flags.append("coreference")
    if re.search(r"\b(one year|some year|another|its own year)\b", ql):
        flags.append("time-unspecified")
    return flags


def plan_of(item: dict) -> tuple[int, int]:
    """(turns, tool_hops) of the item: from a recorded transcript if any, else the reference plan."""
    meta = item.get("meta") or {}
    transcript = meta.get("transcript")
    if transcript:
        turns = sum(1 for m in transcript if m.get("role") == "assistant")
        hops = sum(1 for m in transcript if m.get("role") == "tool")
        return turns, hops
    plan = meta.get("plan")
    if plan:
        return int(plan.get("turns", 1)), int(plan.get("tool_hops", 0))
    # an item from elsewhere with no plan: one answer turn, plus one if it needs a clarification
    return 1 + int(bool(item.get("needs_clarification"))), 0


def item_metrics(item: dict, len_tokens: int) -> dict:
    q = item.get("question", "")
    sup = list(item.get("supporting") or [])
    turns, hops = plan_of(item)
    ent_q = count_entities(q)
    pron = count_pronouns(q)
    na = A.metrics_not_applicable(item)
    return {**({"not_applicable": na} if na else {}),
        "len_tokens": int(len_tokens),
        "turns": turns,
        "tool_hops": hops,
        "entities": count_entities(q + " " + " ".join(sup)),
        "ops_numeric": count_ops(q, sup),
        "connector_density": round(connector_density(q), 4),
        "coref_pronouns": pron,
        "clue_overlap": round(clue_overlap(q, sup), 4),
        "ambiguity_flags": ambiguity_flags(item, ent_q, pron),
        "needs_clarification": bool(item.get("needs_clarification")),
    }


def votes(m: dict) -> dict[str, int]:
    def lvl(v, easy_max, hard_min):  # inclusive bounds on the measured value
        return 0 if v <= easy_max else (2 if v >= hard_min else 1)
    nc = 0 if not m["needs_clarification"] else (2 if m["turns"] >= 4 else 1)
    co = m["clue_overlap"]
    cd = m["connector_density"]
    return {
        "len_tokens": 0 if m["len_tokens"] < 200 else (2 if m["len_tokens"] > 600 else 1),
        "turns": lvl(m["turns"], 2, 5),
        "tool_hops": lvl(m["tool_hops"], 1, 4),
        "ops_numeric": lvl(m["ops_numeric"], 1, 4),
        "entities": lvl(m["entities"], 3, 7),
        "connector_density": 0 if cd < 3 else (2 if cd > 6 else 1),
        "clue_overlap": 0 if co > 0.40 else (2 if co < 0.20 else 1),
        "needs_clarification": nc,
    }


def bucket_of(m: dict) -> tuple[str, float]:
    na = m.get("not_applicable") or {}
    v = {k: x for k, x in votes(m).items() if k not in na}
    score = sum(v.values()) / len(v)
    return ("easy" if score < EASY_BELOW else "hard" if score >= HARD_FROM else "medium"), round(score, 4)


def compute_metrics(items: list[dict], counter: TokenCounter | None = None,
                    lengths: list[int] | None = None) -> tuple[list[dict], str]:
    """Items with `difficulty`, `difficulty_score` and `bucket` added (new dicts; inputs untouched)."""
    counter = counter or get_counter()
    lens = lengths if lengths is not None else counter.count_batch([prompt_text(it) for it in items])
    out = []
    for it, n in zip(items, lens):
        m = item_metrics(it, n)
        b, s = bucket_of(m)
        new = dict(it)
        new["difficulty"] = m
        new["difficulty_score"] = s
        new["bucket"] = b
        declared = A.declared_bucket(it)
        if declared:  # a custom task's own difficulty; the measured bucket stays on record
            new.update(bucket=declared, bucket_source="declared", measured_bucket=b)
        out.append(new)
    return out, counter.name


def parse_target(text: str | dict) -> dict[str, float]:
    """'easy:0.25,medium:0.45,hard:0.30' -> shares; a bucket left out has share 0 ('easy:1.0' keeps easy only)."""
    t = parse_shares(text, "--target", "BUCKET:SHARE", "{val!r} is not a number")
    unknown = sorted(set(t) - set(BUCKETS))
    if unknown:
        raise ConfigError(f"--target: unknown bucket(s) {unknown}; buckets: {list(BUCKETS)}")
    t = {b: t.get(b, 0.0) for b in BUCKETS}
    if any(v < 0 for v in t.values()) or abs(sum(t.values()) - 1) > 1e-6:
        raise ConfigError(f"--target shares must be >= 0 and sum to 1 (got {sum(t.values()):.6g})")
    return t


def _bucket_quota(n: int, target: dict[str, float], avail: dict[str, int]) -> dict[str, int]:
    """The largest per-bucket counts <= n meeting the target shares (hard rounded up, easy down)."""
    while n > 0:
        want = {"hard": math.ceil(target["hard"] * n - 1e-9), "easy": math.floor(target["easy"] * n + 1e-9)}
        want["medium"] = n - want["hard"] - want["easy"]
        if all(want[b] <= avail[b] for b in BUCKETS) and want["medium"] >= 0:
            return want
        n -= 1
    return {b: 0 for b in BUCKETS}


def balance(items: list[dict], target: dict[str, float], seed: int,
            mix: dict[str, float] | None = None) -> tuple[list[dict], dict]:
    """Per task: the largest subsample (without replacement) whose bucket shares meet the target
    (hard rounded up, easy rounded down). With `mix` (task shares), each task's size is cut further so
    the balanced pool keeps the task mix too (the largest total every task can supply at its share);
    without it, tasks whose easy/hard items are scarcer lose more and the mix drifts (measured: hotpotqa
    50.2 % instead of 45 % in the 30k default pool, which the scale-up gate's mix check then refuses).
    Keeps the original order. Needs `bucket` on every item."""
    by_task: dict[str, dict[str, list[int]]] = {}
    for i, it in enumerate(items):
        if "bucket" not in it:
            raise ConfigError(f"item {it.get('id', i)} has no bucket: run `rc1 data difficulty metrics` first")
        by_task.setdefault(it["task"], {b: [] for b in BUCKETS})[it["bucket"]].append(i)
    avail = {t: {b: len(g[b]) for b in BUCKETS} for t, g in by_task.items()}
    most = {t: sum(_bucket_quota(int(math.floor(min(a[b] / target[b] for b in BUCKETS if target[b] > 0) + 1e-9)),
                                 target, a).values()) for t, a in avail.items()}
    size = dict(most)
    if mix:
        missing = sorted(set(mix) - set(by_task))
        if missing:
            raise ConfigError(f"balance: the pool has no items of task(s) {missing} named in the mix")
        total = min(most[t] / share for t, share in mix.items() if share > 0)
        size = {t: min(most[t], int(math.floor(mix.get(t, 0.0) * total + 1e-9))) for t in by_task}
    # A target that keeps nothing is an error, never an empty pool: a task whose buckets cannot meet it at all
    # (so, with a mix, the whole pool) is named with what it has.
    empty = [t for t in sorted(by_task) if most[t] == 0 and (not mix or mix.get(t, 0.0) > 0)]
    if empty:
        raise ConfigError(f"balance: the target {_shares(target)} keeps no item of task(s) {empty}: "
                          + "; ".join(_shortage(t, avail[t], target, by_task, items) for t in empty))
    keep: list[int] = []
    summary = {}
    for task in sorted(by_task):
        want = _bucket_quota(size[task], target, avail[task])
        rng = random.Random(f"balance:{seed}:{task}")
        for b in BUCKETS:
            keep.extend(sorted(rng.sample(by_task[task][b], want[b])))
        summary[task] = {"available": avail[task], "kept": want, "n": sum(want.values())}
    keep.sort()
    return [items[i] for i in keep], summary


def _shares(target: dict[str, float]) -> str:
    return ",".join(f"{b}:{target[b]:g}" for b in BUCKETS)


def _shortage(task: str, avail: dict[str, int], target: dict[str, float], by_task: dict, items: list[dict]) -> str:
    """Why a task keeps nothing, and what would keep its items."""
    have = ", ".join(f"{avail[b]} {b}" for b in BUCKETS)
    lacking = [b for b in BUCKETS if target[b] > 0 and avail[b] == 0]
    sources = {items[i].get("bucket_source", "measured") for g in by_task[task].values() for i in g}
    why = (f"task {task}: {have}, none {'/'.join(lacking)}" if lacking else f"task {task}: {have}")
    if "declared" not in sources:
        why += " (no item declares meta.difficulty: the buckets were estimated from the text)"
    present = {b: round(avail[b] / max(1, sum(avail.values())), 2) for b in BUCKETS[:-1]}
    present[BUCKETS[-1]] = round(1 - sum(present.values()), 2)
    return why + (f"; give targets the buckets can meet (e.g. --target {_shares(present)}, or "
                  "pool.difficulty_target in the run config), or label items with meta.difficulty")


def quantiles(values: list[float]) -> dict:
    if not values:
        return {"n": 0, "p10": None, "p50": None, "p90": None, "min": None, "max": None, "mean": None}
    s = sorted(values)

    def q(p):
        k = (len(s) - 1) * p
        lo, hi = math.floor(k), math.ceil(k)
        return s[lo] + (s[hi] - s[lo]) * (k - lo)
    return {"n": len(s), "p10": q(0.1), "p50": q(0.5), "p90": q(0.9), "min": s[0], "max": s[-1],
            "mean": sum(s) / len(s)}


def histogram(values: list[float], bins: int = 10) -> dict:
    if not values:
        return {"edges": [], "counts": []}
    lo, hi = min(values), max(values)
    if hi == lo:
        return {"edges": [lo, hi], "counts": [len(values)]}
    width = (hi - lo) / bins
    counts = [0] * bins
    for v in values:
        counts[min(bins - 1, int((v - lo) / width))] += 1
    return {"edges": [round(lo + i * width, 4) for i in range(bins + 1)], "counts": counts}


def numeric_view(m: dict, key: str) -> float:
    v = m[key]
    if key == "ambiguity_flags":
        return float(len(v))
    return float(v)


def difficulty_checks(balanced: list[dict], th) -> tuple[list[dict], dict]:
    """Every bound of the round 1 difficulty table on the balanced pool -> (checks as dicts, offenders)."""
    checks, offenders = [], {}

    def add(name, measured, threshold, ok, detail=""):
        checks.append({"name": name, "measured": measured, "threshold": threshold, "passed": bool(ok), "detail": detail})

    for task in task_order(it["task"] for it in balanced):
        sub = [it for it in balanced if it["task"] == task]
        c = Counter(it["bucket"] for it in sub)
        hard, easy = c["hard"] / len(sub), c["easy"] / len(sub)
        why = A.difficulty_shares(task)
        if why:
            checks += [A.na_check(f"{task}: hard share", why), A.na_check(f"{task}: easy share", why)]
            continue
        add(f"{task}: hard share", round(hard, 4), f">= {th.hard_min:g}", hard >= th.hard_min - 1e-12, f"{c['hard']}/{len(sub)}")
        add(f"{task}: easy share", round(easy, 4), f"<= {th.easy_max:g}", easy <= th.easy_max + 1e-12, f"{c['easy']}/{len(sub)}")
    if not balanced:
        add("balanced pool", 0, "> 0 items", False, "the balanced pool is empty")
    for key, limit in (("len_tokens", th.len_max), ("turns", th.turns_max), ("tool_hops", th.tool_hops_max)):
        why = A.planned(balanced) if key != "len_tokens" and balanced else None
        if why:
            checks.append(A.na_check(f"max {key}", why))
            continue
        measured = [it for it in balanced if A.metric_applies(it, key)]
        bad = [it["id"] for it in measured if it["difficulty"][key] > limit]
        worst = max((it["difficulty"][key] for it in measured), default=None)
        offenders[key] = bad[:50]
        add(f"max {key}", worst, f"<= {limit}", not bad, f"{len(bad)} item(s) over: {bad[:5]}" if bad else "")
    why = A.clue_overlap(balanced) if balanced else None
    if why:
        checks += [A.na_check(f"clue_overlap {name}", why)
                   for name in ("median (hard)", "median (easy)", "max (easy)", "min (hard)")]
        return checks, offenders
    with_clues = [it for it in balanced if A.metric_applies(it, "clue_overlap")]
    hard_co = [it["difficulty"]["clue_overlap"] for it in with_clues if it["bucket"] == "hard"]
    easy_co = [it["difficulty"]["clue_overlap"] for it in with_clues if it["bucket"] == "easy"]
    hq, eq = quantiles(hard_co), quantiles(easy_co)
    add("clue_overlap median (hard)", hq["p50"], f"<= {th.clue_overlap_hard_median_max:g}",
        hq["p50"] is not None and hq["p50"] <= th.clue_overlap_hard_median_max)
    add("clue_overlap median (easy)", eq["p50"], f">= {th.clue_overlap_easy_median_min:g}",
        eq["p50"] is not None and eq["p50"] >= th.clue_overlap_easy_median_min)
    bad_e = [it["id"] for it in with_clues if it["bucket"] == "easy" and it["difficulty"]["clue_overlap"] > th.clue_overlap_easy_max]
    bad_h = [it["id"] for it in with_clues if it["bucket"] == "hard" and it["difficulty"]["clue_overlap"] < th.clue_overlap_hard_min]
    offenders["clue_overlap_easy_max"], offenders["clue_overlap_hard_min"] = bad_e[:50], bad_h[:50]
    add("clue_overlap max (easy)", eq["max"], f"<= {th.clue_overlap_easy_max:g}", eq["max"] is not None and not bad_e,
        f"{len(bad_e)} easy item(s) above: {bad_e[:5]}" if bad_e else "")
    add("clue_overlap min (hard)", hq["min"], f">= {th.clue_overlap_hard_min:g}", hq["min"] is not None and not bad_h,
        f"{len(bad_h)} hard item(s) below: {bad_h[:5]}" if bad_h else "")
    return checks, offenders


def build_report(metrics_items: list[dict], balanced: list[dict], th, *, tokenizer: str, inputs: dict,
                 balance_summary: dict | None = None) -> dict:
    checks, offenders = difficulty_checks(balanced, th)
    dist = {}
    for label, pool in (("all", metrics_items), ("balanced", balanced)):
        dist[label] = {}
        for key in METRIC_KEYS:
            vals = [numeric_view(it["difficulty"], key) for it in pool if A.metric_applies(it, key)]
            dist[label][key] = {"quantiles": quantiles(vals), "histogram": histogram(vals)}
    tasks = task_order([*TASKS, *(it["task"] for it in metrics_items)])
    counts = {label: {t: dict(Counter(it["bucket"] for it in pool if it["task"] == t)) for t in tasks}
              for label, pool in (("all", metrics_items), ("balanced", balanced))}
    clue = {label: {b: quantiles([it["difficulty"]["clue_overlap"] for it in pool if it["bucket"] == b
                                  and A.metric_applies(it, "clue_overlap")])
                    for b in BUCKETS} for label, pool in (("all", metrics_items), ("balanced", balanced))}
    return {
        "passed": all(c["passed"] for c in checks),
        "checks": checks,
        "offenders": offenders,
        "inputs": inputs,
        "tokenizer": tokenizer,
        "bucketing": {"method": "score = mean of per-dimension votes (easy 0 / medium 1 / hard 2)",
                      "easy_below": EASY_BELOW, "hard_from": HARD_FROM, "table": TABLE},
        "n_items": len(metrics_items), "n_balanced": len(balanced),
        "bucket_counts": counts,
        "balance": balance_summary,
        "clue_overlap_by_bucket": clue,
        "distributions": dist,
        "thresholds": th.model_dump() if hasattr(th, "model_dump") else dict(th),
    }


def outcome_gap(items: list[dict], outcomes: dict[str, list[bool]], *, confidence: float = 0.95,
                resamples: int = 2000, seed: int = 0, min_successes: int = 5, gap_min_pp: float = 0.0) -> dict:
    """Base-model success on easy vs hard items (see the module docstring). `items` carry `task` and
    `bucket`; `outcomes[item id]` are the verified successes of that item's answers.

    Returns rates per task x bucket, the task-stratified gap easy - hard in percentage points with its
    CI, and `measurable`. Not measurable: fewer than `min_successes` successes among the easy and hard
    answers, or so few that even the most favourable arrangement of them (every success moved onto
    easy items, within its task) would not give a CI lower bound above `gap_min_pp`: then these
    outcomes cannot show that hard is harder, whatever the buckets are worth."""
    from scipy.stats import bootstrap

    cells: dict[tuple[str, str], list[tuple[int, int]]] = {}  # (successes, answers) per item
    for it in items:
        got = outcomes.get(str(it["id"]))
        if got and it.get("bucket") in ("easy", "hard"):
            cells.setdefault((it["task"], it["bucket"]), []).append((int(sum(got)), len(got)))
    by_task = {}
    for task in TASKS:
        row = {}
        for b in BUCKETS:
            sub = [outcomes[str(it["id"])] for it in items
                   if it["task"] == task and it.get("bucket") == b and outcomes.get(str(it["id"]))]
            succ, n_ans = sum(sum(o) for o in sub), sum(len(o) for o in sub)
            row[b] = {"items": len(sub), "answers": n_ans, "successes": int(succ), "rate": succ / n_ans if n_ans else None}
        by_task[task] = row
    tasks = [t for t in TASKS if len(cells.get((t, "easy"), [])) >= 2 and len(cells.get((t, "hard"), [])) >= 2]
    successes = sum(by_task[t][b]["successes"] for t in tasks for b in ("easy", "hard"))
    out = {"by_task": by_task, "tasks_compared": tasks, "successes_easy_hard": successes,
           "confidence": confidence, "resamples": resamples, "min_successes": min_successes,
           "method": "easy - hard success rate per task (item means), Mantel-Haenszel weights, "
                     "bootstrap over items within task x bucket"}
    if not tasks:
        return {**out, "gap_pp": None, "ci_pp": [None, None], "measurable": False,
                "why": "no task has base-model answers on at least 2 easy and 2 hard items"}
    weights = np.array([len(cells[(t, "easy")]) * len(cells[(t, "hard")]) /
                        (len(cells[(t, "easy")]) + len(cells[(t, "hard")])) for t in tasks])

    def stat(*cols, axis=-1):
        gaps = [np.mean(cols[2 * i], axis=axis) - np.mean(cols[2 * i + 1], axis=axis) for i in range(len(tasks))]
        return 100.0 * np.tensordot(weights / weights.sum(), np.array(gaps), axes=1)

    def ci(arrays) -> tuple[float, float]:
        res = bootstrap(arrays, stat, vectorized=True, n_resamples=resamples, confidence_level=confidence,
                        method="percentile", random_state=np.random.default_rng(seed))
        return float(res.confidence_interval.low), float(res.confidence_interval.high)

    arrays = [np.array([k / n for k, n in cells[(t, b)]]) for t in tasks for b in ("easy", "hard")]
    gap = float(stat(*arrays))
    if successes < min_successes:
        return {**out, "gap_pp": gap, "ci_pp": [None, None], "measurable": False,
                "why": f"only {successes} successes among the base model's answers to easy and hard items "
                       f"(at least {min_successes} needed to tell which bucket is harder)"}
    best = []
    for t in tasks:  # the most favourable arrangement: this task's successes on easy answers first
        left = sum(k for b in ("easy", "hard") for k, _ in cells[(t, b)])
        for b in ("easy", "hard"):
            rates = []
            for _, n in cells[(t, b)]:
                k = min(n, left)
                left -= k
                rates.append(k / n)
            best.append(np.array(rates))
    best_lo, _ = ci(best)
    if best_lo <= gap_min_pp:
        return {**out, "gap_pp": gap, "ci_pp": [None, None], "best_case_ci_lo_pp": best_lo, "measurable": False,
                "why": f"{successes} successes are too few to tell: even with all of them on easy items the CI's "
                       f"lower bound would be {best_lo:+.1f} pp (not above {gap_min_pp:g}); measured gap {gap:+.1f} pp"}
    lo, hi = ci(arrays)
    return {**out, "gap_pp": gap, "ci_pp": [lo, hi], "best_case_ci_lo_pp": best_lo, "measurable": True,
            "why": f"easy - hard success {gap:+.1f} pp ({confidence:.0%} CI [{lo:+.1f}, {hi:+.1f}]) over "
                   f"{', '.join(tasks)}"}
