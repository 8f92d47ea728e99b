"""The recipe of the TRL engine: TRL's GRPOTrainer / RLOOTrainer runs the loop; rc1 keeps the data
order, the rewards, the metrics, the monitors and the checkpoints.

- Prompts: the priority sampler draws the whole prompt sequence up front (by_difficulty and the
  seed_ratio_schedule apply; low_perf_cap and dynamic resampling need per-step feedback TRL does not
  give, so they are inactive here), and TRL walks it in order, so the data position is the step.
- Metrics: each TRL log becomes an rc1 metrics line; the recipe's monitors and callbacks run on it
  (logging, eval, early stop, divergence, KL).
- Checkpoints: each TRL checkpoint directory is published as an rc1 checkpoint (atomic, manifest,
  `latest`, ckpt_manifest.jsonl) holding TRL's own files; resume hands it back to TRL.
- Data parallel (`rc1 train --nproc N`): TRL is Accelerate-native; its trainer runs on the ranks' process
  group with gradient_accumulation_steps = run.gradient_accumulation / N, so an optimizer step sees the same
  prompts as on one process. Rank 0 publishes the checkpoints (after every rank wrote its RNG state into
  TRL's directory) and writes the metrics; the reward figures are gathered from every rank; a stop is
  agreed on by all ranks at a step's end.
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from pathlib import Path

from rc1.config.names import REWARD_DIMENSIONS
from rc1.engines.trl_engine import TRLEngine, TRLHooks
from rc1.runtime import checkpoint as ckpt
from rc1.runtime.device import memory_used_mb
from rc1.training.base import RecipeBase

log = logging.getLogger("rc1.train")

HF_SCRATCH = ".hf_scratch"


class TRLRecipe(RecipeBase):
    saves_on_schedule = False   # TRL schedules the saves (same save_steps); on_save publishes them
    can_checkpoint_now = False
    engine: TRLEngine

    def setup(self) -> None:
        from rc1.envs.env import episode_messages
        from rc1.training.sampler import make_sampler

        cfg = self.cfg
        self.setup_run()
        accum, P = cfg.run.gradient_accumulation, cfg.strategy.prompts_per_step
        # The whole prompt sequence, drawn up front from a fresh sampler: the same on every (re)start.
        sampler = make_sampler(cfg, *self.sampler_sources)  # the curriculum cannot move: TRL draws up front
        rows = []
        for step in range(cfg.run.max_steps):
            for _ in range(accum):
                for item in sampler.next_batch(step, P):
                    rows.append({"prompt": episode_messages(item), "rc1_item": json.dumps(item)})
        self.sampler = sampler
        self.scratch = self.ws.path(Path(cfg.checkpoint_dir) / HF_SCRATCH)
        # TRL's scratch saves left by a killed run are never published: remove them before starting
        if self.dist.is_main:
            shutil.rmtree(self.scratch, ignore_errors=True)
        self.dist.barrier()
        self.engine.build(rows, self.scratch, TRLHooks(on_log=self.on_trl_log, on_save=self.publish_checkpoint,
                                                       should_stop=self.agreed_stop, save=self.checkpoints))
        self.resume_dir = None
        if self.resume:
            path = ckpt.resolve_resume(self.ws, self.run_dir, self.resume, config_hash=self.resume_hash,
                                       config_dump=self.resume_dump, fallback=self.resume_fallback)
            meta = ckpt.read_meta(path)
            if meta.get("engine") != "trl":
                raise ckpt.CheckpointError(f"{path}: written by engine {meta.get('engine')!r}, not trl")
            self.resume_dir = path
            self.step = self.last_saved_step = int(meta[ckpt.META_STEP])
            self.resumed_from = path
            log.info("resuming from %s at step %d (engine trl)", self.ws.rel(path), self.step)

    def train(self) -> str:
        for cb in self.callbacks:
            cb.on_train_start(self)
        self._t0 = time.perf_counter()
        self.step = self.engine.fit(self.resume_dir)
        self.dist.barrier()
        if self.dist.is_main:
            shutil.rmtree(self.scratch, ignore_errors=True)
        return self.finish()

    def agreed_stop(self) -> bool:
        """Whether to stop after this TRL step: a stop decision, or a signal on any rank (every rank asks at the
        same points of TRL's loop, so this collective lines up)."""
        signalled = next((r for r in self.dist.all_gather(self.pending_stop) if r is not None), None)
        if signalled is not None:
            self.request_stop(signalled)
        return self.stop_reason is not None

    def finish(self) -> str:
        reason = self.stop_reason or ("completed" if self.step >= self.max_steps else "interrupted")
        for cb in self.callbacks:
            cb.on_train_end(self)
        self.write_end(reason)
        return reason

    def on_trl_log(self, step: int, logs: dict, batch: list) -> None:
        now = time.perf_counter()
        cfg = self.cfg
        record = {"step": step, "loss": logs.get("loss"), "kl": logs.get("kl", 0.0 if cfg.strategy.kl_coef == 0 else None),
                  "ratio": 1.0, "lr": logs.get("learning_rate"), "entropy": logs.get("entropy"),
                  "completion_len": logs.get("completions/mean_length"),
                  "clip_frac": logs.get("clip_ratio/region_mean", 0.0),
                  "grad_norm": logs.get("grad_norm"), "mem_used_mb": memory_used_mb(self.engine.device),
                  "sec_per_step": now - self._t0}
        self._t0 = now
        sums = {"n": len(batch), "reward": sum(b.total for _, b, _ in batch),
                "success": sum(b.success for _, b, _ in batch), "truncated": sum(bool(ep.truncated) for _, _, ep in batch),
                **{f"reward/{d}": sum(b.dims[d] for _, b, _ in batch) for d in REWARD_DIMENSIONS}}
        parts = self.dist.all_gather(sums)  # each rank scored its own completions: the step's figures are all of them
        n = sum(p["n"] for p in parts)
        if n:
            for k in sums:
                if k != "n":
                    record[k] = sum(p[k] for p in parts) / n
            record["zero_var_groups"] = logs.get("frac_reward_zero_std")
            if step == 1 and self.resumed_from is None:
                G = cfg.strategy.num_generations
                self.zero_signal_guard(groups=n // G, group_size=G, success=record["success"],
                                       truncated=record["truncated"], reward=record["reward"],
                                       zero_var_groups=record["zero_var_groups"] or 0.0)
        self.step = step
        self.steps_this_process += 1
        self.watch(record)
        self.control_kl([record["kl"]])  # a TRL step is an optimizer step; TRL owns its KL coefficient
        self.on_step_end(record)

    def save_checkpoint(self, reason: str = "scheduled") -> Path:
        """Never called (saves_on_schedule and can_checkpoint_now are False): TRL's own saves are published."""
        raise RuntimeError("a trl run checkpoints on TRL's schedule (publish_checkpoint), not on request")

    def publish_checkpoint(self, hf_dir: Path, step: int) -> None:
        """TRL's checkpoint-N directory -> an atomic rc1 checkpoint (same files + meta + manifest), by rank 0
        once every rank has written its part (its RNG state) of the directory."""
        self.dist.barrier()
        self.last_saved_step = step
        if not self.dist.is_main:
            return
        files = sorted(p for p in hf_dir.rglob("*") if p.is_file())
        writers = {p.relative_to(hf_dir).as_posix(): (lambda dst, src=p: shutil.copyfile(src, dst)) for p in files}
        weights = next((n for n in (ckpt.ADAPTER_FILE, ckpt.MODEL_FILE) if (hf_dir / n).exists()), None)
        meta = {ckpt.META_RUN: self.cfg.run.name, ckpt.META_CONFIG_HASH: self.resume_hash,
                ckpt.META_CONFIG: self.resume_dump, ckpt.META_SAMPLER: {"position": step, "draws": self.sampler.draws},
                ckpt.META_WEIGHTS: weights, ckpt.META_STOP_REASON: self.stop_reason or "scheduled",
                "engine": "trl", "strategy": self.cfg.strategy.name, "max_steps": self.max_steps,
                "seed": self.cfg.run.seed, "seed_index": self.seed_index}
        path = ckpt.write_checkpoint(self.ws, self.cfg.checkpoint_dir, step, writers, meta,
                                     keep_last=self.cfg.run.keep_last)
        shutil.rmtree(hf_dir, ignore_errors=True)
        self.last_saved_step = step
        log.info("checkpoint %s (TRL state)", self.ws.rel(path))
