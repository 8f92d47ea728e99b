"""Which pool checks and difficulty metrics apply to which items.

Items of a custom task (rc1.data.generic) legitimately lack some fields the built-in tasks have:
no template (so no role or style), no reference plan (so no planned turns or tool hops), often no
supporting text (so no clue overlap), and no previous (v1) pool. A check that needs such a field
is `not applicable`, with the reason: it never passes silently and never blocks. Each function
here returns that reason, or None when the check applies; the pool and difficulty code call them
and measure the check over the items it applies to.

(Here in rc1.data rather than rc1.gates: the data reports call it, and the data layer does not
import the gates.)
"""

from __future__ import annotations

from rc1.config.names import BUCKETS, TASKS

NO_PLAN = "no reference plan or transcript (a task file gives none)"
NO_SUPPORT = "no supporting text (clue overlap compares the question with it)"


def has_template(item: dict) -> bool:
    return item.get("template") is not None


def has_plan(item: dict) -> bool:
    meta = item.get("meta") or {}
    return bool(meta.get("plan") or meta.get("transcript"))


def has_supporting(item: dict) -> bool:
    return any(str(s).strip() for s in item.get("supporting") or [])


def declared_bucket(item: dict) -> str | None:
    """A custom task's own difficulty (meta.difficulty, or meta.bucket), which rc1 uses instead of a
    measured bucket. Built-in items are always measured."""
    if item.get("task") in TASKS:
        return None
    meta = item.get("meta") or {}
    for key in ("difficulty", "bucket"):
        if meta.get(key) in BUCKETS:
            return meta[key]
    return None


def metrics_not_applicable(item: dict) -> dict[str, str]:
    """Difficulty metrics that say nothing about this item -> why. They neither vote on its bucket nor
    enter the difficulty checks."""
    out = {}
    if not has_plan(item):
        out.update(turns=NO_PLAN, tool_hops=NO_PLAN, needs_clarification=NO_PLAN)
    if not has_supporting(item):
        out["clue_overlap"] = NO_SUPPORT
    return out


def metric_applies(item: dict, key: str) -> bool:
    """Whether difficulty metric `key` of an item carrying its metrics (a metrics-file item) was measured."""
    return key not in ((item.get("difficulty") or {}).get("not_applicable") or {})


# ----------------------------------------------------------------------------- pool checks
def roles_styles(items: list[dict]) -> str | None:
    if any(has_template(it) for it in items):
        return None
    return "no item is rendered from a template (a custom task's items bring their own prompts): no roles or styles"


def kl_vs_v1(items: list[dict]) -> str | None:
    """The v1 generator builds the built-in tasks only: a pool of custom tasks has no previous pool
    unless the user gives one (pool.v1_pool)."""
    if any(it.get("task") in TASKS for it in items):
        return None
    return ("the pool holds custom tasks only and no previous pool of them was given (set pool.v1_pool to an "
            "earlier version of this pool to measure it)")


def generator_design(items: list[dict]) -> str | None:
    """distinct-2 and the minimum length: thresholds set for the items rc1's generators write (templated
    prompts of >= 64 tokens in many phrasings). A pool of custom tasks only is what the user wrote; its
    duplicates, leaks and maximum length are still measured."""
    if not items or any(it.get("task") in TASKS for it in items):
        return None
    return ("the pool holds custom tasks only: this threshold measures how rc1's generators write items (their "
            "templates and lengths), not a task file's items; duplicates, leaks and the maximum length are measured")


def difficulty_shares(task: str) -> str | None:
    """hard/easy shares: the seeds' difficulty mix of the generated pool; a custom task's buckets come from its
    labels or measured pass rates, whose shares are the task's own."""
    if task in TASKS:
        return None
    return (f"{task} is a custom task: the hard/easy share bounds describe the mix rc1's generators are built to; "
            "whether its buckets track difficulty is the base-model outcome check")


def v1_required(config) -> bool:
    """Whether the pool gate needs a v1 pool file: a built-in task in the mix, or pool.v1_pool named."""
    if config is None:
        return True
    return bool(config.pool.v1_pool) or any(t in TASKS and w > 0 for t, w in config.datasets.mix.items())


# ----------------------------------------------------------------------------- difficulty checks
def planned(items: list[dict]) -> str | None:
    """turns / tool_hops bounds: measured on items with a reference plan or transcript."""
    return None if any(metric_applies(it, "turns") for it in items) else \
        "no item has a reference plan or transcript (a task file gives none)"


def clue_overlap(items: list[dict]) -> str | None:
    return None if any(metric_applies(it, "clue_overlap") for it in items) else \
        "no item has supporting text (clue overlap compares the question with it)"


def na_check(name: str, why: str) -> dict:
    """A report's not-applicable check (the dict form of rc1.gates.base.Check.not_applicable)."""
    return {"name": name, "measured": None, "threshold": "applicable", "passed": True, "status": "not applicable",
            "detail": f"not applicable: {why}"}
