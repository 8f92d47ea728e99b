"""Pool validation: diversity, duplicates, length bounds, task mix and leaks against the shadow set.

Near-duplicate and leak detection use datasketch's MinHashLSH (64 permutations, word 5-gram shingles
of the question) to find candidates, then verify each candidate pair with the exact Jaccard of the
shingle sets, so nothing is flagged (or cleared) on a sketch alone. MinHash signatures are computed
for all items at once with numpy using datasketch's own permutation parameters and update rule, so
they equal `datasketch.MinHash(num_perm=64, seed=1, hashfunc=xxh64&0xffffffff)` signatures.

Lexical diversity (distinct-n, TTR) is measured per window of `pool.distinct2_window` items (a seeded
shuffle of up to `pool.diversity_sample` items) and averaged: corpus-level distinct-n falls with corpus
size (Heaps' law), so a fixed threshold only means something at a fixed window size. The window is in
the gates config and in the check's threshold text; the whole-pool distinct-2 is reported beside it.

3-gram KL vs the previous (v1) pool is judged against a split-half baseline: two disjoint halves A, B
of `pool.kl_sample` items of this pool already differ by KL(A || B) (sampling noise alone, 0.82 nats
on the 30k default pool), so the check measures KL(A || V) - KL(A || B) with V a v1 sample of the
same size: how much further v1 is than another sample of the same pool.
"""

from __future__ import annotations

import math
import random
import re
from collections import Counter
from typing import Iterable

import numpy as np

from rc1.config.names import TASKS, task_order
from rc1.data import applicability as A
from rc1.data.text import words
from rc1.data.tokens import TokenCounter, get_counter, prompt_text

NUM_PERM = 64
SHINGLE = 5
KL_ALPHA = 0.5
LEAK_LSH_THRESHOLD = 0.5  # candidate threshold, well below leak_sim_max so real leaks are not missed
_NORM = re.compile(r"\s+")

try:
    import xxhash

    def _h64(s: str) -> int:
        return xxhash.xxh64_intdigest(s.encode())
except ImportError:  # pragma: no cover - xxhash comes with datasets
    import hashlib

    def _h64(s: str) -> int:
        return int.from_bytes(hashlib.blake2b(s.encode(), digest_size=8).digest(), "little")


def user_text(item: dict) -> str:
    """The per-item text a reader sees (user turns: template wrapper + question + passages)."""
    return "\n".join(m.get("content", "") for m in item.get("messages") or [] if m.get("role") == "user") \
        or item.get("question", "")


def shingles(text: str, n: int = SHINGLE) -> np.ndarray:
    w = words(text)
    grams = [" ".join(w[i:i + n]) for i in range(len(w) - n + 1)] or ([" ".join(w)] if w else [])
    return np.unique(np.fromiter((_h64(g) for g in grams), dtype=np.uint64, count=len(grams)))


class Signatures:
    """MinHash signatures of many shingle sets, computed in chunks with numpy."""

    def __init__(self, num_perm: int = NUM_PERM, seed: int = 1):
        from datasketch import MinHash

        proto = MinHash(num_perm=num_perm, seed=seed, scheme="legacy")
        self.a, self.b = proto.permutations  # datasketch's own parameters
        self.num_perm, self.seed = num_perm, seed

    def compute(self, sets: list[np.ndarray], chunk: int = 4000) -> np.ndarray:
        prime = np.uint64((1 << 61) - 1)
        mask = np.uint64((1 << 32) - 1)
        out = np.empty((len(sets), self.num_perm), dtype=np.uint64)
        for start in range(0, len(sets), chunk):
            part = sets[start:start + chunk]
            lens = np.array([max(len(s), 1) for s in part])
            flat = np.concatenate([s if len(s) else np.zeros(1, np.uint64) for s in part]) & mask
            with np.errstate(over="ignore"):
                phv = ((flat[:, None] * self.a[None, :] + self.b[None, :]) % prime) & mask
            offsets = np.concatenate([[0], np.cumsum(lens)[:-1]])
            out[start:start + len(part)] = np.minimum.reduceat(phv, offsets, axis=0)
        return out

    def lean(self, hashvalues: np.ndarray):
        from datasketch import LeanMinHash
        return LeanMinHash(seed=self.seed, hashvalues=hashvalues, scheme="legacy")


def exact_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    if not len(a) and not len(b):
        return 0.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)


def _norm(s: str) -> str:
    return _NORM.sub(" ", s.strip().lower())


def exact_key(it: dict) -> tuple:
    """What makes two items exact duplicates: the same task, question and answer (case and spacing ignored)."""
    return (it.get("task"), _norm(it.get("question", "")), _norm(str(it.get("answer", ""))))


# ----------------------------------------------------------------------------- checks
def find_duplicates(items: list[dict], sets: list[np.ndarray], sigs: np.ndarray, sg: Signatures,
                    threshold: float) -> list[dict]:
    """Each item that repeats an earlier one: exact (same task, question and answer) or near
    (question 5-gram Jaccard >= threshold, verified exactly)."""
    from datasketch import MinHashLSH

    dups = []
    seen: dict[tuple, str] = {}
    # candidates at a lower LSH threshold (few false negatives), then the exact Jaccard decides
    lsh = MinHashLSH(threshold=max(0.5, threshold - 0.2), num_perm=sg.num_perm)
    for i, it in enumerate(items):
        key = exact_key(it)
        if key in seen:
            dups.append({"id": it["id"], "of": seen[key], "kind": "exact", "similarity": 1.0})
            continue
        mh = sg.lean(sigs[i])
        hit = None
        for cand in lsh.query(mh):
            j = int(cand)
            sim = exact_jaccard(sets[i], sets[j])
            if sim >= threshold:
                hit = (j, sim)
                break
        if hit is not None:
            dups.append({"id": it["id"], "of": items[hit[0]]["id"], "kind": "near", "similarity": round(hit[1], 4)})
            continue
        seen[key] = it["id"]
        lsh.insert(str(i), mh, check_duplication=False)
    return dups


def find_leaks(items: list[dict], sets: list[np.ndarray], sigs: np.ndarray, shadow: list[dict],
               shadow_sets: list[np.ndarray], shadow_sigs: np.ndarray, sg: Signatures, limit: float) -> tuple[list[dict], float]:
    """Pool items whose question 5-gram Jaccard with a shadow item reaches `limit` (verified exactly).
    Returns (offenders, the highest similarity among LSH candidates)."""
    from datasketch import MinHashLSH

    lsh = MinHashLSH(threshold=min(LEAK_LSH_THRESHOLD, limit), num_perm=sg.num_perm)
    for j in range(len(shadow)):
        lsh.insert(str(j), sg.lean(shadow_sigs[j]), check_duplication=False)
    offenders, top = [], 0.0
    for i, it in enumerate(items):
        for cand in lsh.query(sg.lean(sigs[i])):
            j = int(cand)
            sim = exact_jaccard(sets[i], shadow_sets[j])
            top = max(top, sim)
            if sim >= limit:
                offenders.append({"id": it["id"], "shadow_id": shadow[j].get("id"), "similarity": round(sim, 4),
                                  "question": it.get("question", "")[:160]})
    return offenders, top


def _sample(n: int, k: int, seed: int) -> list[int]:
    idx = list(range(n))
    if n > k:
        idx = sorted(random.Random(f"diversity:{seed}").sample(idx, k))
    return idx


def lexical_stats(texts: list[str], batch: int = 64, seed: int = 0) -> dict:
    order = list(range(len(texts)))
    random.Random(f"batches:{seed}").shuffle(order)
    toks = [words(t) for t in texts]
    per = {"distinct1": [], "distinct2": [], "ttr": []}
    size = min(batch, len(texts)) or 1
    for s in range(0, len(order) - size + 1, size):
        u1, u2, n1, n2 = set(), set(), 0, 0
        for j in order[s:s + size]:
            w = toks[j]
            u1.update(w)
            u2.update(zip(w, w[1:]))
            n1 += len(w)
            n2 += max(len(w) - 1, 0)
        per["distinct1"].append(len(u1) / max(n1, 1))
        per["distinct2"].append(len(u2) / max(n2, 1))
        per["ttr"].append(len(u1) / max(n1, 1))
    all1, all2 = Counter(), set()
    n1 = n2 = 0
    for w in toks:
        all1.update(w)
        all2.update(zip(w, w[1:]))
        n1 += len(w)
        n2 += max(len(w) - 1, 0)
    mean = lambda v: sum(v) / len(v) if v else 0.0  # noqa: E731
    return {"distinct1": mean(per["distinct1"]), "distinct2": mean(per["distinct2"]), "ttr": mean(per["ttr"]),
            "batches": len(per["distinct2"]), "batch_size": size,
            "distinct2_min_batch": min(per["distinct2"]) if per["distinct2"] else 0.0,
            "corpus_distinct1": len(all1) / max(n1, 1), "corpus_distinct2": len(all2) / max(n2, 1),
            "corpus_ttr": len(all1) / max(n1, 1), "tokens": n1, "unigram_counts": all1}


def corpus_distinct2(texts: Iterable[str]) -> float:
    """Distinct bigrams / bigrams over the whole corpus (no windows)."""
    seen, n = set(), 0
    for t in texts:
        w = words(t)
        seen.update(zip(w, w[1:]))
        n += max(len(w) - 1, 0)
    return len(seen) / max(n, 1)


def zipf_slope(counts: Counter, max_rank: int = 1000) -> float | None:
    freqs = sorted(counts.values(), reverse=True)[:max_rank]
    if len(freqs) < 10:
        return None
    ranks = np.arange(1, len(freqs) + 1)
    slope, _ = np.polyfit(np.log(ranks), np.log(np.array(freqs, dtype=float)), 1)
    return float(slope)


def trigram_counts(texts: Iterable[str]) -> Counter:
    c = Counter()
    for t in texts:
        w = words(t)
        c.update(zip(w, w[1:], w[2:]))
    return c


def kl_vs_baseline(pool_texts: list[str], v1_texts: list[str], size: int, seed: int = 0) -> dict:
    """KL(A || V) - KL(A || B): A, B disjoint seeded halves of the pool, V a v1 sample, each of
    min(size, len(pool) // 2, len(v1)) texts (see the module docstring)."""
    n = min(size, len(pool_texts) // 2, len(v1_texts))
    if n < 1:
        return {"excess": float("nan"), "kl_v1": float("nan"), "kl_split_half": float("nan"), "size": n}
    idx = random.Random(f"kl-halves:{seed}").sample(range(len(pool_texts)), 2 * n)
    vidx = random.Random(f"kl-v1:{seed}").sample(range(len(v1_texts)), n)
    a = trigram_counts(pool_texts[i] for i in idx[:n])
    kl_v1 = kl_divergence(a, trigram_counts(v1_texts[i] for i in vidx))
    kl_half = kl_divergence(a, trigram_counts(pool_texts[i] for i in idx[n:]))
    return {"excess": kl_v1 - kl_half, "kl_v1": kl_v1, "kl_split_half": kl_half, "size": n}


def kl_divergence(p_counts: Counter, q_counts: Counter, alpha: float = KL_ALPHA) -> float:
    """KL(P || Q) in nats; Q is add-alpha smoothed over the union vocabulary (P's support)."""
    vocab = set(p_counts) | set(q_counts)
    n_p, n_q = sum(p_counts.values()), sum(q_counts.values())
    if not n_p or not n_q:
        return float("nan")
    denom = n_q + alpha * len(vocab)
    kl = 0.0
    for g, c in p_counts.items():
        p = c / n_p
        q = (q_counts.get(g, 0) + alpha) / denom
        kl += p * math.log(p / q)
    return kl


# ----------------------------------------------------------------------------- the report
def validate(items: list[dict], shadow: list[dict] | None, v1: list[dict] | None, th, *,
             counter: TokenCounter | None = None, seed: int = 0, inputs: dict | None = None,
             lengths: list[int] | None = None) -> dict:
    """Every pool check of the round 1 table -> a report dict (`checks`, `passed`, offenders...)."""
    counter = counter or get_counter()
    n = len(items)
    checks: list[dict] = []

    def add(name, measured, threshold, ok, detail=""):
        checks.append({"name": name, "measured": measured, "threshold": threshold, "passed": bool(ok), "detail": detail})

    add("items", n, f">= {th.min_items}", n >= th.min_items)

    # lexical diversity on a seeded sample, in fixed-size windows; the whole pool beside it
    idx = _sample(n, th.diversity_sample, seed)
    texts = [user_text(items[i]) for i in idx]
    lex = lexical_stats(texts, batch=th.distinct2_window, seed=seed)
    unigrams = lex.pop("unigram_counts")
    whole = corpus_distinct2(user_text(it) for it in items)
    design = A.generator_design(items)
    if design:
        checks.append(A.na_check("distinct-2", design))
    else:
        add("distinct-2", round(lex["distinct2"], 4),
            f">= {th.distinct2_min:g} (mean over windows of {lex['batch_size']} items of a {len(idx)}-item sample)",
            lex["distinct2"] >= th.distinct2_min,
            f"{lex['batches']} windows of {lex['batch_size']} items (gates pool.distinct2_window); whole pool "
            f"({n} items): {whole:.3f}; the {len(idx)}-item sample as one corpus: {lex['corpus_distinct2']:.3f}")
    # 3-gram KL vs the previous (v1) pool, beyond the split-half baseline of this pool
    kl = None
    threshold = f">= {th.kl3_min:g} over the split-half baseline (KL(A||v1) - KL(A||B), {th.kl_sample} items each)"
    if v1:
        kl = kl_vs_baseline([user_text(it) for it in items], [user_text(it) for it in v1], th.kl_sample, seed)
        add("3-gram KL vs v1 beyond split-half baseline", round(kl["excess"], 4), threshold,
            kl["excess"] >= th.kl3_min,
            f"KL(A||v1) {kl['kl_v1']:.3f} - KL(A||B) {kl['kl_split_half']:.3f} nats, A and B disjoint halves of "
            f"this pool, {kl['size']} items each (gates pool.kl_sample)")
    elif A.kl_vs_v1(items):
        checks.append(A.na_check("3-gram KL vs v1 beyond split-half baseline", A.kl_vs_v1(items)))
    else:
        add("3-gram KL vs v1 beyond split-half baseline", None, threshold, False,
            "no v1 pool: build one with `rc1 data build-pool --version v1 --out data/rollouts/rc1_v1.jsonl`")
    templated = [it for it in items if A.has_template(it)]  # custom-task items have no template, role or style
    roles = Counter(it.get("role") for it in templated)
    styles = Counter(it.get("style") for it in templated)
    templates = Counter(it.get("template") for it in templated)
    if A.roles_styles(items):
        checks += [A.na_check("roles covered", A.roles_styles(items)), A.na_check("styles covered", A.roles_styles(items))]
    else:
        add("roles covered", len(roles), f">= {th.roles_min}", len(roles) >= th.roles_min, ", ".join(sorted(map(str, roles))))
        add("styles covered", len(styles), f">= {th.styles_min}", len(styles) >= th.styles_min,
            ", ".join(sorted(map(str, styles))))

    # duplicates (exact + near) and leaks share one set of shingles and signatures
    sg = Signatures()
    sets = [shingles(it.get("question", "")) for it in items]
    sigs = sg.compute(sets)
    dups = find_duplicates(items, sets, sigs, sg, th.near_dup_jaccard)
    dup_pct = 100.0 * len(dups) / max(n, 1)
    add("duplicates after dedup (%)", round(dup_pct, 4), f"<= {th.dup_max_pct:g}", dup_pct <= th.dup_max_pct,
        f"{sum(d['kind'] == 'exact' for d in dups)} exact, {sum(d['kind'] == 'near' for d in dups)} near "
        f"(question {SHINGLE}-gram Jaccard >= {th.near_dup_jaccard:g})")

    lens = lengths if lengths is not None else counter.count_batch([prompt_text(it) for it in items])
    short = [items[i]["id"] for i, L in enumerate(lens) if L < th.len_min]
    long_ = [items[i]["id"] for i, L in enumerate(lens) if L > th.len_max]
    lo, hi = (min(lens), max(lens)) if lens else (None, None)
    if design:
        checks.append(A.na_check("sample length min (tokens)", design))
    else:
        add("sample length min (tokens)", lo, f">= {th.len_min}", lo is not None and not short,
            f"{len(short)} item(s) shorter: {short[:5]}" if short else "")
    add("sample length max (tokens)", hi, f"<= {th.len_max}", hi is not None and not long_,
        f"{len(long_)} item(s) longer: {long_[:5]}" if long_ else "")

    leaks, top_sim = [], None
    if shadow is None:
        add("leak vs shadow set", None, f"< {th.leak_sim_max:g}", False,
            "no shadow set: make it with `rc1 data shadow-set --n 245 --seed 20250820 --stratify`")
    else:
        sh_sets = [shingles(it.get("question", "")) for it in shadow]
        leaks, top_sim = find_leaks(items, sets, sigs, shadow, sh_sets, sg.compute(sh_sets), sg, th.leak_sim_max)
        add("leak vs shadow set (max 5-gram similarity)", round(top_sim, 4), f"< {th.leak_sim_max:g}", not leaks,
            f"{len(leaks)} pool item(s) >= {th.leak_sim_max:g}: "
            + ", ".join(f"{o['id']}~{o['shadow_id']} ({o['similarity']})" for o in leaks[:5]) if leaks else
            f"{len(shadow)} shadow items; highest similarity among LSH candidates")

    task_counts = Counter(it.get("task") for it in items)
    targets = task_order([*TASKS, *th.mix])  # the built-in tasks and the custom ones the gates config names
    unknown = sorted(set(task_counts) - set(targets), key=str)
    dev = {t: 100.0 * (task_counts.get(t, 0) / max(n, 1) - th.mix.get(t, 0.0)) for t in targets}
    worst = max(abs(v) for v in dev.values())
    add("task mix max deviation (pp)", round(worst, 4), f"<= {th.mix_tol_pp:g}", worst <= th.mix_tol_pp and not unknown,
        ", ".join(f"{t} {100 * task_counts.get(t, 0) / max(n, 1):.2f}% (target {100 * th.mix.get(t, 0):.0f}%)"
                  for t in targets if t in task_counts or th.mix.get(t))
        + (f"; unknown tasks {unknown}" if unknown else ""))

    len_sorted = sorted(lens)
    return {
        "passed": all(c["passed"] for c in checks),
        "checks": checks,
        "inputs": inputs or {},
        "n_items": n,
        "tokenizer": counter.name,
        "tokenizer_is_model": counter.is_model_tokenizer,
        "diversity": {**{k: (round(v, 4) if isinstance(v, float) else v) for k, v in lex.items()},
                      "window_items": lex["batch_size"], "sample_items": len(idx), "whole_pool_distinct2": whole,
                      "text": "user turns (template wrapper + question + passages)",
                      "zipf_slope": zipf_slope(unigrams), "kl3_vs_v1": kl, "kl_alpha": KL_ALPHA},
        "coverage": {"roles": dict(roles), "styles": dict(styles), "templates": dict(templates)},
        "duplicates": {"count": len(dups), "pct": dup_pct, "items": dups[:200], "method":
                       f"exact key (task, question, answer) + MinHashLSH {NUM_PERM} perms on question "
                       f"{SHINGLE}-gram shingles, verified Jaccard >= {th.near_dup_jaccard}"},
        "length_tokens": {"min": lo, "max": hi, "p50": len_sorted[len(len_sorted) // 2] if lens else None,
                          "too_short": short[:200], "too_long": long_[:200]},
        "task_mix": {"counts": dict(task_counts), "deviation_pp": dev, "target": dict(th.mix)},
        "leak": {"offenders": leaks[:200], "count": len(leaks), "max_similarity": top_sim,
                 "method": f"MinHashLSH candidates (threshold {LEAK_LSH_THRESHOLD}) + exact question "
                           f"{SHINGLE}-gram Jaccard"},
        "thresholds": th.model_dump() if hasattr(th, "model_dump") else dict(th),
    }
