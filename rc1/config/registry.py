"""The names a run config may use, and which engine runs which strategy: ONE table, read by the schema
(its Literal types and its validation), by the engine/strategy/callback registries (which class a name
loads, imported lazily) and by every error message about them.

    engine   runs (strategy: why not)                                             multi-turn  adapts KL  KL at beta 0  top-p
    pure_pt  grpo ppo dpo rloo sft                                                 yes         yes        yes           yes
    trl      grpo rloo      (ppo: TRL 1.x has no PPOTrainer; dpo, sft: not wired)  no          no         no            no

multi-turn: the engine rolls out multi-turn episodes (strategy.multi_turn split_turns means something);
adapts KL: monitor.kl_control adaptive can change its KL coefficient during the run; KL at beta 0: it
measures the KL toward the reference when strategy.kl_coef is 0 (target_kl needs a measured KL); top-p:
its training log-probs are scored under the top-p nucleus the sampler drew from (TRL scores them under
softmax(logits / temperature) only, so model.top_p < 1 would make its ratios wrong).

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
    multi_turn: bool = True                 # rolls out multi-turn episodes
    adapts_kl: bool = True                  # its KL coefficient can be adapted during the run
    kl_without_penalty: bool = True         # measures the KL toward the reference when kl_coef is 0
    scores_top_p: bool = True               # training log-probs use the sampler's top-p nucleus
    step_is_update: bool = False            # a run step is an optimizer update (accumulation inside it),
                                            # not one micro-batch


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
        strategies=("grpo", "rloo"), multi_turn=False, adapts_kl=False, kl_without_penalty=False, scores_top_p=False,
        step_is_update=True,
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
    "eval_dev": "rc1.callbacks.eval_dev:EvalDevCallback",
    "early_stop": "rc1.callbacks.early_stop:EarlyStopCallback",
    "checkpoint": "rc1.callbacks.checkpoint:CheckpointCallback",
    "tensorboard": "rc1.callbacks.logging:TensorBoardCallback",
    "logging": "rc1.callbacks.logging:LoggingCallback",
}
# Hooks run in this order: metrics are complete (eval, lr) before the checkpoint and the log line.
CALLBACK_ORDER = ("lr_schedule", "grad_clip", "eval_dev", "early_stop", "checkpoint", "tensorboard", "logging")
# Older names still accepted: eval_shadow evaluated the held-out set; it is the dev-split eval now.
CALLBACK_ALIASES: dict[str, str] = {"eval_shadow": "eval_dev"}


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


def engine_settings_error(engine: str, *, multi_turn: str, target_kl: float | None, kl_control: str,
                          kl_coef: float, top_p: float = 1.0, epochs: int = 1,
                          gradient_accumulation: int = 1) -> str | None:
    """Why `engine` cannot run with these settings (the table's yes/no columns), or None when it can."""
    spec = ENGINES.get(engine)
    if spec is None:
        return None  # an unknown engine is engine_strategy_error's to report
    if epochs > 1 and gradient_accumulation > 1 and not spec.accumulates_multi_epoch:
        return (f"engine {engine!r} cannot combine strategy.ppo_epochs {epochs} with run.gradient_accumulation "
                f"{gradient_accumulation}; set one of them to 1")
    if multi_turn == "split_turns" and not spec.multi_turn:
        return (f"engine {engine!r} rolls out single-turn episodes (TRL generates one assistant turn), so "
                "strategy.multi_turn: split_turns cannot apply; use engine.name: pure_pt, or multi_turn: auto")
    if target_kl is not None and kl_control in ("adaptive", "adaptive_sign") and not spec.adapts_kl:
        return (f"engine {engine!r} keeps its KL coefficient fixed inside its trainer, so target_kl cannot be held "
                f"by monitor.kl_control: {kl_control}; use kl_control: none or early_stop (or engine.name: pure_pt)")
    if top_p < 1.0 and not spec.scores_top_p:
        return (f"engine {engine!r} scores training log-probs without the top-p nucleus its sampler draws from, so "
                "with model.top_p < 1 its ratios and KL would be wrong; use model.top_p: 1 (or engine.name: pure_pt)")
    # kl_coef 0 on an engine that then logs no KL (TRL) is fine: the training_done gate's drift bound measures the
    # trained policy after training (rc1.eval.drift), whatever the engine logged
    return None


def load(spec: str):
    """The object a "module:Name" string names (imported now)."""
    import importlib

    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)
