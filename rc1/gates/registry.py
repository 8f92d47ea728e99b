"""Which gate areas make up each gate, and how an area's module is found (lazily).

An area whose module is missing, or that raises, FAILS with the reason: it never passes.
"""

from __future__ import annotations

import importlib
import logging
import traceback

from rc1.gates.base import Check, GateContext, GateResult

log = logging.getLogger("rc1.gates")

# area name -> module path; each module defines evaluate(ctx) -> GateResult
AREAS: dict[str, str] = {
    "run_config": "rc1.gates.run_config",
    "resources": "rc1.gates.resources",
    "pool": "rc1.gates.pool",
    "difficulty": "rc1.gates.difficulty",
    "reward_weights": "rc1.gates.reward_weights",
    "overclar_penalty": "rc1.gates.overclar_penalty",
    "scorer": "rc1.gates.scorer",
    "shadow_run": "rc1.gates.shadow_run",
    "learning_signal": "rc1.gates.learning_signal",
    "difficulty_fit": "rc1.gates.difficulty_fit",
    "training_start": "rc1.gates.training_start",
    "training_done": "rc1.gates.training_done",
    "rc1_eval": "rc1.gates.rc1_eval",
    "scale": "rc1.gates.scale",
}

# gate name -> the areas it runs, in order
GATES: dict[str, tuple[str, ...]] = {
    "round1": ("run_config", "resources", "pool", "difficulty", "reward_weights", "overclar_penalty", "scorer"),
    "round2": ("run_config", "resources", "pool", "difficulty", "reward_weights", "overclar_penalty", "scorer",
               "shadow_run", "difficulty_fit", "learning_signal"),
    "training_start": ("training_start",),
    "training_done": ("training_done",),
    "rc1_eval": ("rc1_eval",),
    "scale_1000": ("scale",),
    "scale_5000": ("scale",),
}


def run_area(area: str, ctx: GateContext) -> GateResult:
    module_path = AREAS[area]
    try:
        module = importlib.import_module(module_path)
    except ImportError as exc:
        why = (f"gate code {module_path} does not exist yet" if getattr(exc, "name", None) == module_path
               else f"{module_path} cannot be imported ({exc})")
        return GateResult(area, [Check.unavailable(area, why)])
    try:
        result = module.evaluate(ctx)
    except Exception as exc:  # a crashing check is a failing check, with the reason
        log.error("gate area %s crashed:\n%s", area, traceback.format_exc())
        return GateResult(area, [Check(area, None, "runs", False, f"crashed: {exc.__class__.__name__}: {exc}")])
    if not result.checks:
        result.checks.append(Check(area, None, "at least one check", False, "area returned no checks"))
    result.not_measurable_blocks = ctx.gates.not_measurable == "block"
    if result.warnings:
        result.notes.append(f"{len(result.warnings)} check(s) not measurable: allowed by this profile's "
                            f"`not_measurable: warn` ({ctx.gates.profile}); production blocks on them")
    return result


def run_gate(gate: str, ctx: GateContext) -> list[GateResult]:
    if gate not in GATES:
        raise KeyError(f"unknown gate {gate!r}; known: {sorted(GATES)}")
    results = []
    for area in GATES[gate]:
        ctx.progress(f"{gate}: {area}")
        results.append(run_area(area, ctx))
    return results
