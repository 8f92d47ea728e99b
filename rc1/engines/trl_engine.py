"""The TRL engine: GRPO through TRL 1.x's GRPOTrainer, with rc1 rewards, metrics and checkpoints.

What TRL owns: generation, the GRPO loss, the optimizer/scheduler and its training loop
(`fit(recipe)` runs `GRPOTrainer.train()`; a `train_step` of this engine is one TRL optimizer step).
What rc1 keeps:

- Rewards: one reward function calls rc1's RewardModel on each completion. TRL generates a single
  assistant turn, so an episode here is SINGLE-TURN: the completion is parsed with the rc1 action
  protocol (rc1.envs) as the first model turn; a TOOL/ASK action cannot be answered inside TRL's
  generation and ends the episode unanswered (truncated). Multi-turn tool use needs pure_pt.
- Prompts: the priority sampler draws the prompt sequence up front (by_difficulty and the
  seed_ratio_schedule apply; low_perf_cap needs per-step feedback TRL does not give, so it is
  inactive here), and TRL walks it in order (shuffle off), so the data position is the step.
- Metrics: a TrainerCallback turns each TRL log into an rc1 metrics line (the recipe's callbacks
  run on it: logging, eval, early stop). `ratio` is 1 exactly: with num_iterations=1 TRL's old
  policy is the current one.
- Checkpoints: TRL saves every save_steps (and on the final step / a stop request) into a scratch
  directory; the save hook publishes it as an rc1 checkpoint (atomic, manifest, latest,
  ckpt_manifest.jsonl) and deletes the scratch copy. The rc1 checkpoint holds TRL's own files
  (weights, optimizer.pt, scheduler.pt, rng_state.pth, trainer_state.json), so `--resume` hands it
  to `trainer.train(resume_from_checkpoint=...)`, which restores model, optimizer, scheduler, RNG
  and skips the consumed batches.

Runs strategies grpo (and rloo through TRL's RLOOTrainer). dpo and sft on TRL are refused with a
clear error pointing to pure_pt.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

from rc1.runtime import checkpoint as ckpt
from rc1.runtime.device import dtype_for, get_device, memory_used_mb
from rc1.runtime.errors import ConfigError

log = logging.getLogger("rc1.engine")

HF_SCRATCH = ".hf_scratch"
SUPPORTED = ("grpo", "rloo")


class TRLEngine:
    name = "trl"
    owns_checkpoints = True

    def __init__(self, ws=None, *, reward_model=None, model_loader=None):
        self.ws = ws
        self.reward_model = reward_model
        self.model_loader = model_loader
        self.trainer = None
        self.resume_path: Path | None = None
        self._breakdowns: list = []

    # ------------------------------------------------------------------ setup
    def setup(self, cfg) -> None:
        if cfg.strategy.name not in SUPPORTED:
            raise ConfigError(f"engine trl: strategy {cfg.strategy.name!r} is not wired to TRL in rc1 "
                              f"(it runs {list(SUPPORTED)}); use engine.name: pure_pt for {cfg.strategy.name}")
        import torch

        from rc1.engines.pure_pt import default_model_loader

        self.cfg = cfg
        self.device = get_device(cfg.run.device_pref)
        self.dtype = dtype_for(self.device, cfg.run.mixed_precision)
        loader = self.model_loader or default_model_loader
        load_dtype = torch.float32 if self.device.type == "cpu" else self.dtype
        self.model, self.tokenizer = loader(cfg, device=self.device, dtype=load_dtype, for_training=True)

    def attach(self, recipe) -> None:
        """Build the TRL trainer once the recipe has its sampler and reward model."""
        from datasets import Dataset

        from rc1.envs.env import ChatFormat, episode_messages

        cfg = self.cfg
        self.recipe = recipe
        self.fmt = ChatFormat(self.tokenizer)
        accum, P = cfg.run.gradient_accumulation, cfg.strategy.prompts_per_step
        # The whole prompt sequence, drawn up front from a fresh sampler: the same on every (re)start.
        from rc1.engines.sampling import PrioritySampler

        sampler = PrioritySampler.from_config(cfg, *recipe.sampler_sources)
        rows = []
        for step in range(cfg.run.max_steps):
            for _ in range(accum):
                for item in sampler.next_batch(step, P):
                    rows.append({"prompt": episode_messages(item), "rc1_item": json.dumps(item)})
        recipe.sampler = sampler
        # TRL's scratch saves left by a killed run are never published: remove them before starting
        shutil.rmtree(self.ws.path(Path(cfg.checkpoint_dir) / HF_SCRATCH), ignore_errors=True)
        self.dataset = Dataset.from_list(rows)
        self.trainer = self._build_trainer()

    def _training_args(self):
        import torch

        cfg, s, e, r = self.cfg, self.cfg.strategy, self.cfg.engine, self.cfg.run
        common = dict(
            output_dir=str(self.ws.path(Path(cfg.checkpoint_dir) / HF_SCRATCH)), seed=r.seed, data_seed=r.seed,
            learning_rate=e.lr, weight_decay=e.weight_decay, warmup_steps=e.warmup_steps,
            lr_scheduler_type={"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}[e.lr_schedule],
            max_grad_norm=e.max_grad_norm, max_steps=r.max_steps, logging_steps=1, report_to="none",
            save_strategy="steps" if self.recipe.checkpoints else "no", save_steps=r.save_steps, save_only_model=False,
            per_device_train_batch_size=s.prompts_per_step * s.num_generations, gradient_accumulation_steps=r.gradient_accumulation,
            num_generations=s.num_generations, max_completion_length=cfg.model.max_new_tokens,
            temperature=cfg.model.temperature, top_p=cfg.model.top_p, beta=s.kl_coef, epsilon=e.clip_coef,
            num_iterations=1, shuffle_dataset=False, dataloader_num_workers=0, disable_tqdm=True,
            gradient_checkpointing=cfg.model.gradient_checkpointing, use_cpu=self.device.type == "cpu",
            bf16=self.dtype == torch.bfloat16, fp16=self.dtype == torch.float16 and self.device.type != "cpu",
            remove_unused_columns=False,
        )
        if cfg.strategy.name == "rloo":
            from trl import RLOOConfig

            return RLOOConfig(**common)
        from trl import GRPOConfig

        return GRPOConfig(**common, scale_rewards="group", loss_type="dapo")

    def _build_trainer(self):
        from transformers import TrainerCallback

        engine = self

        def rc1_reward(prompts, completions, completion_ids, rc1_item, **kwargs):
            return engine.score_completions(completions, completion_ids, rc1_item)

        rc1_reward.__name__ = "rc1_reward"

        class Bridge(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                recipe = engine.recipe
                if state.global_step >= args.max_steps or recipe.stop_reason is not None:
                    control.should_save = recipe.checkpoints
                    control.should_training_stop = True

            def on_log(self, args, state, control, logs=None, **kw):
                if logs and "loss" in logs:
                    engine.on_trl_log(state, logs)
                if engine.recipe.stop_reason is not None:
                    control.should_save = engine.recipe.checkpoints
                    control.should_training_stop = True

            def on_save(self, args, state, control, **kw):
                engine.publish_checkpoint(Path(args.output_dir) / f"checkpoint-{state.global_step}", state.global_step)

        kwargs = dict(model=self.model, reward_funcs=[rc1_reward], args=self._training_args(),
                      train_dataset=self.dataset, processing_class=self.tokenizer, callbacks=[Bridge()])
        if self.cfg.strategy.name == "rloo":
            from trl import RLOOTrainer as Trainer
        else:
            from trl import GRPOTrainer as Trainer
        from transformers.trainer_callback import PrinterCallback

        trainer = Trainer(**kwargs)
        trainer.remove_callback(PrinterCallback)  # rc1 logs each step itself (logs/train.log, metrics.jsonl)
        return trainer

    def needs_reference(self) -> None:
        """TRL keeps its own reference (adapters disabled with LoRA, a frozen copy otherwise)."""

    # ------------------------------------------------------------------ rewards
    def score_completions(self, completions, completion_ids, items_json) -> list[float]:
        from rc1.envs.env import EpisodeState

        out = []
        limit = self.cfg.model.max_new_tokens
        for comp, ids, item_json in zip(completions, completion_ids, items_json):
            item = json.loads(item_json)
            state = EpisodeState.start(item, self.fmt, max_turns=1)
            ids = list(ids)
            hit_limit = len(ids) >= limit and not (ids and ids[-1] in self.fmt.eos_ids)
            state.add_model_turn(ids, hit_limit)
            episode = state.to_episode()
            b = self.reward_model.score(item, episode)
            self._breakdowns.append((item["id"], b, episode))
            out.append(float(b.total))
        return out

    # ------------------------------------------------------------------ loop
    def fit(self, recipe) -> str:
        recipe.sampler_sources = getattr(recipe, "sampler_sources", None)
        if self.trainer is None:
            self.attach(recipe)
        for cb in recipe.callbacks:
            cb.on_train_start(recipe)
        self._t0 = time.perf_counter()
        self.trainer.train(resume_from_checkpoint=str(self.resume_path) if self.resume_path else None)
        recipe.step = int(self.trainer.state.global_step)
        scratch = self.ws.path(Path(self.cfg.checkpoint_dir) / HF_SCRATCH)
        shutil.rmtree(scratch, ignore_errors=True)
        return recipe.finish()

    def on_trl_log(self, state, logs: dict) -> None:
        from rc1.config.schema import REWARD_DIMENSIONS

        recipe = self.recipe
        step = int(state.global_step)
        now = time.perf_counter()
        batch, self._breakdowns = self._breakdowns, []
        n = max(1, len(batch))
        record = {"step": step, "loss": logs.get("loss"), "kl": logs.get("kl", 0.0 if self.cfg.strategy.kl_coef == 0 else None),
                  "ratio": 1.0, "lr": logs.get("learning_rate"), "entropy": logs.get("entropy"),
                  "completion_len": logs.get("completions/mean_length"),
                  "clip_frac": logs.get("clip_ratio/region_mean", 0.0),
                  "grad_norm": logs.get("grad_norm"), "mem_used_mb": memory_used_mb(self.device),
                  "sec_per_step": now - self._t0}
        self._t0 = now
        if batch:
            record["reward"] = sum(b.total for _, b, _ in batch) / n
            record["success"] = sum(b.success for _, b, _ in batch) / n
            record["truncated"] = sum(bool(ep.truncated) for _, _, ep in batch) / n
            for d in REWARD_DIMENSIONS:
                record[f"reward/{d}"] = sum(b.dims[d] for _, b, _ in batch) / n
            record["zero_var_groups"] = logs.get("frac_reward_zero_std")
            if step == 1 and recipe.resumed_from is None:
                G = self.cfg.strategy.num_generations
                recipe.zero_signal_guard(SimpleNamespace(
                    stats={"success": record["success"], "truncated": record["truncated"],
                           "zero_var_groups": record["zero_var_groups"] or 0.0, "reward": record["reward"]},
                    rewards=[b.total for _, b, _ in batch], group_size=G))
        recipe.step = step
        recipe.on_step_end(record)

    def publish_checkpoint(self, hf_dir: Path, step: int) -> None:
        """TRL's checkpoint-N directory -> an atomic rc1 checkpoint (same files + meta + manifest)."""
        recipe = self.recipe
        files = sorted(p for p in hf_dir.rglob("*") if p.is_file())
        writers = {p.relative_to(hf_dir).as_posix(): (lambda dst, src=p: shutil.copyfile(src, dst)) for p in files}
        weights = next((n for n in (ckpt.ADAPTER_FILE, ckpt.MODEL_FILE) if (hf_dir / n).exists()), None)
        meta = {ckpt.META_RUN: self.cfg.run.name, ckpt.META_CONFIG_HASH: recipe.resume_hash,
                ckpt.META_CONFIG: recipe.resume_dump, ckpt.META_SAMPLER: {"position": step, "draws": recipe.sampler.draws},
                ckpt.META_WEIGHTS: weights, ckpt.META_STOP_REASON: recipe.stop_reason or "scheduled",
                "engine": "trl", "strategy": self.cfg.strategy.name, "max_steps": recipe.max_steps}
        path = ckpt.write_checkpoint(self.ws, self.cfg.checkpoint_dir, step, writers, meta,
                                     keep_last=self.cfg.run.keep_last)
        shutil.rmtree(hf_dir, ignore_errors=True)
        recipe.last_saved_step = step
        log.info("checkpoint %s (TRL state)", self.ws.rel(path))

    # ------------------------------------------------------------------ Engine protocol
    def train_step(self, batch: dict) -> dict[str, float]:
        raise RuntimeError("the TRL engine runs its own loop: use TrainingRecipe.train() (engine.fit)")

    def eval_step(self, batch: dict) -> dict[str, float]:
        """Greedy single-turn answers (through rc1.envs, one turn) scored by the RewardModel."""
        import torch

        from rc1.envs.rollout import generate_episodes

        items = batch["items"]
        model = self.trainer.model if self.trainer is not None else self.model
        with torch.no_grad():
            episodes = generate_episodes(model, self.tokenizer, items, greedy=True, max_turns=1,
                                         max_new_tokens=batch.get("max_new_tokens") or self.cfg.model.max_new_tokens,
                                         batch_size=max(1, len(items)))
        scores = [self.reward_model.score(it, ep) for it, ep in zip(items, episodes)]
        n = max(1, len(scores))
        return {"eval/success": sum(s.success for s in scores) / n, "eval/reward": sum(s.total for s in scores) / n,
                "eval/n": len(scores)}

    def state_dict(self) -> dict:
        raise RuntimeError("TRL engine state is saved by TRL's own checkpoint hook (publish_checkpoint)")

    def load_state_dict(self, state: dict) -> None:
        raise RuntimeError("the TRL engine resumes from a checkpoint directory (load_checkpoint_dir)")

    def load_checkpoint_dir(self, path: Path, meta: dict) -> None:
        """Resume: TRL restores weights, optimizer, scheduler, RNG and the data position from `path`."""
        if meta.get("engine") != "trl":
            raise ckpt.CheckpointError(f"{path}: written by engine {meta.get('engine')!r}, not trl")
        self.resume_path = path
