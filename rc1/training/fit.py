"""The difficulty fit: which levels of each task's ladder can this model learn from?

`rc1 data fit --config P` (a pipeline stage before round 1) samples the base policy on fresh items of
each built-in task x ladder level (rc1.data.ladder), exactly as training will sample it (the training
engine, temperature, turn limit and reward), and estimates each level's pass@1 with a Wilson 95 % CI.
A level is chosen when its pass rate beyond guessing lies inside `difficulty_fit.band` (DAPO and OpenRLHF
keep only groups whose pass rate is strictly between 0 and 1; a level inside the band gives such groups
often). "Beyond guessing": skill = (pass rate - m) / (1 - m), where m is the majority-class baseline of the
level (its most common gold answer given to every item, on MAJORITY_ITEMS generated items: no model call).
A yes/no level that the model answers right 40 % of the time, below the 50 % that always saying "no" gets,
has no skill to reinforce; an arithmetic level whose commonest answer is right 5 % of the time barely moves.

Every verdict is on a confidence interval, not on the point estimate alone (`skill_interval`): the pass
rate's Wilson 95 % interval, on the effective sample size when an item is answered several times (n over
the Kish design effect measured from the spread of the items' own pass rates: answers to one item are not
independent), mapped through the skill formula (m is taken as known: it is measured on MAJORITY_ITEMS
items without sampling). A level is chosen when its skill's lower bound clears 0 (a zero-skill level
with a lucky sample is not) and its point estimate lies in the band. A level whose skill interval
straddles the band's lower edge is measured once more (another `items_per_level` fresh items x
`samples`, pooled) before it is judged. Per task it walks the ladder upwards from the lowest level of
`difficulty_fit.levels` and stops after the first level whose skill's UPPER bound is below the band
(the levels above it are harder by construction), so the cost is bounded: every level at most twice,
`items_per_level` x `samples` episodes each time.

A custom task (datasets.tasks) has no ladder and is fitted per item: `items_per_task` of its training
items are answered `samples` times each; the task trains when its pass rate beyond guessing lies in the
band, and each measured item gets its difficulty from its own pass rate (easy: every answer right, hard:
none, medium between), so no difficulty label is needed. The curriculum starts from these measurements
(prime-rl's item weights: an item the base model always or never solved counts `item_low_weight`). Its
held-out items are the task's own held-out split; its dev items leave the training split.

Then it builds, from the chosen levels only, three item files that share no fact (rc1.data.facts: the
operands and operations of an arithmetic item up to commutation, the deciding sentences of an extraction
or yes/no item, a custom item's normalised question). Per task the held-out items are drawn first, each a
fact not drawn before; then the dev items, likewise; then the training items, skipping every draw whose
fact is held out or dev (a training fact may repeat). A level whose fact space is too small for the asked
sizes stops the fit with a one-line error rather than leak:

  data/fit/train.jsonl    training items: every chosen level, plus the next harder level (its initial
                          sampling weight `next_level_share`, so the curriculum can move up)
  data/fit/dev.jsonl      dev items of the chosen levels (choose best/; never the held-out set)
  data/fit/heldout.jsonl  held-out items of the chosen levels: eval set (a), what the RC1 gate judges

A task with no level in the band is dropped from training with the reason (too hard: even its lowest
level is below the band; too easy: every level is above it). The report reports/difficulty_fit.json
carries the table (task x level: n, successes, pass rate, CI, chosen), the chosen levels, the cost,
and the identity of everything the numbers depend on; the round-2 gate refuses a report made for
another model, config or data.
"""

from __future__ import annotations

import logging
import random
import time

from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.errors import ConfigError
from rc1.runtime.fingerprint import register_artifact, sha256_file, sha256_json
from rc1.runtime.layout import DIFFICULTY_FIT_REPORT as REPORT
from rc1.runtime.layout import FIT_DEV, FIT_HELDOUT, FIT_TRAIN

log = logging.getLogger("rc1.data")

REPORT_VERSION = 3  # 3: fact-disjoint splits (rc1.data.facts), verdicts on the skill's confidence interval
CONFIDENCE = 0.95
INTERVAL = ("Wilson 95 % interval of the pass rate on the effective sample size (n / Kish design effect from the "
            "items' pass rates, answers clustered by item), mapped through skill = (p - m) / (1 - m), m fixed")
DRAWS_PER_ITEM = 30  # draws a split may make per item it asks for before its level's fact space counts as too small
MAJORITY_ITEMS = 400  # generated items per level the majority-class baseline is measured on
CUSTOM_LEVEL = "your items, per item"  # the one "level" of a custom task


def wilson(k: int, n: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion (scipy's)."""
    from scipy.stats import binomtest

    if n == 0:
        return (0.0, 1.0)
    ci = binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
    return (float(ci.low), float(ci.high))


def fit_tasks(cfg) -> list[str]:
    """The built-in tasks of the mix (with weight > 0) that have a ladder."""
    from rc1.data.ladder import LADDER

    return [t for t, w in cfg.datasets.mix.items() if w > 0 and t in LADDER]


def custom_tasks(cfg) -> list[str]:
    """The custom tasks of the mix (datasets.tasks, weight > 0): no ladder, fitted per item."""
    from rc1.data.ladder import LADDER

    return [t for t, w in cfg.datasets.mix.items() if w > 0 and t not in LADDER and t in cfg.datasets.tasks]


def level_range(cfg, task: str) -> list[int]:
    from rc1.data.ladder import LADDER

    known = [lv.n for lv in LADDER[task]]
    lo, hi = cfg.difficulty_fit.levels.get(task, (known[0], known[-1]))
    return [n for n in known if lo <= n <= hi]


def fit_identity(ws, cfg) -> tuple[str, dict]:
    """(sha256, settings) of everything the fit's numbers and items depend on."""
    from rc1.data.ladder import LADDER_VERSION

    wpath = ws.path(cfg.reward.weights)
    tdir = ws.path(cfg.pool.templates_dir)
    settings = {
        "model": cfg.model.base, "revision": cfg.model.revision, "max_new_tokens": cfg.model.max_new_tokens,
        "temperature": cfg.model.temperature, "top_p": cfg.model.top_p, "max_length": cfg.data.max_length,
        "max_turns": 1 if cfg.engine.name == "trl" else cfg.strategy.max_turns, "engine": cfg.engine.name,
        "multi_turn": cfg.strategy.multi_turn, "mix": dict(cfg.datasets.mix), "backend": cfg.generation.backend,
        "fit": cfg.difficulty_fit.model_dump(mode="json"), "ladder": LADDER_VERSION, "fit_version": REPORT_VERSION,
        "pool": {"templates_dir": cfg.pool.templates_dir, "tools": list(cfg.pool.tools), "max_turns": cfg.pool.max_turns,
                 "templates_sha256": {p.name: sha256_file(p) for p in sorted(tdir.glob("*.json"))} if tdir.is_dir() else None},
        "reward": cfg.reward.model_dump(mode="json"),
        "weights_sha256": sha256_file(wpath) if wpath.exists() else None,
        "custom_tasks": {t: {"spec": cfg.datasets.tasks[t].model_dump(mode="json"),
                             "files": {p: sha256_file(ws.path(p)) for p in _task_paths(cfg.datasets.tasks[t])
                                       if ws.path(p).exists()}} for t in custom_tasks(cfg)},
    }
    return sha256_json(settings), settings


def _task_paths(spec) -> list[str]:
    return [p for p in (spec.path, spec.heldout_path) if p]


class _Items:
    """Ladder items of the run's templates, each from its own random stream `<space>:<seed>:<task>:<level>:<i>`."""

    def __init__(self, ws, cfg):
        from rc1.data.pool import BuildParams, CLARIFY_WEIGHT, LEVEL_WEIGHTS
        from rc1.data.templates import load_pack

        self.cfg = cfg
        self.params = BuildParams(n=1, templates_dir=ws.path(cfg.pool.templates_dir), seed=cfg.difficulty_fit.seed,
                                  tools=list(cfg.pool.tools), max_turns=cfg.pool.max_turns, clarify_rate=0.0)
        tasks = tuple(fit_tasks(cfg))
        self.pack = load_pack(self.params.templates_dir, tasks=tasks) if tasks else {}
        self.level_mean = {t: sum(w * CLARIFY_WEIGHT[lv] for w, lv in zip(ws_, ("easy", "medium", "hard")))
                           for t, ws_ in LEVEL_WEIGHTS.items()}

    def make(self, space: str, task: str, n: int, count: int, start: int = 0) -> list[dict]:
        from rc1.data.ladder import level
        from rc1.data.pool import make_level_item

        seed = self.cfg.difficulty_fit.seed
        out = []
        for i in range(start, start + count):
            rng = random.Random(f"{space}:{seed}:{task}:{n}:{i}")
            it = make_level_item(task, n, rng, self.params, self.pack[task], f"{space}-{task}-L{n}-{i:05d}",
                                 self.level_mean[task])
            it["bucket"] = level(task, n).bucket
            out.append(it)
        return out


def prompt_key(item: dict) -> str:
    return "\n".join(str(m.get("content", "")) for m in item["messages"])


def skill(pass_rate: float, majority: float) -> float:
    """Pass rate beyond the majority-class baseline, scaled to [.., 1]: (p - m) / (1 - m)."""
    return (pass_rate - majority) / (1.0 - majority) if majority < 1 else 0.0


def skill_interval(successes: int, n: int, majority: float, item_rates: dict | None = None,
                   confidence: float = CONFIDENCE) -> dict:
    """The pass rate's interval and the skill's (see INTERVAL): {"ci", "skill_ci", "design_effect", "n_eff"}.
    `item_rates`: each item's own pass rate, when an item was answered several times (n / len(item_rates)
    answers each); their spread gives the design effect, clipped to [1, answers per item]."""
    from scipy.stats import norm

    from rc1.eval.metrics import wilson as wilson_z

    if n <= 0:
        return {"ci": [0.0, 1.0], "skill_ci": [skill(0.0, majority), 1.0], "design_effect": 1.0, "n_eff": 0.0}
    p = successes / n
    deff = 1.0
    rates = list((item_rates or {}).values())
    if len(rates) > 1 and n > len(rates) and 0 < p < 1:
        mean = sum(rates) / len(rates)
        cluster_var = sum((r - mean) ** 2 for r in rates) / (len(rates) - 1) / len(rates)
        deff = min(max(cluster_var / (p * (1 - p) / n), 1.0), n / len(rates))
    n_eff = n / deff
    lo, hi = wilson_z(p * n_eff, n_eff, float(norm.ppf(0.5 + confidence / 2)))
    return {"ci": [round(lo, 4), round(hi, 4)],
            "skill_ci": [round(skill(lo, majority), 4), round(skill(hi, majority), 4)], "design_effect": round(deff, 4), "n_eff": round(n_eff, 2)}


def kept(row: dict, band: tuple[float, float]) -> bool:
    """A level trains when its skill's lower bound clears 0 and its point estimate lies in the band."""
    return row["skill_ci"][0] > 0 and band[0] <= row["skill"] <= band[1]


def undecided(row: dict, band: tuple[float, float]) -> bool:
    """The skill's interval straddles the band's lower edge: measure more before judging the level."""
    return row["skill_ci"][0] < band[0] < row["skill_ci"][1]


def below_band(row: dict, band: tuple[float, float]) -> bool:
    """The skill's upper bound is below the band: this level, and the harder ones above it, are out of reach."""
    return row["skill_ci"][1] < band[0]


def choose(levels: list[dict], band: tuple[float, float]) -> tuple[list[int], str | None]:
    """(chosen level numbers, why the task is dropped or None), on each level's skill (pass rate beyond its
    majority-class baseline) and its confidence interval (`kept`)."""
    lo, hi = band
    measured = [r for r in levels if r["pass_rate"] is not None]
    chosen = [r["level"] for r in measured if kept(r, band)]
    if chosen:
        return chosen, None
    if not measured:
        return [], "no level was measured"
    if all(r["skill"] > hi for r in measured):
        return [], (f"too easy for this model: every level measured is above the band's upper end {hi:g} "
                    f"(hardest: level {measured[-1]['level']} at skill {measured[-1]['skill']:.2f})")
    chance = [r for r in measured if lo <= r["skill"] <= hi]
    if chance:
        r = chance[0]
        return [], (f"no skill told apart from guessing: level {r['level']} ({r['name']}) has skill {r['skill']:.2f} "
                    f"in the band but its {CONFIDENCE:.0%} lower bound {r['skill_ci'][0]:.2f} does not clear 0 "
                    f"(n = {r['n']}; more difficulty_fit.items_per_level or samples narrow it)")
    first = measured[0]
    return [], (f"too hard for this model: level {first['level']} ({first['name']}) passes {first['pass_rate']:.2f} "
                f"against a majority-class baseline of {first['majority_rate']:.2f} (skill {first['skill']:.2f} < {lo:g})"
                + (" and the levels above it do not reach the band" if len(measured) > 1 else ""))


def measure(ws, cfg, *, progress=None) -> dict:
    """Run the fit and write its item files and report (see the module docstring)."""
    import torch

    from rc1.data.generic import load_tasks
    from rc1.generation import base_ref, open_sampler
    from rc1.rewards.reward import RewardModel

    fc = cfg.difficulty_fit
    tasks = fit_tasks(cfg)
    if not tasks and not custom_tasks(cfg):
        raise ConfigError("difficulty_fit: the mix (datasets.mix) names no task with weight > 0 "
                          f"(mix: {dict(cfg.datasets.mix)})")
    cfg = cfg.model_copy(deep=True)
    if cfg.engine.name == "trl":
        cfg.strategy.max_turns = 1
    if cfg.run.threads:
        torch.set_num_threads(cfg.run.threads)
    ident, settings = fit_identity(ws, cfg)
    maker = _Items(ws, cfg)
    custom = load_tasks(ws, cfg.datasets.tasks, custom_tasks(cfg))
    reward = RewardModel.from_config(cfg, ws)
    generator, note, _ = open_sampler(cfg, base_ref(cfg))
    if note:
        log.warning("difficulty fit: %s", note)
    try:
        table, episodes_n, tokens, fit_seconds = _walk(cfg, tasks, maker, reward, generator, progress)
        ctable, c_eps, c_tokens, c_seconds = _walk_custom(cfg, custom, reward, generator, progress, len(tasks))
    finally:
        generator.close()
    table.update(ctable)
    episodes_n, tokens, fit_seconds = episodes_n + c_eps, tokens + c_tokens, fit_seconds + c_seconds
    tasks = tasks + list(custom)
    backend = generator.backend
    kept = [t for t in tasks if table[t]["chosen"]]
    files, facts = _write_items(ws, cfg, maker, custom, table, kept, ident) if kept else ({}, {})
    report = {
        "version": REPORT_VERSION, "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "identity": ident, "settings": settings, "band": list(fc.band), "confidence": CONFIDENCE, "interval": INTERVAL,
        "tasks": table, "kept": kept, "dropped": {t: table[t]["reason"] for t in tasks if table[t]["dropped"]},
        "files": files, "distinct_facts": facts, "episodes": episodes_n, "completion_tokens": tokens,
        "seconds": round(fit_seconds, 2),
        "backend": backend, "backend_note": note or None, "summary": summary_line(table, kept),
    }
    path = atomic_write_json(ws.path(REPORT), report)
    register_artifact(ws, path, "difficulty_fit", identity=ident)
    log.info("difficulty fit: %s (%d episodes with %s, %.0f s)", report["summary"], episodes_n, backend, fit_seconds)
    return report


def _sample(cfg, items: list[dict], generator, reward, seed: int) -> tuple[dict, int]:
    """Sample every item `difficulty_fit.samples` times with the training rollout's settings
    (rc1.engines.pure_pt rollout) and score it: (the row's measured fields, completion tokens)."""
    from rc1.generation import SamplingParams
    from rc1.strategies.common import score_rollout

    fc = cfg.difficulty_fit
    t1 = time.perf_counter()
    params = SamplingParams.training(cfg, seed=seed, rows=len(items) * fc.samples)
    eps = generator.episodes(items, num_generations=fc.samples, params=params)
    reps = [it for it in items for _ in range(fc.samples)]
    ro = score_rollout(reps, eps, reward, fc.samples)
    k, total = sum(ro.successes), len(ro.successes)
    comp = [sum(ep.action_mask) for ep in eps]
    row = {"items": len(items), "n": total, "successes": k, "pass_rate": k / total,
           "truncated": sum(bool(ep.truncated) for ep in eps),
           "truncation_rate": sum(bool(ep.truncated) for ep in eps) / total,
           "completion_tokens": sum(comp), "completion_tokens_mean": sum(comp) / total,
           "seconds": round(time.perf_counter() - t1, 2), "item_pass_rates": ro.group_success()}
    return row, sum(comp)


def _judged(row: dict, majority: float) -> dict:
    """The measured row with its majority-class baseline, skill and their intervals (skill_interval)."""
    k, total = row["successes"], row["n"]
    return {**row, "majority_rate": round(majority, 4), "skill": round(skill(k / total, majority), 4),
            **skill_interval(k, total, majority, row["item_pass_rates"])}


def _pooled(a: dict, b: dict) -> dict:
    """Two measurements of one level (b on fresh items) as one."""
    n, k = a["n"] + b["n"], a["successes"] + b["successes"]
    comp = a["completion_tokens"] + b["completion_tokens"]
    return {**a, "items": a["items"] + b["items"], "n": n, "successes": k, "pass_rate": k / n,
            "truncated": a["truncated"] + b["truncated"], "truncation_rate": (a["truncated"] + b["truncated"]) / n,
            "completion_tokens": comp, "completion_tokens_mean": comp / n,
            "seconds": round(a["seconds"] + b["seconds"], 2),
            "item_pass_rates": {**a["item_pass_rates"], **b["item_pass_rates"]}, "measured_twice": True}


def _walk(cfg, tasks, maker, reward, generator, progress):
    """Sample every task's ladder upwards (see the module docstring): (table, episodes, tokens, seconds)."""
    from rc1.data.ladder import level as level_of
    from rc1.eval.metrics import majority_baseline

    fc = cfg.difficulty_fit
    t0 = time.perf_counter()
    episodes_n = tokens = 0
    table: dict[str, dict] = {}
    for ti, task in enumerate(tasks):
        rows: list[dict] = []
        for n in level_range(cfg, task):
            lv = level_of(task, n)
            maj = majority_baseline(maker.make("fitmajority", task, n, MAJORITY_ITEMS))["overall"]["rate"]
            measured, toks = _sample(cfg, maker.make("fit", task, n, fc.items_per_level), generator, reward,
                                     fc.seed + 1000 * ti + n)
            episodes_n, tokens = episodes_n + measured["n"], tokens + toks
            row = {"level": n, "name": lv.name, "bucket": lv.bucket, **_judged(measured, maj)}
            if undecided(row, fc.band):  # the interval straddles the band's lower edge: measure more, once
                more, toks = _sample(cfg, maker.make("fitmore", task, n, fc.items_per_level), generator, reward,
                                     fc.seed + 1000 * ti + n + 500)
                episodes_n, tokens = episodes_n + more["n"], tokens + toks
                row = {"level": n, "name": lv.name, "bucket": lv.bucket, **_judged(_pooled(measured, more), maj)}
            rows.append(row)
            _said(progress, task, n, lv.name, row)
            if below_band(row, fc.band):
                break  # harder levels lie above this one: not measured
        chosen, dropped = choose(rows, fc.band)
        for r in rows:
            r["chosen"] = r["level"] in chosen
        measured_levels = {r["level"] for r in rows}
        for n in level_range(cfg, task):
            if n not in measured_levels:
                rows.append({"level": n, "name": level_of(task, n).name, "bucket": level_of(task, n).bucket,
                             "items": 0, "n": 0, "successes": 0, "pass_rate": None, "ci": None, "chosen": False,
                             "not_measured": "above a level below the band"})
        above = [n for n in level_range(cfg, task) if chosen and n > max(chosen)]
        nxt = above[0] if above and fc.next_level_share > 0 else None
        table[task] = {"levels": rows, "chosen": chosen, "next_level": nxt, "dropped": dropped is not None,
                       "reason": dropped}
        if dropped:
            log.warning("difficulty fit: %s dropped from training: %s", task, dropped)
    return table, episodes_n, tokens, time.perf_counter() - t0


def _said(progress, task: str, n: int, name: str, row: dict) -> None:
    k, total, maj = row["successes"], row["n"], row["majority_rate"]
    if progress:
        progress(f"difficulty fit: {task} level {n} ({name}): {k}/{total} = {k / total:.2f}, majority-class "
                 f"{maj:.2f}, skill {row['skill']:.2f} [{row['skill_ci'][0]:.2f}, {row['skill_ci'][1]:.2f}]")
    log.info("difficulty fit: %s level %d (%s): %d/%d = %.3f, CI [%.3f, %.3f]; majority-class %.3f, skill %.3f "
             "[%.3f, %.3f]%s", task, n, name, k, total, k / total, *row["ci"], maj, row["skill"], *row["skill_ci"],
             " (measured twice: the first interval straddled the band's lower edge)" if row.get("measured_twice")
             else "")


def measured_bucket(rate: float) -> str:
    """An item's difficulty from the base model's answers to it: easy when every sampled answer was right,
    hard when none was, medium between (the items a GRPO group learns from)."""
    return "easy" if rate >= 1.0 else ("hard" if rate <= 0.0 else "medium")


def _walk_custom(cfg, custom: dict, reward, generator, progress, offset: int):
    """A custom task has no ladder: it is fitted per item. `difficulty_fit.items_per_task` of its training
    items (a seeded sample) are each answered `samples` times; the task's pass rate (beyond its
    majority-class baseline) decides whether it trains, and every measured item gets its difficulty from
    its own pass rate (measured_bucket), which the curriculum starts from (prime-rl's item weights)."""
    from rc1.eval.metrics import majority_baseline

    fc = cfg.difficulty_fit
    t0 = time.perf_counter()
    episodes_n = tokens = 0
    table: dict[str, dict] = {}
    for ti, (task, data) in enumerate(custom.items()):
        rng = random.Random(f"fititems:{fc.seed}:{task}")
        items = rng.sample(data.train, min(fc.items_per_task, len(data.train)))
        measured, toks = _sample(cfg, items, generator, reward, fc.seed + 1000 * (offset + ti))
        maj = majority_baseline(data.train)["overall"]["rate"]
        episodes_n, tokens = episodes_n + measured["n"], tokens + toks
        rates = measured["item_pass_rates"]
        buckets = {b: sum(measured_bucket(r) == b for r in rates.values()) for b in ("easy", "medium", "hard")}
        row = {"level": 0, "name": CUSTOM_LEVEL, "bucket": "measured", **_judged(measured, maj),
               "item_buckets": buckets}
        _said(progress, task, 0, CUSTOM_LEVEL, row)
        chosen, dropped = choose([row], fc.band)
        row["chosen"] = bool(chosen)
        table[task] = {"levels": [row], "chosen": chosen, "next_level": None, "dropped": dropped is not None,
                       "reason": dropped, "custom": True}
        if dropped:
            log.warning("difficulty fit: %s dropped from training: %s", task, dropped)
    return table, episodes_n, tokens, time.perf_counter() - t0


def _write_items(ws, cfg, maker, custom: dict, table: dict, kept: list[str], ident: str) -> tuple[dict, dict]:
    """The training / dev / held-out files of the kept tasks' chosen levels, sharing no fact (see the module
    docstring), and per generated task the distinct facts of each split; every item carries its level's
    majority-class rate (meta.fit_majority_rate, for the curriculum's skill)."""
    from rc1.data.facts import fact_leaks
    from rc1.data.io import dumps_item
    from rc1.eval.metrics import majority_baseline
    from rc1.runtime.atomic import atomic_output

    fc = cfg.difficulty_fit
    held, dev, train = [], [], []
    facts: dict[str, dict] = {}
    skipped = 0
    for task in kept:
        majority = {r["level"]: r["majority_rate"] for r in table[task]["levels"] if r.get("majority_rate") is not None}
        if task in custom:
            h, d, t = _custom_items(cfg, custom[task], table[task]["levels"][0]["item_pass_rates"])
            for it in h + d + t:
                it["meta"]["fit_majority_rate"] = majority.get(0, 0.0)
            held, dev, train = held + h, dev + d, train + t
            continue
        ch = table[task]["chosen"]
        taken: set[str] = set()  # the facts held out or dev so far: no training item may have one
        count: dict[str, int] = {}
        for space, split, total in (("fitheld", held, fc.heldout_per_task), ("fitdev", dev, fc.dev_per_task)):
            for j, n in enumerate(ch):
                share = total // len(ch) + (1 if j < total % len(ch) else 0)
                got, _ = draw_split(maker, space, task, n, share, taken, distinct=True)
                count[space] = count.get(space, 0) + len(got)
                split += got
        train_facts: set[str] = set()
        for n in ch + ([table[task]["next_level"]] if table[task]["next_level"] is not None else []):
            role = "chosen" if n in ch else "next"
            if n not in majority:  # the next level was not measured (the ladder's top was reached first)
                rate = majority_baseline(maker.make("fitmajority", task, n, MAJORITY_ITEMS))["overall"]["rate"]
                majority[n] = round(rate, 4)
            got, drawn_out = draw_split(maker, "fittrain", task, n, fc.train_per_level, taken, distinct=False,
                                          seen=train_facts)
            skipped += drawn_out
            for it in got:
                it["meta"]["fit_role"] = role
                train.append(it)
        for it in held + dev + train:
            if it["task"] == task:
                it["meta"]["fit_majority_rate"] = majority.get(it["meta"]["level_n"], 0.0)
        facts[task] = {"heldout": count.get("fitheld", 0), "dev": count.get("fitdev", 0), "train": len(train_facts)}
    # a custom task's held-out split is its own: whatever training or dev item repeats a held-out question goes,
    # and so does a training item repeating a dev question (rc1.data.facts: the normalised question)
    before = len(train) + len(dev)
    dev_out = {x["id"] for x in fact_leaks(held, dev)}
    dev = [it for it in dev if it["id"] not in dev_out]
    train_out = {x["id"] for x in fact_leaks(held + dev, train)}
    train = [it for it in train if it["id"] not in train_out]
    files: dict = {}
    for rel, rows in ((FIT_TRAIN, train), (FIT_DEV, dev), (FIT_HELDOUT, held)):
        path = ws.path(rel)
        with atomic_output(path) as fh:
            for it in rows:
                fh.write(dumps_item(it) + "\n")
        register_artifact(ws, path, "difficulty_fit_items", identity=ident, n=len(rows))
        files[rel] = {"n": len(rows), "sha256": sha256_file(path)}
    files["dropped_as_duplicates"] = before - len(train) - len(dev)
    files["train_draws_skipped_for_heldout_facts"] = skipped
    return files, facts


def draw_split(maker, space: str, task: str, n: int, count: int, taken: set[str], *, distinct: bool,
                 seen: set[str] | None = None) -> tuple[list[dict], int]:
    """(`count` items of `task` level `n` from the random stream `space`, none with a fact in `taken`; `distinct`:
    each a fact not drawn before, added to `taken` (held-out, dev); else their facts are added to `seen`),
    and the number of draws skipped. Stops the fit with a one-line ConfigError
    when DRAWS_PER_ITEM x count draws do not find them: the level's fact space is too small for the sizes."""
    from rc1.data.facts import fact_key
    from rc1.data.ladder import level as level_of

    out, i, skipped, limit = [], 0, 0, DRAWS_PER_ITEM * count + 100
    seen = set() if seen is None else seen
    while len(out) < count:
        if i >= limit:
            lv = level_of(task, n)
            what = {"fitheld": "held-out", "fitdev": "dev", "fittrain": "training"}.get(space, space)
            raise ConfigError(
                f"difficulty fit: {task} level {n} ({lv.name}) has too few distinct facts for disjoint splits: "
                f"{len(out)} of {count} {what} items found in {limit} draws with {len(taken)} facts held out or dev "
                f"(lower difficulty_fit.heldout_per_task / dev_per_task / train_per_level, or fit other levels)")
        it = maker.make(space, task, n, 1, start=i)[0]
        i += 1
        key = fact_key(task, it)
        if key in taken:
            skipped += 1
            continue
        (taken if distinct else seen).add(key)
        out.append(it)
    return out, skipped


def _custom_items(cfg, data, rates: dict[str, float]) -> tuple[list[dict], list[dict], list[dict]]:
    """(held-out, dev, training) items of a custom task: the held-out items are its own held-out split
    (up to heldout_per_task, seeded), dev items come from its training split and leave it; every item the
    fit measured carries its measured pass rate and bucket (meta.fit_pass_rate, measured_bucket)."""
    import copy

    fc = cfg.difficulty_fit
    rng = random.Random(f"fitsplit:{fc.seed}:{data.name}")
    held = rng.sample(data.heldout, min(fc.heldout_per_task, len(data.heldout)))
    unmeasured = [it for it in data.train if it["id"] not in rates]
    dev_ids = {it["id"] for it in rng.sample(unmeasured, min(fc.dev_per_task, len(unmeasured)))}
    dev, train = [], []
    for it in data.train:
        it = copy.deepcopy(it)
        it.setdefault("meta", {}).update({"level_n": 0, "fit_role": "chosen"})
        if it["id"] in rates:
            it["meta"]["fit_pass_rate"] = rates[it["id"]]
            it["bucket"] = it["meta"]["difficulty"] = measured_bucket(rates[it["id"]])
        (dev if it["id"] in dev_ids else train).append(it)
    return [copy.deepcopy(it) for it in held], dev, train


def summary_line(table: dict, kept: list[str]) -> str:
    """One sentence: which levels were chosen per task, which tasks were dropped and why."""
    chosen, dropped = [], []
    for task, t in table.items():
        if t["chosen"]:
            names = {r["level"]: r["name"] for r in t["levels"]}
            chosen.append(f"{task} level{'s' if len(t['chosen']) > 1 else ''} "
                          f"{', '.join(f'{n} ({names[n]})' for n in t['chosen'])}"
                          + (f", with level {t['next_level']} to grow into" if t.get("next_level") is not None else ""))
        else:
            dropped.append(f"{task} ({t['reason']})")
    if not kept:
        return "no task has a level in the band: " + "; ".join(dropped)
    return "trained and evaluated on " + "; ".join(chosen) + (f"; dropped: {'; '.join(dropped)}" if dropped else "")


def read_report(ws) -> dict | None:
    import json

    p = ws.path(REPORT)
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def table_text(report: dict) -> str:
    """The fit's table as plain text (task x level -> n, pass rate with CI, chosen)."""
    lines = [f"{'task':<11} {'lvl':>3}  {'level':<28} {'n':>4} {'pass':>6}  {'95% CI':<15} {'maj':>5} {'skill':>6} chosen"]
    lo, hi = report["band"]
    for task, t in report["tasks"].items():
        for r in t["levels"]:
            if r["pass_rate"] is None:
                lines.append(f"{task:<11} {r['level']:>3}  {r['name']:<28} {'-':>4} {'-':>6}  {'not measured':<15}")
                continue
            ci = f"[{r['ci'][0]:.2f}, {r['ci'][1]:.2f}]"
            mark = "yes" if r["chosen"] else ("next" if r["level"] == t.get("next_level") else "")
            lines.append(f"{task:<11} {r['level']:>3}  {r['name']:<28} {r['n']:>4} {r['pass_rate']:>6.2f}  {ci:<15} "
                         f"{r['majority_rate']:>5.2f} {r['skill']:>6.2f} {mark}")
    lines.append(f"band [{lo:g}, {hi:g}] on skill = (pass - maj) / (1 - maj); {report['summary']}")
    return "\n".join(lines)
