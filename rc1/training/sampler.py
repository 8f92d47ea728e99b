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
    """(seed-pool items, other items, provenance). Falls back to data.train_path with a warning."""
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
