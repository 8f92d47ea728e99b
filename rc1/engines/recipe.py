"""The training recipe: one class that sets up a run, trains it, checkpoints it and cleans up.

Usage (what `rc1 train` does)::

    recipe = TrainingRecipe(ws, cfg, config_path="configs/local.yaml", resume="latest")
    recipe.setup()
    try:
        reason = recipe.train()
    finally:
        recipe.cleanup()
"""

from __future__ import annotations

import json
import logging
import random
import time
from pathlib import Path

from rc1.config.load import config_hash, write_effective_config
from rc1.runtime import checkpoint as ckpt
from rc1.runtime.atomic import atomic_write_json
from rc1.runtime.errors import ConfigError
from rc1.runtime.fatal import CONTEXT
from rc1.runtime.fingerprint import register_artifact
from rc1.runtime.provenance import write_code_fingerprint

log = logging.getLogger("rc1.train")

from rc1.config.schema import TRAINING_END_FILE  # noqa: E402  (one seed; cfg.seed_run(i).end_file in general)
ZERO_SIGNAL_FILE = "reports/zero_signal.json"
# Config keys that may change between a checkpoint and its resume (how long / how often, not what).
RESUME_MUTABLE = (("run", "max_steps"), ("run", "save_steps"), ("run", "eval_steps"), ("run", "keep_last"))
KEY_CALLBACKS = "callbacks"
ZERO_SIGNAL_TRUNCATION_WARN = 0.5


def rollout_seed(run_seed: int, step: int) -> int:
    """Seed of step `step`'s rollouts: a function of the step alone, so a resumed run samples the same."""
    return (run_seed * 1_000_003 + step * 7_919) % (2**31 - 1)


def resume_identity(cfg) -> tuple[str, dict]:
    """(hash, dump) of the config minus RESUME_MUTABLE: what a checkpoint must agree with."""
    dump = cfg.model_dump(mode="json")
    for section, key in RESUME_MUTABLE:
        dump.get(section, {}).pop(key, None)
    from rc1.runtime.fingerprint import sha256_json

    return sha256_json(dump), dump


class TrainingRecipe:
    """Train a policy with the engine and strategy named in the config.

    Supports: engines pure_pt (grpo, ppo, dpo, rloo, sft) and trl (grpo, rloo); gradient accumulation;
    AMP where the device has it; difficulty-aware priority sampling; callbacks (logging, checkpoint,
    eval_shadow, early_stop, lr_schedule, grad_clip, tensorboard); exact resume from rc1 checkpoints.

    Assumes: the caller has checked the machine state and ticket (rc1.cli.train_cmd does), the
    workspace holds the training data (seed_pool or data.train_path) and the reward weights.

    Raises: ConfigError (bad config, missing data, `--max-steps` beyond `steps`), CheckpointError
    (a corrupt or config-mismatched checkpoint on resume), and any error from the model or the
    rollouts, unchanged (the CLI turns those into FATAL + reports/ERROR_<ts>.json).

    Steps: `self.step` counts completed micro-steps (one batch of prompts_per_step prompts each); the
    optimizer updates every run.gradient_accumulation steps. Metrics line `step` = completed steps.
    """

    def __init__(self, ws, cfg, *, config_path: str | None = None, resume: str | None = None,
                 resume_fallback: bool = False, max_steps: int | None = None, model_loader=None,
                 reward_model=None, checkpoints: bool = True):
        self.ws, self.cfg, self.config_path = ws, cfg, config_path
        self.resume, self.resume_fallback = resume, resume_fallback
        if max_steps is not None:
            try:
                cfg.run.max_steps = max_steps
            except ValueError as exc:
                raise ConfigError(f"--max-steps {max_steps}: {exc}") from None
            if cfg.steps is not None and max_steps > cfg.steps:
                raise ConfigError(f"--max-steps {max_steps} exceeds the planned total steps ({cfg.steps})")
        self.max_steps = cfg.run.max_steps
        self.model_loader, self.reward_model = model_loader, reward_model
        self.checkpoints = checkpoints  # False only for benchmarks: no checkpoint is written at all
        self.step = 0
        self.stop_reason: str | None = None
        self.last_saved_step: int | None = None
        self.resumed_from: Path | None = None
        self.run_dir = Path(cfg.checkpoint_dir)

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        import numpy as np
        import torch

        cfg, ws = self.cfg, self.ws
        ws.ensure()
        if cfg.run.threads:
            torch.set_num_threads(cfg.run.threads)
        torch.use_deterministic_algorithms(True, warn_only=True)
        random.seed(cfg.run.seed)
        np.random.seed(cfg.run.seed % 2**32)
        torch.manual_seed(cfg.run.seed)
        self.config_hash = config_hash(cfg)
        self.resume_hash, self.resume_dump = resume_identity(cfg)
        CONTEXT["config_hash"] = self.config_hash
        ckpt.clean_stale_temps(ws.path(self.run_dir))
        write_effective_config(ws, cfg, self.config_path)
        write_code_fingerprint(ws)

        from rc1.engines.base import engine_class
        from rc1.engines.sampling import PrioritySampler, load_training_items
        from rc1.strategies.base import strategy_class

        seed_items, other_items, self.data_info = load_training_items(ws, cfg)
        self.sampler_sources = (seed_items, other_items)
        self.sampler = PrioritySampler.from_config(cfg, seed_items, other_items)
        if self.reward_model is None:
            from rc1.rewards.reward import RewardModel

            self.reward_model = RewardModel.from_config(cfg, ws)
        self.engine = engine_class(cfg.engine.name)(ws, reward_model=self.reward_model, model_loader=self.model_loader)
        self.engine.setup(cfg)
        self.strategy = strategy_class(cfg.strategy.name)(cfg, self.reward_model)
        self.strategy.attach_engine(self.engine)

        from rc1.callbacks.base import build_callbacks

        self.callbacks = build_callbacks(cfg.callbacks)
        if self.resume:
            self._load(ckpt.resolve_resume(ws, self.run_dir, self.resume, config_hash=self.resume_hash,
                                           config_dump=self.resume_dump, fallback=self.resume_fallback))
        log.info("run %s: engine=%s strategy=%s steps %d -> %d, data %s", cfg.run.name, cfg.engine.name,
                 cfg.strategy.name, self.step, self.max_steps, self.data_info)

    def _load(self, path: Path) -> None:
        from safetensors.torch import load_file

        meta = ckpt.read_meta(path)
        if getattr(self.engine, "owns_checkpoints", False):  # TRL restores its own state from the directory
            self.engine.load_checkpoint_dir(path, meta)
            self.step = self.last_saved_step = int(meta[ckpt.META_STEP])
            self.resumed_from = path
            log.info("resuming from %s at step %d (engine %s)", self.ws.rel(path), self.step, self.cfg.engine.name)
            return
        state = ckpt.torch_load(path / ckpt.TRAINER_STATE_FILE)
        engine_state = dict(state[ckpt.KEY_ENGINE])
        weights_file = meta[ckpt.META_WEIGHTS]
        if weights_file:
            from rc1.engines.pure_pt import KEY_WEIGHTS

            engine_state[KEY_WEIGHTS] = load_file(str(path / weights_file))
        self.engine.load_state_dict(engine_state)
        if hasattr(self.strategy, "load_state_dict"):
            self.strategy.load_state_dict(state[ckpt.KEY_STRATEGY])
        for cb in self.callbacks:
            if hasattr(cb, "load_state_dict") and type(cb).__name__ in state.get(KEY_CALLBACKS, {}):
                cb.load_state_dict(state[KEY_CALLBACKS][type(cb).__name__])
        self.sampler.load_state_dict(meta[ckpt.META_SAMPLER])
        ckpt.restore_rng(state[ckpt.KEY_RNG])
        self.step = self.last_saved_step = int(meta[ckpt.META_STEP])
        self.resumed_from = path
        if self.step > self.max_steps:
            raise ConfigError(f"checkpoint {self.ws.rel(path)} is at step {self.step}, beyond run.max_steps "
                              f"{self.max_steps}; pass a larger --max-steps")
        log.info("resumed from %s at step %d", self.ws.rel(path), self.step)

    # ------------------------------------------------------------------ train
    def request_stop(self, reason: str) -> None:
        """Finish the current step, checkpoint, and stop (SIGTERM, `rc1 stop`, early stop)."""
        if self.stop_reason is None:
            self.stop_reason = reason
            log.warning("stop requested (%s): finishing step %d, then checkpointing", reason, self.step + 1)

    def train(self) -> str:
        """Run until max_steps or a stop request; returns why it ended ('completed', 'operator', ...)."""
        if hasattr(self.engine, "fit"):  # an engine that owns its loop (TRL) calls back into this recipe
            return self.engine.fit(self)
        cfg = self.cfg
        for cb in self.callbacks:
            cb.on_train_start(self)
        while self.step < self.max_steps and self.stop_reason is None:
            t0 = time.perf_counter()
            CONTEXT["step"] = self.step
            items = self.sampler.next_batch(self.step, cfg.strategy.prompts_per_step)
            batch = {"step": self.step, "items": items, "seed": rollout_seed(cfg.run.seed, self.step)}
            record: dict = {"step": self.step + 1}
            record.update(self.strategy.on_batch(batch))
            t_rollout = time.perf_counter() - t0
            rollout = batch.get("rollout")  # absent for sft (no rollouts)
            if self.step == 0 and rollout is not None:
                self.zero_signal_guard(rollout)
            record.update(self.engine.train_step(batch))
            for item_id, rate in (rollout.group_success().items() if rollout is not None else ()):
                self.sampler.update(item_id, rate)
            self.step += 1
            record["sec_per_step"] = time.perf_counter() - t0
            record["time/rollout_s"] = t_rollout  # generation + scoring + reference pass
            record.update(self.sampler.stats())
            self.on_step_end(record)
        return self.finish()

    def on_step_end(self, record: dict) -> None:
        for cb in self.callbacks:
            cb.on_step_end(self, record)

    def finish(self) -> str:
        reason = self.stop_reason or ("completed" if self.step >= self.max_steps else "interrupted")
        if self.checkpoints and self.last_saved_step != self.step and not getattr(self.engine, "owns_checkpoints", False):
            self.save_checkpoint(reason=reason)
        for cb in self.callbacks:
            cb.on_train_end(self)
        latest = ckpt.read_latest(self.ws.path(self.run_dir))
        atomic_write_json(self.ws.path(TRAINING_END_FILE), {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "reason": reason, "step": self.step,
            "max_steps": self.max_steps, "run_dir": self.ws.rel(self.ws.path(self.run_dir)),
            "checkpoint": self.ws.rel(latest) if latest else None, "config_hash": self.config_hash})
        log.info("training ended at step %d/%d: %s", self.step, self.max_steps, reason)
        return reason

    def zero_signal_guard(self, rollout) -> dict:
        """Step-0 check that the run can learn at all: base pass rate, truncation, zero-variance groups."""
        s = rollout.stats
        report = {"step": 0, "base_pass_rate": s["success"], "truncation_rate": s["truncated"],
                  "zero_variance_group_frac": s["zero_var_groups"], "groups": len(rollout.rewards) // rollout.group_size,
                  "group_size": rollout.group_size, "reward_mean": s["reward"], "warnings": []}
        w = report["warnings"]
        if s["zero_var_groups"] >= 1.0:
            w.append("every rollout group has zero reward variance: group-relative advantages are all 0, "
                     "the policy gets no learning signal")
        if s["success"] == 0.0:
            w.append("base pass rate is 0: no rollout solved its task")
        if s["truncated"] >= ZERO_SIGNAL_TRUNCATION_WARN:
            w.append(f"{s['truncated']:.0%} of rollouts hit max_new_tokens (raise model.max_new_tokens)")
        report["could_learn"] = s["zero_var_groups"] < 1.0
        path = atomic_write_json(self.ws.path(ZERO_SIGNAL_FILE), report)
        register_artifact(self.ws, path, "zero_signal", step=0)
        for msg in w:
            log.warning("ZERO-SIGNAL GUARD: %s", msg)
        if not report["could_learn"]:
            log.error("ZERO-SIGNAL GUARD: training as configured could not learn from step 0 (see %s)",
                      ZERO_SIGNAL_FILE)
        return report

    # ------------------------------------------------------------------ checkpoint
    def save_checkpoint(self, reason: str = "scheduled") -> Path:
        if not self.checkpoints:
            raise RuntimeError("this recipe was built with checkpoints=False")
        from safetensors.torch import save_file

        engine_state = dict(self.engine.state_dict())
        from rc1.engines.pure_pt import KEY_WEIGHTS, KEY_WEIGHTS_FILE

        weights = engine_state.pop(KEY_WEIGHTS, None)
        weights_file = engine_state.pop(KEY_WEIGHTS_FILE, None)
        trainer_state = {
            ckpt.KEY_ENGINE: engine_state,
            ckpt.KEY_STRATEGY: self.strategy.state_dict() if hasattr(self.strategy, "state_dict") else {},
            ckpt.KEY_RNG: ckpt.capture_rng(),
            KEY_CALLBACKS: {type(cb).__name__: cb.state_dict() for cb in self.callbacks if hasattr(cb, "state_dict")},
        }
        writers = {ckpt.TRAINER_STATE_FILE: ckpt.torch_writer(trainer_state)}
        if weights is not None:
            writers[weights_file] = lambda p: save_file(weights, str(p), metadata={"format": "pt"})
        meta = {ckpt.META_RUN: self.cfg.run.name, ckpt.META_CONFIG_HASH: self.resume_hash,
                ckpt.META_CONFIG: self.resume_dump, ckpt.META_SAMPLER: self.sampler.state_dict(),
                ckpt.META_WEIGHTS: weights_file, ckpt.META_STOP_REASON: reason,
                "engine": self.cfg.engine.name, "strategy": self.cfg.strategy.name, "max_steps": self.max_steps}
        path = ckpt.write_checkpoint(self.ws, self.run_dir, self.step, writers, meta, keep_last=self.cfg.run.keep_last)
        self.last_saved_step = self.step
        log.info("checkpoint %s (%s)", self.ws.rel(path), reason)
        return path

    def cleanup(self) -> None:
        CONTEXT.pop("step", None)


def read_training_end(ws) -> dict | None:
    p = ws.path(TRAINING_END_FILE)
    return json.loads(p.read_text()) if p.exists() else None
