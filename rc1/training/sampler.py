"""Difficulty-aware priority sampling of training prompts (SPEC §6), with checkpointable state.

Each slot of a step's batch is drawn in three stages:

1. Source — the seed pool (cfg.seed_pool, the balanced pool) with probability r(step), otherwise
   the other training items (cfg.data.train_path). r(step) is `seed_ratio_schedule`, piecewise
   constant: the ratio of the last entry whose step <= the current step. When one source is empty
   every slot comes from the other.
2. Bucket — easy / medium / hard with the `by_difficulty` weights, renormalised over the buckets the
   source has (an item without a bucket counts as medium).
3. Item — uniform within the bucket, except that *low-performing* items share at most
   `low_perf_cap` of the bucket's probability mass. An item is low-performing once it has been
   rolled out at least LOW_PERF_MIN_TRIES times and its running success (an exponential moving
   average, factor SUCCESS_EMA, of its rollout groups' success rates) is below LOW_PERF_SUCCESS.
   Such items almost always give groups with zero reward variance, hence no GRPO signal; capping
   their share keeps compute on prompts the policy can learn from without dropping them entirely.

The generator (numpy PCG64), the per-item running success and the draw count are the sampler's
state: they go into every checkpoint so a resumed run draws the same prompts as an uninterrupted one.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from rc1.data.io import read_jsonl
from rc1.runtime.errors import ConfigError

log = logging.getLogger("rc1.sampling")

LOW_PERF_SUCCESS = 0.1
LOW_PERF_MIN_TRIES = 2
SUCCESS_EMA = 0.5
BUCKET_ORDER = ("easy", "medium", "hard")


def read_items(path: Path) -> list[dict]:
    """Training items: each needs an id and the messages a rollout starts from."""
    return read_jsonl(path, required=("id", "messages"), what="training item")


def load_training_items(ws, cfg) -> tuple[list[dict], list[dict], dict]:
    """(seed-pool items, other items, provenance). Falls back to data.train_path with a warning.

    With difficulty_fit.enable the training items are the fit's (data/fit/train.jsonl, every item with its
    ladder level), and nothing else: the fit chose them for this model."""
    if cfg.difficulty_fit.enable:
        from rc1.runtime.layout import FIT_TRAIN

        path = ws.path(FIT_TRAIN)
        if not path.exists():
            raise ConfigError(f"difficulty_fit.enable: no {FIT_TRAIN}; run `rc1 data fit --config ...` first")
        items = read_items(path)
        if not items:
            raise ConfigError(f"{FIT_TRAIN} has no items: the difficulty fit found no task with a level in the band "
                              f"(reports/difficulty_fit.json says why)")
        return items, [], {"seed_pool": FIT_TRAIN, "train_path": None, "fallback": False, "difficulty_fit": True}
    seed_path, train_path = ws.path(cfg.seed_pool), ws.path(cfg.data.train_path)
    info = {"seed_pool": cfg.seed_pool, "train_path": cfg.data.train_path, "fallback": False}
    seed_items = read_items(seed_path) if seed_path.exists() else []
    other = read_items(train_path) if train_path.exists() and train_path.resolve() != seed_path.resolve() else []
    if not seed_items:
        if not other:
            raise ConfigError(f"no training data: neither seed_pool {cfg.seed_pool} nor data.train_path "
                              f"{cfg.data.train_path} exists (run `rc1 data make-min` or `rc1 data build-pool`)")
        log.warning("seed_pool %s is missing or empty: sampling from data.train_path %s only",
                    cfg.seed_pool, cfg.data.train_path)
        info["fallback"] = True
    seed_ids = {it["id"] for it in seed_items}
    other = [it for it in other if it["id"] not in seed_ids]
    return seed_items, other, info


class PrioritySampler:
    def __init__(self, seed_items: list[dict], other_items: list[dict], by_difficulty: dict[str, float],
                 low_perf_cap: float, seed_ratio_schedule: list[tuple[int, float]], seed: int,
                 enable: bool = True):
        if not seed_items and not other_items:
            raise ConfigError("priority sampler: no items to sample from")
        self.sources = {"seed": seed_items, "other": other_items}
        self.by_difficulty = dict(by_difficulty)
        self.low_perf_cap = low_perf_cap
        self.schedule = sorted(seed_ratio_schedule)
        self.enable = enable
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.success: dict[str, float] = {}
        self.tries: dict[str, int] = {}
        self.draws = 0
        self._buckets = {name: self._by_bucket(items) for name, items in self.sources.items()}

    @classmethod
    def from_config(cls, cfg, seed_items: list[dict], other_items: list[dict]) -> "PrioritySampler":
        ps = cfg.priority_sampling
        return cls(seed_items, other_items, dict(ps.by_difficulty), ps.low_perf_cap,
                   [(s.step, s.ratio) for s in ps.seed_ratio_schedule], seed=cfg.run.seed, enable=ps.enable)

    @staticmethod
    def _by_bucket(items: list[dict]) -> dict[str, list[dict]]:
        out: dict[str, list[dict]] = {}
        for it in items:
            out.setdefault(it.get("bucket") or "medium", []).append(it)
        return out

    def seed_ratio(self, step: int) -> float:
        ratio = self.schedule[0][1] if self.schedule else 1.0
        for s, r in self.schedule:
            if s <= step:
                ratio = r
        return ratio

    def is_low_perf(self, item_id: str) -> bool:
        return self.tries.get(item_id, 0) >= LOW_PERF_MIN_TRIES and self.success.get(item_id, 1.0) < LOW_PERF_SUCCESS

    def _pick_item(self, bucket_items: list[dict], rng) -> dict:
        low = np.array([self.is_low_perf(it["id"]) for it in bucket_items])
        n_low = int(low.sum())
        if n_low == 0 or n_low == len(bucket_items):
            return bucket_items[int(rng.integers(len(bucket_items)))]
        low_mass = min(n_low / len(bucket_items), self.low_perf_cap)
        p = np.where(low, low_mass / n_low, (1 - low_mass) / (len(bucket_items) - n_low))
        return bucket_items[int(rng.choice(len(bucket_items), p=p / p.sum()))]

    def next_batch(self, step: int, n: int, *, seed: int | None = None) -> list[dict]:
        """Draw n prompts for `step` (with replacement across steps, without within a batch when possible).

        With `seed`, the draw uses a generator of its own (a redraw that must not depend on which process draws
        it, nor move the sampler's stream); without, the sampler's checkpointed generator."""
        out: list[dict] = []
        rng = self.rng if seed is None else np.random.Generator(np.random.PCG64(seed))
        ratio = self.seed_ratio(step)
        for _ in range(n):
            use_seed = rng.random() < ratio
            source = "seed" if use_seed else "other"
            if not self.sources[source]:
                source = "other" if source == "seed" else "seed"
            buckets = self._buckets[source]
            if self.enable:
                names = [b for b in BUCKET_ORDER if b in buckets] + sorted(set(buckets) - set(BUCKET_ORDER))
                w = np.array([self.by_difficulty.get(b, 0.0) for b in names], dtype=float)
                if w.sum() <= 0:
                    w = np.ones(len(names))
                bucket = names[int(rng.choice(len(names), p=w / w.sum()))]
                item = self._pick_item(buckets[bucket], rng)
            else:
                items = self.sources[source]
                item = items[int(rng.integers(len(items)))]
            out.append(item)
        if seed is None:  # seeded redraws are counted by the recipe (sampler/redraws)
            self.draws += n
        return out

    def update(self, item_id: str, success_rate: float) -> None:
        """Record one rollout group's success rate for an item (called after rewards)."""
        prev = self.success.get(item_id)
        self.success[item_id] = success_rate if prev is None else SUCCESS_EMA * prev + (1 - SUCCESS_EMA) * success_rate
        self.tries[item_id] = self.tries.get(item_id, 0) + 1

    def state_dict(self) -> dict:
        return {"rng": self.rng.bit_generator.state, "success": dict(self.success), "tries": dict(self.tries),
                "draws": self.draws}

    def load_state_dict(self, state: dict) -> None:
        self.rng.bit_generator.state = state["rng"]
        self.success = dict(state["success"])
        self.tries = {k: int(v) for k, v in state["tries"].items()}
        self.draws = int(state["draws"])

    def stats(self) -> dict:
        low = sum(1 for k in self.tries if self.is_low_perf(k))
        return {"sampler/draws": self.draws, "sampler/items_seen": len(self.tries), "sampler/low_perf_items": low}


def make_sampler(cfg, seed_items: list[dict], other_items: list[dict]):
    """The run's prompt sampler: the curriculum over ladder levels when the difficulty fit is on, else the
    priority sampler."""
    if cfg.difficulty_fit.enable:
        return CurriculumSampler.from_config(cfg, seed_items + other_items)
    return PrioritySampler.from_config(cfg, seed_items, other_items)


def _level_key(item: dict) -> tuple[str, int]:
    return (str(item.get("task")), int((item.get("meta") or {}).get("level_n", 0)))


class CurriculumSampler:
    """Prompts drawn over task x ladder level, with the weight moved between levels as training goes.

    A slot draws a task by the run's mix (renormalised over the tasks the fit kept), a level by the task's
    level weights, then an item. Level weights start from the fit: 1 for every chosen level,
    difficulty_fit.next_level_share for the next harder one. Each rollout group updates its level's running
    pass rate (an exponential moving average over about `curriculum_window` groups, at no extra sampling
    cost); once a level has been seen `curriculum_window` times since its last move and its running skill
    (the running rate beyond the level's majority-class rate m, (rate - m) / (1 - m), as the fit judges it;
    m is meta.fit_majority_rate, 0 when absent) is above the band, `curriculum_step` of its weight moves to
    the next harder level, below the band to the next easier one. Items are weighted as prime-rl does: an
    item whose latest group passed all or none of its episodes counts `item_low_weight`, any other (or unseen)
    item 1; or (item_weighting variance) by the posterior mean of p(1 - p) under Beta(1 + successes, 1 +
    failures) over all of the item's answers so far, over 1/4 (`variance_weight`): the share of a group's
    reward variance the item can carry, shrunk toward the prior where few answers were seen. The generator,
    the weights, the running rates, every item's latest pass rate and answer counts are checkpointed: a resumed
    run draws what an uninterrupted one draws.
    """

    def __init__(self, items: list[dict], mix: dict[str, float], band: tuple[float, float], initial: dict,
                 *, window: int, move: float, item_low_weight: float, seed: int, curriculum: bool = True,
                 item_weighting: str = "latest", group_size: int = 1):
        if not items:
            raise ConfigError("curriculum sampler: no items to sample from")
        self.groups: dict[tuple[str, int], list[dict]] = {}
        for it in items:
            self.groups.setdefault(_level_key(it), []).append(it)
        self.level_of = {it["id"]: _level_key(it) for it in items}
        self.majority: dict[tuple[str, int], float] = {}
        for it in items:
            self.majority.setdefault(_level_key(it), float((it.get("meta") or {}).get("fit_majority_rate", 0.0)))
        tasks = sorted({t for t, _ in self.groups})
        w = {t: float(mix.get(t, 0.0)) for t in tasks}
        if sum(w.values()) <= 0:
            w = {t: 1.0 for t in tasks}
        self.task_weights = {t: v / sum(w.values()) for t, v in w.items()}
        self.weights = {k: float(initial.get(k, 1.0)) for k in self.groups}
        self.band = (float(band[0]), float(band[1]))
        self.alpha = 2.0 / (window + 1.0)
        self.window, self.move, self.low_w, self.curriculum = window, move, item_low_weight, curriculum
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self.rate: dict[tuple[str, int], float] = {}
        self.since_move: dict[tuple[str, int], int] = {}
        self.item_rate: dict[str, float] = {}
        self.item_weighting, self.group_size = item_weighting, int(group_size)
        self.item_counts: dict[str, list[float]] = {}  # item id -> [successes, failures] over every answer seen
        self.moves: list[dict] = []
        self.draws = 0

    @classmethod
    def from_config(cls, cfg, items: list[dict]) -> "CurriculumSampler":
        """Initial weights from the fit: its chosen levels 1, the next harder level (items marked
        meta.fit_role "next" by rc1.training.fit) difficulty_fit.next_level_share; an item measured one by
        one (meta.fit_pass_rate, a custom task) has that rate as its latest."""
        fc = cfg.difficulty_fit
        initial = {_level_key(it): fc.next_level_share for it in items
                   if (it.get("meta") or {}).get("fit_role") == "next"}
        sampler = cls(items, dict(cfg.datasets.mix), fc.band, initial, window=fc.curriculum_window,
                      move=fc.curriculum_step, item_low_weight=fc.item_low_weight, seed=cfg.run.seed,
                      curriculum=fc.curriculum, item_weighting=fc.item_weighting,
                      group_size=cfg.strategy.num_generations)
        # an item the fit measured one by one (a custom task) starts from the base model's pass rate on it
        for it in items:
            meta = it.get("meta") or {}
            if "fit_pass_rate" in meta:
                rate = float(meta["fit_pass_rate"])
                sampler.item_rate[it["id"]] = rate
                sampler.item_counts[it["id"]] = [rate * fc.samples, (1 - rate) * fc.samples]
        return sampler

    def variance_weight(self, item_id: str) -> float:
        """E[p(1 - p)] / (1/4) under Beta(1 + successes, 1 + failures): 2/3 for an unseen item, towards 0 for one
        always or never solved, towards 1 for one solved half the time, as answers accumulate."""
        s, f = self.item_counts.get(item_id, (0.0, 0.0))
        a, b = 1.0 + s, 1.0 + f
        return 4.0 * a * b / ((a + b) * (a + b + 1.0))

    def item_weight(self, item_id: str) -> float:
        if self.item_weighting == "variance":
            return self.variance_weight(item_id)
        # prime-rl: an item whose latest group passed none or all of its answers counts item_low_weight
        return self.low_w if self.item_rate.get(item_id, 0.5) in (0.0, 1.0) else 1.0

    def _pick(self, choices: list, weights: list[float], rng):
        w = np.asarray(weights, dtype=float)
        if w.sum() <= 0:
            w = np.ones(len(choices))
        return choices[int(rng.choice(len(choices), p=w / w.sum()))]

    def next_batch(self, step: int, n: int, *, seed: int | None = None) -> list[dict]:
        rng = self.rng if seed is None else np.random.Generator(np.random.PCG64(seed))
        out = []
        tasks = sorted(self.task_weights)
        for _ in range(n):
            task = self._pick(tasks, [self.task_weights[t] for t in tasks], rng)
            keys = sorted(k for k in self.groups if k[0] == task)
            key = self._pick(keys, [self.weights[k] for k in keys], rng)
            items = self.groups[key]
            out.append(self._pick(items, [self.item_weight(it["id"]) for it in items], rng))
        if seed is None:
            self.draws += n
        return out

    def update(self, item_id: str, success_rate: float) -> None:
        """One rollout group's pass rate for an item: the item's latest rate, its level's running rate, and
        (curriculum) a move of weight when that running rate has left the band."""
        key = self.level_of.get(item_id)
        if key is None:
            return
        self.item_rate[item_id] = float(success_rate)
        counts = self.item_counts.setdefault(item_id, [0.0, 0.0])
        counts[0] += float(success_rate) * self.group_size
        counts[1] += (1.0 - float(success_rate)) * self.group_size
        prev = self.rate.get(key)
        self.rate[key] = float(success_rate) if prev is None else (1 - self.alpha) * prev + self.alpha * success_rate
        self.since_move[key] = self.since_move.get(key, 0) + 1
        if not self.curriculum or self.since_move[key] < self.window:
            return
        lo, hi = self.band
        levels = sorted(n for t, n in self.groups if t == key[0])
        i = levels.index(key[1])
        target = None
        skill = self.skill(key)
        if skill > hi and i + 1 < len(levels):
            target = (key[0], levels[i + 1])
        elif skill < lo and i > 0:
            target = (key[0], levels[i - 1])
        if target is None:
            return
        amount = self.move * self.weights[key]
        self.weights[key] -= amount
        self.weights[target] += amount
        self.since_move[key] = 0
        self.moves.append({"draws": self.draws, "from": list(key), "to": list(target), "amount": round(amount, 6),
                           "rate": round(self.rate[key], 4), "skill": round(skill, 4)})
        log.info("curriculum: %s level %d running pass rate %.2f (skill %.2f beyond its majority-class rate %.2f) is "
                 "%s the band [%g, %g]: %.3f of its weight -> level %d", key[0], key[1], self.rate[key], skill,
                 self.majority.get(key, 0.0), "above" if target[1] > key[1] else "below", lo, hi, amount, target[1])

    def skill(self, key: tuple[str, int]) -> float:
        """A level's running pass rate beyond its majority-class rate m: (rate - m) / (1 - m) (rc1.training.fit)."""
        from rc1.training.fit import skill

        return skill(self.rate[key], self.majority.get(key, 0.0))

    def state_dict(self) -> dict:
        enc = lambda d: {f"{t}|{n}": v for (t, n), v in d.items()}  # noqa: E731
        return {"rng": self.rng.bit_generator.state, "weights": enc(self.weights), "rate": enc(self.rate),
                "since_move": enc(self.since_move), "item_rate": dict(self.item_rate),
                "item_counts": {k: list(v) for k, v in self.item_counts.items()}, "moves": list(self.moves),
                "draws": self.draws}

    def load_state_dict(self, state: dict) -> None:
        dec = lambda d: {(k.rsplit("|", 1)[0], int(k.rsplit("|", 1)[1])): v for k, v in d.items()}  # noqa: E731
        self.rng.bit_generator.state = state["rng"]
        self.weights = {k: float(v) for k, v in dec(state["weights"]).items()}
        self.rate = {k: float(v) for k, v in dec(state["rate"]).items()}
        self.since_move = {k: int(v) for k, v in dec(state["since_move"]).items()}
        self.item_rate = {k: float(v) for k, v in state["item_rate"].items()}
        self.item_counts = {k: [float(x) for x in v] for k, v in state.get("item_counts", {}).items()}
        self.moves = list(state["moves"])
        self.draws = int(state["draws"])

    def level_mix(self) -> dict[tuple[str, int], float]:
        """Each level's share of its task's draws (the weights normalised per task)."""
        out = {}
        for task in self.task_weights:
            keys = [k for k in self.groups if k[0] == task]
            total = sum(self.weights[k] for k in keys) or 1.0
            out.update({k: self.weights[k] / total for k in keys})
        return out

    def stats(self) -> dict:
        out: dict = {"sampler/draws": self.draws, "sampler/items_seen": len(self.item_rate),
                     "curriculum/moves": len(self.moves)}
        for (task, n), share in sorted(self.level_mix().items()):
            out[f"curriculum/{task}/L{n}/weight"] = round(share, 4)
            if (task, n) in self.rate:
                out[f"curriculum/{task}/L{n}/pass_rate"] = round(self.rate[(task, n)], 4)
                out[f"curriculum/{task}/L{n}/skill"] = round(self.skill((task, n)), 4)
        return out
