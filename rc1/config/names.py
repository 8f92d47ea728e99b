"""The names configs use (built-in tasks, verifiers, buckets, reward dimensions) and the checks on them.

The train config (rc1.config.schema) and the gates config (rc1.config.gates) validate with these checks, and
the data commands judge a `--mix` flag with the same `check_mix`: one rule, one message.
"""

from __future__ import annotations

import re
from typing import Iterable

TASKS = ("hotpotqa", "strategyqa", "gsm8k")   # the built-in tasks; custom ones are declared in datasets.tasks
TASK_NAME = r"^[a-z][a-z0-9_]{0,39}$"
# Verifier names; rc1.envs.verifiers implements them (a test keeps the two in step). The built-in
# tasks are instances of the named verifiers.
VERIFIER_NAMES = ("numeric", "exact", "f1", "yes_no", "choice")
# Levels of each built-in task's difficulty ladder (0 .. n-1; what each level is: rc1.data.ladder.LADDER).
LADDER_LEVELS = {"gsm8k": 8, "hotpotqa": 6, "strategyqa": 6}
TASK_VERIFIERS = {"gsm8k": "numeric", "hotpotqa": "f1", "strategyqa": "yes_no"}
PYTHON_VERIFIER = re.compile(r"^python:([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*):([A-Za-z_]\w*)$")
BUCKETS = ("easy", "medium", "hard")
DEFAULT_DIFFICULTY_TARGET = {"easy": 0.25, "medium": 0.45, "hard": 0.30}  # bucket shares of a balanced pool
REWARD_DIMENSIONS = ("correctness", "reasoning", "grounding", "clarity", "conciseness", "format",
                     "clarification")
# What hybrid scoring asks the judge: the dimensions no rule can verify (correctness comes from the verifiers,
# format and conciseness are counted).
RUBRIC_DIMENSIONS = ("reasoning", "grounding", "clarity", "clarification")
# The built-in mix: datasets.mix and the gates' pool.mix / run_config.mix when a config sets none.
DEFAULT_MIX = {"hotpotqa": 0.45, "strategyqa": 0.30, "gsm8k": 0.25}


def verifier_problem(spec: str) -> str | None:
    """Why `spec` is not a verifier name (syntax only: nothing is imported here), or None."""
    if spec in VERIFIER_NAMES or PYTHON_VERIFIER.match(spec):
        return None
    if spec.startswith("python:"):
        return f"{spec!r} is not python:MODULE:FUNCTION (e.g. python:my_verifiers:check)"
    return f"unknown verifier {spec!r}; named verifiers: {', '.join(VERIFIER_NAMES)}, or python:MODULE:FUNCTION"


def task_name_problem(name: str) -> str | None:
    """Why `name` cannot name a custom task, or None."""
    if name in TASKS:
        return f"{name!r} is a built-in task; name a custom task otherwise"
    if name in (*BUCKETS, "all"):  # report keys: success_<bucket>, clarification["all"]
        return f"task name {name!r} is reserved; choose another"
    if not re.match(TASK_NAME, name):
        return f"task name {name!r}: use lowercase letters, digits and _ (starting with a letter, at most 40)"
    return None


def known_dimensions(by_dimension: dict) -> dict:
    """`by_dimension` unchanged when every key is a reward dimension; else ValueError naming the unknown ones."""
    unknown = sorted(set(by_dimension) - set(REWARD_DIMENSIONS))
    if unknown:
        raise ValueError(f"unknown reward dimension(s) {unknown}; known: {list(REWARD_DIMENSIONS)}")
    return by_dimension


def task_order(names: Iterable[str]) -> list[str]:
    """Task names in report order: the built-in tasks first (in TASKS order), then custom ones sorted."""
    names = set(names)
    return [t for t in TASKS if t in names] + sorted(names - set(TASKS))


def check_mix(mix: dict[str, float], custom: Iterable[str] | None = (),
              declared: str | None = "a custom task is declared under datasets.tasks of the run config",
              ) -> dict[str, float]:
    """Weights >= 0 summing to 1 over known tasks, else ValueError. `custom=None`: the custom tasks failed
    validation themselves (already reported), so names are not judged. `declared`: where a custom task comes
    from, for the unknown-task message."""
    known = task_order([*TASKS, *(custom or ())])
    unknown = sorted(set(mix) - set(known))
    if unknown and custom is not None:
        raise ValueError(f"unknown task(s) {unknown}; known: {known}" + (f" ({declared})" if declared else ""))
    if not mix:
        raise ValueError("mix is empty")
    if any(v < 0 for v in mix.values()):
        raise ValueError("mix weights must be >= 0")
    total = sum(mix.values())
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"mix must sum to 1 (got {total:.6g})")
    return mix
