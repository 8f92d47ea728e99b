"""The names a run config may use, and which engine runs which strategy: ONE table, read by the schema
(its Literal types and its validation), by the engine/strategy/callback registries (which class a name
loads, imported lazily) and by every error message about them.

    engine   runs (strategy: why not)
    pure_pt  grpo ppo dpo rloo sft
    trl      grpo rloo      (ppo: TRL 1.x has no PPOTrainer; dpo, sft: not wired to TRL in rc1)

Pure data: importing this module imports nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class EngineSpec:
    cls: str                                # "module:Class" of the Engine
    recipe: str                             # "module:Class" of the recipe that drives it
    strategies: tuple[str, ...]             # strategies it runs
    refused: dict[str, str] = field(default_factory=dict)   # strategy -> why this engine does not run it
    accumulates_multi_epoch: bool = True    # can combine strategy epochs > 1 with gradient accumulation


STRATEGIES: dict[str, str] = {
    "grpo": "rc1.strategies.grpo:GRPOStrategy",
    "rloo": "rc1.strategies.rloo:RLOOStrategy",
    "ppo": "rc1.strategies.ppo:PPOStrategy",
    "dpo": "rc1.strategies.dpo:DPOStrategy",
    "sft": "rc1.strategies.sft:SFTStrategy",
}

ENGINES: dict[str, EngineSpec] = {
    "pure_pt": EngineSpec(
        cls="rc1.engines.pure_pt:PurePTEngine", recipe="rc1.training.recipe:TrainingRecipe",
        strategies=("grpo", "ppo", "dpo", "rloo", "sft")),
    "trl": EngineSpec(
        cls="rc1.engines.trl_engine:TRLEngine", recipe="rc1.training.trl_recipe:TRLRecipe",
        strategies=("grpo", "rloo"),
        refused={
            "ppo": "TRL 1.x has no PPOTrainer (it was deleted), so 'trl' + 'ppo' cannot run; use engine.name: "
                   "pure_pt with strategy.name: ppo",
            "dpo": "rc1 does not wire TRL's offline DPOTrainer to online rollouts; use engine.name: pure_pt "
                   "with strategy.name: dpo",
            "sft": "rc1 does not wire TRL's SFTTrainer; use engine.name: pure_pt with strategy.name: sft",
        }),
}
# The seeds' name for "PPO through TRL": accepted by the schema only to be refused with the reason.
SEED_ALIASES: dict[str, str] = {"trl_ppo": "TRL 1.x has no PPOTrainer (it was deleted); use engine.name: pure_pt "
                                           "with strategy.name: ppo"}

CALLBACKS: dict[str, str] = {
    "lr_schedule": "rc1.callbacks.lr_schedule:LRScheduleCallback",
    "grad_clip": "rc1.callbacks.lr_schedule:GradClipCallback",
    "eval_shadow": "rc1.callbacks.eval_shadow:EvalShadowCallback",
    "early_stop": "rc1.callbacks.early_stop:EarlyStopCallback",
    "checkpoint": "rc1.callbacks.checkpoint:CheckpointCallback",
    "tensorboard": "rc1.callbacks.logging:TensorBoardCallback",
    "logging": "rc1.callbacks.logging:LoggingCallback",
}
# Hooks run in this order: metrics are complete (eval, lr) before the checkpoint and the log line.
CALLBACK_ORDER = ("lr_schedule", "grad_clip", "eval_shadow", "early_stop", "checkpoint", "tensorboard", "logging")


def engine_strategy_error(engine: str, strategy: str) -> str | None:
    """Why `engine` cannot run `strategy`, or None when it can."""
    if engine in SEED_ALIASES:
        return f"engine {engine!r}: {SEED_ALIASES[engine]}"
    spec = ENGINES.get(engine)
    if spec is None:
        return f"unknown engine {engine!r}; known: {sorted(ENGINES)}"
    if strategy not in STRATEGIES:
        return f"unknown strategy {strategy!r}; known: {sorted(STRATEGIES)}"
    if strategy in spec.strategies:
        return None
    why = spec.refused.get(strategy, "not supported")
    return f"engine {engine!r} does not run strategy {strategy!r} (it runs {list(spec.strategies)}): {why}"


def load(spec: str):
    """The object a "module:Name" string names (imported now)."""
    import importlib

    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)
