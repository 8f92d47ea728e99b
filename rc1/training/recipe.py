"""The training recipe of the pure PyTorch engine: one class that sets up a run, trains it, checkpoints
it and cleans up.

Usage (what `rc1 train` does)::

    recipe = make_recipe(ws, cfg, config_path="configs/local.yaml", resume="latest")   # rc1.training.base
    recipe.setup()
    try:
        reason = recipe.train()
    finally:
        recipe.cleanup()

The loop, straight through (`train`): draw the step's prompts (the priority sampler), let the
strategy roll them out and score them, replace groups without a correctness signal by fresh draws
(DAPO's dynamic sampling, at most strategy.resample_zero_signal per step), let the strategy make
its StepPlan, back-propagate it (scaled 1/gradient_accumulation), and step the optimizer when the
accumulation window closes — then run the plan's further epochs over the window (PPO's
ppo_epochs), each ending in an optimizer step. Then: sampler feedback, monitors (reward/success
divergence, KL vs target_kl), callbacks (eval, checkpoint, logging).

Supports: strategies grpo, ppo, dpo, rloo, sft; gradient accumulation (with multi-epoch strategies
too: a stop request or the end of the run finishes the open window first); AMP where the device has
it; exact resume from rc1 checkpoints, also mid-window for single-epoch strategies.

Assumes: the caller has checked the machine state and ticket (rc1.cli.train_cmd does), the
workspace holds the training data (seed_pool or data.train_path) and the reward weights.

Raises: ConfigError (bad config, missing data, `--max-steps` beyond `steps`), CheckpointError (a
corrupt or config-mismatched checkpoint on resume), VerifierError (a task's verifier failed on an
item; the run checkpoints first), and any error from the model or the rollouts, unchanged (the CLI
turns those into FATAL + reports/ERROR_<ts>.json).

Steps: `self.step` counts completed micro-steps (one batch of prompts_per_step prompts each); the
optimizer updates every run.gradient_accumulation steps (times the plan's epochs). Metrics line
`step` = completed steps.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from rc1.engines.contract import Batch, StepPlan
from rc1.runtime import checkpoint as ckpt
from rc1.rewards.verifiers import VerifierError
from rc1.runtime.errors import ConfigError
from rc1.runtime.fatal import CONTEXT
from rc1.training.base import RecipeBase, rollout_seed

log = logging.getLogger("rc1.train")


class TrainingRecipe(RecipeBase):
    """Train a policy with the pure_pt engine and the strategy named in the config. See the module docstring."""

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        from rc1.engines.base import engine_class
        from rc1.strategies.base import strategy_class

        cfg = self.cfg
        self.setup_run()
        self.engine = engine_class(cfg.engine.name)(self.ws, reward_model=self.reward_model,
                                                    model_loader=self.model_loader)
        self.engine.setup(cfg)
        self.strategy = strategy_class(cfg.strategy.name)(cfg, self.reward_model)
        self.strategy.attach(self.engine.policy())
        self.accum_position = 0          # micro-steps back-propagated in the open accumulation window
        self.window: list[StepPlan] = []  # that window's plans, kept while further epochs remain
        if self.resume:
            self._load(ckpt.resolve_resume(self.ws, self.run_dir, self.resume, config_hash=self.resume_hash,
                                           config_dump=self.resume_dump, fallback=self.resume_fallback))
        log.info("run %s (seed %d, index %d): engine=%s strategy=%s steps %d -> %d, data %s", cfg.run.name,
                 cfg.run.seed, self.seed_index, cfg.engine.name, cfg.strategy.name, self.step, self.max_steps,
                 self.data_info)

    def _load(self, path: Path) -> None:
        from safetensors.torch import load_file

        meta = ckpt.read_meta(path)
        state = ckpt.torch_load(path / ckpt.TRAINER_STATE_FILE)
        engine_state = dict(state[ckpt.KEY_ENGINE])
        weights_file = meta[ckpt.META_WEIGHTS]
        if weights_file:
            engine_state[ckpt.KEY_WEIGHTS] = load_file(str(path / weights_file))
        self.engine.load_state_dict(engine_state)
        self.strategy.load_state_dict(state[ckpt.KEY_STRATEGY])
        for cb in self.callbacks:
            if hasattr(cb, "load_state_dict") and type(cb).__name__ in state.get(ckpt.KEY_CALLBACKS, {}):
                cb.load_state_dict(state[ckpt.KEY_CALLBACKS][type(cb).__name__])
        recipe_state = state.get(ckpt.KEY_RECIPE, {})
        self.accum_position = int(recipe_state.get("accum_position", 0))
        self.load_monitor_state(recipe_state.get("monitors", {}))
        self.sampler.load_state_dict(meta[ckpt.META_SAMPLER])
        ckpt.restore_rng(state[ckpt.KEY_RNG])
        self.step = self.last_saved_step = int(meta[ckpt.META_STEP])
        self.resumed_from = path
        if self.step > self.max_steps:
            raise ConfigError(f"checkpoint {self.ws.rel(path)} is at step {self.step}, beyond run.max_steps "
                              f"{self.max_steps}; pass a larger --max-steps")
        log.info("resumed from %s at step %d", self.ws.rel(path), self.step)

    # ------------------------------------------------------------------ train
    def train(self) -> str:
        """Run until max_steps or a stop request; returns why it ended ('completed', 'operator', ...)."""
        cfg = self.cfg
        accum = cfg.run.gradient_accumulation
        for cb in self.callbacks:
            cb.on_train_start(self)
        while self.step < self.max_steps and (self.stop_reason is None or self.window):
            t0 = time.perf_counter()
            CONTEXT["step"] = self.step
            batch = Batch(self.step, tuple(self.sampler.next_batch(self.step, cfg.strategy.prompts_per_step)),
                          rollout_seed(cfg.run.seed, self.step))
            try:
                rollout = self.strategy.rollout(batch)
                record: dict = {"step": self.step + 1}
                if rollout is not None:
                    rollout, redraw_stats = self.resample_zero_signal(batch, rollout)
                    record.update(redraw_stats)
            except VerifierError as exc:  # the task's verifier failed: keep what trained, stop, name the item
                if self.window:
                    raise
                log.error("stopping: %s", exc.message)
                self.stop_reason = "verifier_error"
                self.finish()
                raise
            plan = self.strategy.plan(batch, rollout)
            record.update(plan.metrics)
            t_rollout = time.perf_counter() - t0
            if self.step == 0 and rollout is not None and self.resumed_from is None:
                self.zero_signal_guard(rollout.stats, len(rollout.rewards) // rollout.group_size, rollout.group_size)
            record.update(self.engine.backward(plan, scale=1.0 / accum))
            self.accum_position += 1
            if plan.epochs > 1:
                self.window.append(plan)
            if self.accum_position >= accum:
                record.update(self.close_window(accum))
            for item_id, rate in (rollout.group_success().items() if rollout is not None else ()):
                self.sampler.update(item_id, rate)
            self.step += 1
            self.steps_this_process += 1
            record["lr"] = self.engine.current_lr()
            record["accum_position"] = self.accum_position
            record["sec_per_step"] = time.perf_counter() - t0
            record["time/rollout_s"] = t_rollout  # generation + scoring + reference pass
            record.update(self.sampler.stats())
            self.watch(record, self.strategy)
            self.on_step_end(record)
        if self.window:  # the run ended inside a multi-epoch window: finish its epochs on what it holds
            self.close_window(accum)
        return self.finish()

    def close_window(self, accum: int) -> dict:
        """End of an accumulation window: optimizer step, then the plans' further epochs (each one step)."""
        metrics = self.engine.optimizer_step()
        for _ in range(1, max((p.epochs for p in self.window), default=1)):
            for p in self.window:
                metrics.update(self.engine.backward(p, scale=1.0 / accum))
            metrics.update(self.engine.optimizer_step())
        self.window.clear()
        self.accum_position = 0
        return metrics

    def resample_zero_signal(self, batch: Batch, rollout):
        """Replace groups whose successes are all equal (no correctness signal) by fresh draws, at most
        strategy.resample_zero_signal per step (DAPO's dynamic sampling). Deterministic per step."""
        from rc1.strategies.common import merge_groups, no_signal_groups

        budget = self.cfg.strategy.resample_zero_signal
        stale = no_signal_groups(rollout)
        stats = {"sampler/no_signal_groups_drawn": len(stale), "sampler/redraws": 0}
        attempt = 0
        while stale and attempt < budget:
            attempt += 1
            item = self.sampler.next_batch(batch.step, 1)
            fresh = self.strategy.rollout(Batch(batch.step, tuple(item), rollout_seed(self.cfg.run.seed, batch.step,
                                                                                       attempt)))
            for item_id, rate in fresh.group_success().items():
                self.sampler.update(item_id, rate)
            if not no_signal_groups(fresh):
                rollout = merge_groups(rollout, stale.pop(0), fresh)
        stats["sampler/redraws"] = attempt
        return rollout, stats

    def finish(self) -> str:
        reason = self.stop_reason or ("completed" if self.step >= self.max_steps else "interrupted")
        if self.checkpoints and self.last_saved_step != self.step:
            self.save_checkpoint(reason=reason)
        for cb in self.callbacks:
            cb.on_train_end(self)
        self.write_end(reason)
        return reason

    # ------------------------------------------------------------------ checkpoint
    def save_checkpoint(self, reason: str = "scheduled") -> Path:
        if not self.checkpoints:
            raise RuntimeError("this recipe was built with checkpoints=False")
        if self.window:
            raise RuntimeError("cannot checkpoint inside a multi-epoch accumulation window")
        from safetensors.torch import save_file

        engine_state = dict(self.engine.state_dict())
        weights = engine_state.pop(ckpt.KEY_WEIGHTS, None)
        weights_file = engine_state.pop(ckpt.KEY_WEIGHTS_FILE, None)
        trainer_state = {
            ckpt.KEY_ENGINE: engine_state,
            ckpt.KEY_STRATEGY: self.strategy.state_dict(),
            ckpt.KEY_RNG: ckpt.capture_rng(),
            ckpt.KEY_CALLBACKS: {type(cb).__name__: cb.state_dict() for cb in self.callbacks
                                 if hasattr(cb, "state_dict")},
            ckpt.KEY_RECIPE: {"accum_position": self.accum_position, "monitors": self.monitor_state()},
        }
        writers = {ckpt.TRAINER_STATE_FILE: ckpt.torch_writer(trainer_state)}
        if weights is not None:
            writers[weights_file] = lambda p: save_file(weights, str(p), metadata={"format": "pt"})
        meta = {ckpt.META_RUN: self.cfg.run.name, ckpt.META_CONFIG_HASH: self.resume_hash,
                ckpt.META_CONFIG: self.resume_dump, ckpt.META_SAMPLER: self.sampler.state_dict(),
                ckpt.META_WEIGHTS: weights_file, ckpt.META_STOP_REASON: reason,
                "engine": self.cfg.engine.name, "strategy": self.cfg.strategy.name, "max_steps": self.max_steps,
                "seed": self.cfg.run.seed, "seed_index": self.seed_index}
        path = ckpt.write_checkpoint(self.ws, self.run_dir, self.step, writers, meta, keep_last=self.cfg.run.keep_last)
        self.last_saved_step = self.step
        log.info("checkpoint %s (%s)", self.ws.rel(path), reason)
        return path

    @property
    def can_checkpoint_now(self) -> bool:
        """False inside a multi-epoch accumulation window (its plans are not part of a checkpoint)."""
        return not self.window
