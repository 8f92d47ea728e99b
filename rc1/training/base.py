"""What every training recipe shares: run setup, the sampler, callbacks, monitors, stop requests, the
end-of-run record. `make_recipe` picks the recipe of the config's engine (rc1.config.registry).

The end record (cfg.seed_run(i).end_file, reports/state/training_end*.json) is what the training_done
gate checks: it records what RAN, not what the config declared — steps trained, the seed, how the
run ended (and whether that was early), the finetune method of the model that trained, the precision
the forward passes computed in, the KL measured against target_kl, and the alerts raised.
"""

from __future__ import annotations

import json
import logging
import random
import time
from pathlib import Path

from rc1.config import registry
from rc1.config.load import config_hash, write_effective_config
from rc1.engines.contract import Callback, Engine
from rc1.runtime import checkpoint as ckpt
from rc1.runtime.atomic import append_line, atomic_write_json
from rc1.runtime.errors import ConfigError
from rc1.runtime.fatal import CONTEXT
from rc1.runtime.fingerprint import register_artifact, sha256_json
from rc1.runtime.provenance import write_code_fingerprint
from rc1.training.monitor import DivergenceMonitor, KLControl

log = logging.getLogger("rc1.train")

ALERTS_FILE = "reports/alerts.jsonl"
ZERO_SIGNAL_FILE = "reports/zero_signal.json"
ZERO_SIGNAL_TRUNCATION_WARN = 0.5
# Config keys that may change between a checkpoint and its resume (how long / how often / on how many
# processes, not what: run.gradient_accumulation fixes the optimizer step whatever the world size).
RESUME_MUTABLE = (("run", "max_steps"), ("run", "schedule_steps"), ("run", "save_steps"), ("run", "eval_steps"), ("run", "keep_last"),
                  ("distributed", "processes"), ("distributed", "backend"), ("distributed", "main_port"),
                  ("distributed", "timeout_s"), ("distributed", "stop_timeout_s"),
                  ("scorer", "max_billable_tokens"), ("scorer", "max_cost"))  # a spent judge budget is raised to resume
COMPLETED = "completed"


def rollout_seed(run_seed: int, step: int, attempt: int = 0) -> int:
    """Seed of step `step`'s rollouts (attempt > 0: a redraw): a function of the step alone, so a
    resumed run samples the same."""
    return (run_seed * 1_000_003 + step * 7_919 + attempt * 104_729) % (2**31 - 1)


def resume_identity(cfg) -> tuple[str, dict]:
    """(hash, dump) of the config minus RESUME_MUTABLE: what a checkpoint must agree with."""
    dump = cfg.model_dump(mode="json")
    for section, key in RESUME_MUTABLE:
        dump.get(section, {}).pop(key, None)
    return sha256_json(dump), dump


def make_recipe(ws, cfg, **kwargs):
    """The recipe that drives `cfg.engine.name` (TrainingRecipe for pure_pt, TRLRecipe for trl)."""
    why = registry.engine_strategy_error(cfg.engine.name, cfg.strategy.name)
    if why:
        raise ConfigError(f"engine: {why}")
    return registry.load(registry.ENGINES[cfg.engine.name].recipe)(ws, cfg, **kwargs)


def read_training_end(ws, cfg=None, seed_index: int = 0) -> dict | None:
    from rc1.config.schema import TRAINING_END_FILE

    rel = cfg.seed_run(seed_index).end_file if cfg is not None else TRAINING_END_FILE
    p = ws.path(rel)
    return json.loads(p.read_text()) if p.exists() else None


class RecipeBase:
    """Setup, stop requests, callbacks, monitors and the end record; subclasses own the loop. A recipe is the
    `Trainer` its callbacks see (rc1.engines.contract)."""

    saves_on_schedule = True     # the checkpoint callback saves every run.save_steps (TRL: its own schedule)
    engine: Engine               # built by setup_run
    callbacks: list[Callback]

    def __init__(self, ws, cfg, *, config_path: str | None = None, resume: str | None = None,
                 resume_fallback: bool = False, max_steps: int | None = None, model_loader=None,
                 reward_model=None, checkpoints: bool = True, seed_index: int = 0, dist=None):
        from rc1.runtime.distributed import SingleProcess

        self.dist = dist or SingleProcess()  # this process's rank of the run (rc1.runtime.distributed)
        self.seed_index = seed_index
        self.seed_run = cfg.seed_run(seed_index)
        cfg = cfg.for_seed(seed_index)
        self.ws, self.cfg, self.config_path = ws, cfg, config_path
        self.resume, self.resume_fallback = resume, resume_fallback
        if max_steps is not None:
            if cfg.run.schedule_steps is None:  # a chunk of the config's run: the LR schedule keeps its horizon
                cfg.run.schedule_steps = cfg.schedule_steps
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
        self.steps_this_process = 0
        self.stop_reason: str | None = None     # agreed by every rank: the run stops at the next boundary
        self.stop_detail: str | None = None     # the stop's sentence (judge budget, judge fault), in the end record
        self.fault: Exception | None = None     # raised once the run has checkpointed and stopped (stop_after_fault)
        self.judge = None                       # rc1.judge.live.TrainingJudge when the judge scores dimensions
        self.judge_global: dict = {}            # the judge totals over every rank, as of the last step (data parallel)
        self.pending_stop: str | None = None    # a stop signal this process received, not yet agreed on
        self.iteration_steps = 1                # micro-steps the last iteration advanced `step` by
        self.last_saved_step: int | None = None
        self.resumed_from: Path | None = None
        self.run_dir = Path(cfg.checkpoint_dir)
        self.alerts: list[dict] = []
        m = cfg.monitor
        self.divergence = DivergenceMonitor(m.window, m.alpha)
        self.kl_control = KLControl(cfg.effective_target_kl, m.kl_control, m.kl_adapt_rate, m.kl_stop_factor,
                                    m.window, coef_min=m.kl_coef_min, error_cap=m.kl_error_cap)

    # ------------------------------------------------------------------ setup
    def setup_run(self) -> None:
        """Seeds, determinism, fingerprints, data, sampler, reward model, callbacks, then the engine (set up)."""
        import numpy as np
        import torch

        from rc1.callbacks.base import build_callbacks
        from rc1.engines.base import engine_class
        from rc1.training.sampler import load_training_items, make_sampler

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
        if self.dist.distributed:
            errors = cfg.distributed_errors(self.dist.world_size)
            if errors:
                raise ConfigError(f"cannot train on {self.dist.world_size} processes", lines=errors)
        if self.dist.is_main:  # the other ranks never write
            ckpt.clean_stale_temps(ws.path(self.run_dir))
            write_effective_config(ws, cfg, self.config_path)
            write_code_fingerprint(ws)
        seed_items, other_items, self.data_info = load_training_items(ws, cfg)
        self.sampler_sources = (seed_items, other_items)
        self.sampler = make_sampler(cfg, seed_items, other_items)
        if self.reward_model is None:
            from rc1.rewards.reward import RewardModel

            self.reward_model = RewardModel.for_training(cfg, ws, f"{cfg.run.name}-s{self.seed_index}-r{self.dist.rank}")
        self.judge = self.reward_model.judge
        self.callbacks = build_callbacks(cfg.callbacks)
        self.engine = engine_class(cfg.engine.name)(ws, reward_model=self.reward_model, model_loader=self.model_loader,
                                                    dist=self.dist)
        self.engine.setup(cfg)

    def stop_for_judge_budget(self, record: dict) -> None:
        """Stop after this step when the run's judge calls (every rank's: the merged record's totals, the same on
        every rank) reached a budget."""
        if self.judge is None:
            return
        self.judge_global = {"billable_tokens": record.get("judge/billable_tokens_total", 0),
                             "cost": record.get("judge/cost_total", 0.0), "calls": record.get("judge/calls_total", 0),
                             "unstable": record.get("judge/unstable_total", 0)}
        why = self.judge.budget_exceeded(self.judge_global["billable_tokens"], self.judge_global["cost"])
        if why and self.stop_reason is None:
            log.warning("stopping: %s", why)
            self.stop_detail = why
            self.request_stop("judge_budget")

    def monitor_state(self) -> dict:
        return {"divergence": self.divergence.state_dict(), "kl": self.kl_control.state_dict(),
                "alerts": list(self.alerts)}

    def load_monitor_state(self, state: dict) -> None:
        self.divergence.load_state_dict(state.get("divergence", {}))
        self.kl_control.load_state_dict(state.get("kl", {}))
        self.alerts = list(state.get("alerts", []))

    # ------------------------------------------------------------------ during training
    def request_stop(self, reason: str) -> None:
        """Finish the current step, checkpoint, and stop (early stop, KL, budget: decisions every rank makes
        alike; a signal goes through `signal_stop`)."""
        if self.stop_reason is None:
            self.stop_reason = reason
            log.warning("stop requested (%s): finishing step %d, then checkpointing", reason, self.step + 1)

    def stop_after_fault(self, exc, note: str) -> None:
        """A fault after the step trained (a dev eval the judge could not grade): keep the step, checkpoint,
        stop with the fault's reason, then raise it (`train` does, with `note` among its lines)."""
        log.error("stopping: %s", exc.message)
        exc.lines.append(note)
        self.fault = exc
        self.stop_detail = exc.message
        self.request_stop(exc.reason)

    def signal_stop(self, reason: str) -> None:
        """SIGTERM / SIGINT reached this process: every rank stops at the end of the current iteration (the
        recipe agrees on it there), checkpoints and exits."""
        if self.pending_stop is None:
            self.pending_stop = reason
            log.warning("stop signal (%s) on rank %d: stopping at the next step boundary", reason, self.dist.rank)

    def crossed(self, every: int) -> bool:
        """Whether the last iteration's steps reached a multiple of `every` (an iteration advances by N)."""
        return self.step // every > (self.step - self.iteration_steps) // every

    def watch(self, record: dict) -> None:
        """The divergence monitor's view of a finished step (rank 0 writes the alert)."""
        alert = self.divergence.observe(record)
        if alert is not None:
            doc = alert.to_dict()
            self.alerts.append(doc)
            record["alert"] = alert.message
            record["alert/kind"] = alert.kind
            log.warning("ALERT reward/success divergence: %s", alert.message)
            if self.dist.is_main:
                append_line(self.ws.path(ALERTS_FILE), json.dumps({"time": _now(), "run": self.cfg.run.name,
                                                                    "seed": self.cfg.run.seed, **doc}))

    def control_kl(self, kls: list, strategy=None) -> None:
        """KL control once per optimizer step, on the mean KL of its micro-steps (in micro-step order, so any
        number of processes adapts alike): adapt the strategy's coefficient, or stop."""
        measured = [float(k) for k in kls if k is not None]
        stop = self.kl_control.observe(sum(measured) / len(measured) if measured else None, strategy)
        alert = self.kl_control.alert(self.step)
        if alert is not None:
            doc = alert.to_dict()
            self.alerts.append(doc)
            log.warning("ALERT KL: %s", alert.message)
            if self.dist.is_main:
                append_line(self.ws.path(ALERTS_FILE), json.dumps({"time": _now(), "run": self.cfg.run.name,
                                                                    "seed": self.cfg.run.seed, **doc}))
        if stop:
            log.warning("stopping: %s", stop)
            self.request_stop("target_kl")

    def on_step_end(self, record: dict) -> None:
        for cb in self.callbacks:
            cb.on_step_end(self, record)

    def evaluate(self, items: list[dict], *, seed: int, max_new_tokens: int | None = None) -> dict:
        """Greedy rollouts of `items` by the current policy (what eval callbacks call). Data parallel: each
        rank evaluates its share of the items; the means are combined weighted by eval/n."""
        n, rank = self.dist.world_size, self.dist.rank
        if n == 1:
            return self.engine.eval_step(items, seed=seed, max_new_tokens=max_new_tokens)
        share = items[rank::n]
        mine = self.engine.eval_step(share, seed=seed, max_new_tokens=max_new_tokens) if share else {}
        parts = [p for p in self.dist.all_gather(mine) if p.get("eval/n")]
        total = sum(p["eval/n"] for p in parts)
        return {k: (total if k == "eval/n" else sum(p[k] * p["eval/n"] for p in parts) / total)
                for k in (parts[0] if parts else {})}

    # ------------------------------------------------------------------ end
    def end_record(self, reason: str) -> dict:
        latest = ckpt.read_latest(self.ws.path(self.run_dir))
        return {
            "time": _now(), "reason": reason, "stopped_early": reason != COMPLETED,
            "step": self.step, "steps_this_process": self.steps_this_process, "max_steps": self.max_steps,
            "resumed_from": self.ws.rel(self.resumed_from) if self.resumed_from else None,
            "run_dir": self.ws.rel(self.ws.path(self.run_dir)),
            "checkpoint": self.ws.rel(latest) if latest else None, "config_hash": self.config_hash,
            "seed": self.cfg.run.seed, "seed_index": self.seed_index, "seeds": self.cfg.seed_list,
            "world_size": self.dist.world_size,
            "engine": self.cfg.engine.name, "strategy": self.cfg.strategy.name,
            "finetune_method": self.finetune_method(), "train_dtype": self.precision(),
            "kl": self.kl_control.summary(), "alerts": list(self.alerts),
            "reason_detail": self.stop_detail,
            "judge": self.judge.summary() if self.judge is not None else None,
        }

    def finetune_method(self) -> str:
        """What trained: full, lora or qlora, read off the loaded model (not the config)."""
        from rc1.models.loader import trained_method

        return trained_method(self.engine.model)

    def precision(self) -> str:
        return self.engine.precision

    def write_end(self, reason: str) -> dict:
        doc = self.end_record(reason)
        if self.dist.is_main:
            atomic_write_json(self.ws.path(self.seed_run.end_file), doc)
        log.info("training ended at step %d/%d: %s", self.step, self.max_steps, reason)
        return doc

    def zero_signal_guard(self, *, groups: int, group_size: int, success: float, truncated: float, reward: float,
                          zero_var_groups: float, pass_at_k: float | None = None,
                          no_success_signal_groups: float | None = None) -> dict:
        """Step-0 record of whether the run can learn at all: pass rate, truncation, zero-variance groups.
        (The learning-signal gate refuses such a run before training; this records what step 0 saw.)"""
        report = {"step": 0, "base_pass_rate": success, "pass_at_k": pass_at_k,
                  "truncation_rate": truncated, "zero_variance_group_frac": zero_var_groups,
                  "no_success_signal_group_frac": no_success_signal_groups,
                  "groups": groups, "group_size": group_size, "reward_mean": reward, "warnings": []}
        w = report["warnings"]
        if zero_var_groups >= 1.0:
            w.append("every rollout group has zero reward variance: group-relative advantages are all 0, "
                     "the policy gets no learning signal")
        if success == 0.0:
            w.append("base pass rate is 0: no rollout solved its task, so only the shaping dimensions carry signal")
        if truncated >= ZERO_SIGNAL_TRUNCATION_WARN:
            w.append(f"{truncated:.0%} of rollouts hit max_new_tokens (raise model.max_new_tokens)")
        report["could_learn"] = zero_var_groups < 1.0 and success > 0.0
        if not self.dist.is_main:
            return report
        path = atomic_write_json(self.ws.path(ZERO_SIGNAL_FILE), report)
        register_artifact(self.ws, path, "zero_signal", step=0)
        for msg in w:
            log.warning("ZERO-SIGNAL GUARD: %s", msg)
        if not report["could_learn"]:
            log.error("ZERO-SIGNAL GUARD: step 0 gave no correctness signal (see %s)", ZERO_SIGNAL_FILE)
        return report

    def cleanup(self) -> None:
        CONTEXT.pop("step", None)
        if self.judge is not None:
            self.judge.close()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
