"""Priority sampling: difficulty weights, the low-performer cap, the seed-ratio schedule, exact state."""

from __future__ import annotations

from collections import Counter

from rc1.training.sampler import LOW_PERF_MIN_TRIES, PrioritySampler
from tests.helpers.workspace import arithmetic_items


def _items(n, prefix, bucket=None):
    items = arithmetic_items(n, prefix=prefix)
    if bucket:
        for it in items:
            it["bucket"] = bucket
    return items


def test_difficulty_weights_and_seed_ratio_schedule():
    seed = _items(300, "s")  # buckets cycle easy/medium/hard
    other = _items(60, "o")
    s = PrioritySampler(seed, other, {"easy": 0.2, "medium": 0.4, "hard": 0.4}, 0.3, [(0, 1.0), (100, 0.0)], seed=1)
    early = s.next_batch(0, 3000)
    buckets = Counter(it["bucket"] for it in early)
    assert abs(buckets["easy"] / 3000 - 0.2) < 0.03 and abs(buckets["hard"] / 3000 - 0.4) < 0.03
    assert all(it["id"].startswith("s") for it in early)          # ratio 1.0: seed pool only
    late = s.next_batch(150, 500)
    assert all(it["id"].startswith("o") for it in late)           # ratio 0.0 from step 100
    assert s.seed_ratio(99) == 1.0 and s.seed_ratio(100) == 0.0


def test_low_performers_are_capped_not_dropped():
    items = _items(10, "m", bucket="medium")
    s = PrioritySampler(items, [], {"medium": 1.0}, 0.1, [(0, 1.0)], seed=2)
    low = {it["id"] for it in items[:5]}
    for _ in range(LOW_PERF_MIN_TRIES):
        for it in items:
            s.update(it["id"], 0.0 if it["id"] in low else 1.0)
    draws = s.next_batch(0, 4000)
    share = sum(it["id"] in low for it in draws) / len(draws)
    assert 0.07 < share < 0.13   # capped at 10 % (uncapped it would be 50 %)
    assert s.stats()["sampler/low_perf_items"] == 5


def test_state_roundtrip_draws_identically():
    items = _items(40, "x")
    a = PrioritySampler(items, [], {"easy": 0.2, "medium": 0.4, "hard": 0.4}, 0.3, [(0, 1.0)], seed=3)
    a.next_batch(0, 7)
    a.update(items[0]["id"], 0.0)
    state = a.state_dict()
    b = PrioritySampler(items, [], {"easy": 0.2, "medium": 0.4, "hard": 0.4}, 0.3, [(0, 1.0)], seed=999)
    b.load_state_dict(state)
    assert [it["id"] for it in a.next_batch(1, 20)] == [it["id"] for it in b.next_batch(1, 20)]
