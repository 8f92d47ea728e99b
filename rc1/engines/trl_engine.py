"""The TRL engine: GRPO (and RLOO) through TRL 1.x's trainers, with rc1 rewards.

What TRL owns: generation, the loss, the optimizer/scheduler and its training loop. The TRL recipe
(rc1.training.trl_recipe) drives it; the engine never sees the recipe, only a narrow `TRLHooks`
object: the hooks get each TRL log (with the rc1 reward breakdowns of that step's completions),
each TRL checkpoint directory, and are asked after every step whether to stop.

- Rewards: one reward function calls rc1's RewardModel on each completion. TRL generates a single
  assistant turn, so an episode here is SINGLE-TURN: the completion is parsed with the rc1 action
  protocol (rc1.envs) as the first model turn; a TOOL/ASK action cannot be answered inside TRL's
  generation and ends the episode unanswered (truncated). Multi-turn tool use needs pure_pt.
- Prompts: the recipe hands over the whole prompt sequence up front (rows in step order); TRL walks
  it in order (shuffle off), so the data position is the step.
- `ratio` is 1 exactly with strategy.ppo_epochs 1 (TRL's num_iterations): the old policy is the
  current one.
- Checkpoints: TRL saves every save_steps (and on the final step / a stop) into a scratch directory;
  the hooks publish it as an rc1 checkpoint. Resume hands that checkpoint's directory to
  `trainer.train(resume_from_checkpoint=...)`, which restores model, optimizer, scheduler, RNG and
  skips the consumed batches.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rc1.rewards.reward import score_all
from rc1.runtime.device import dtype_for, get_device

log = logging.getLogger("rc1.engine")


@dataclass(frozen=True)
class TRLHooks:
    """What the TRL engine reports to its driver, and the one thing it asks it."""

    on_log: Callable[[int, dict, list], None]      # (global step, TRL logs, [(item id, breakdown, episode)])
    on_save: Callable[[Path, int], None]           # (TRL checkpoint directory, global step)
    should_stop: Callable[[], bool]
    save: bool                                     # False: never save (benchmarks)


class TRLEngine:
    name = "trl"
    sampler_differs = False         # TRL samples with the model it trains
    skips_nonfinite_steps = False   # TRL's records carry no optimizer update for rc1 to check

    def __init__(self, ws=None, *, reward_model=None, model_loader=None, dist=None):
        from rc1.runtime.distributed import SingleProcess

        self.dist = dist or SingleProcess()  # TRL's trainer builds its Accelerator on this process group
        self.ws = ws
        self.reward_model = reward_model
        self.model_loader = model_loader
        self.trainer = None
        self._breakdowns: list = []

    # ------------------------------------------------------------------ setup
    def setup(self, cfg) -> None:
        import torch

        from rc1.engines.pure_pt import default_model_loader

        self.cfg = cfg
        self.device = self.dist.device if self.dist.distributed else get_device(cfg.run.device_pref)
        self.dtype = dtype_for(self.device, cfg.train_precision)
        loader = self.model_loader or default_model_loader
        load_dtype = torch.float32 if self.device.type == "cpu" else self.dtype
        self.model, self.tokenizer = loader(cfg, device=self.device, dtype=load_dtype, for_training=True)

    @property
    def precision(self) -> str:
        """The precision TRL computes in: the bf16 / fp16 flags passed to it (fp16 never on a CPU)."""
        import torch

        if self.dtype == torch.bfloat16:
            return "bf16"
        return "fp16" if self.dtype == torch.float16 and self.device.type != "cpu" else "fp32"

    def build(self, rows: list[dict], scratch_dir: Path, hooks: TRLHooks) -> None:
        """The TRL trainer over `rows` ({"prompt": messages, "rc1_item": item json}, in step order)."""
        from datasets import Dataset

        from rc1.envs.env import ChatFormat

        self.fmt = ChatFormat(self.tokenizer)
        self.hooks = hooks
        self.scratch_dir = scratch_dir
        self.dataset = Dataset.from_list(rows)
        self.trainer = self._build_trainer()

    def batch_args(self) -> dict:
        """run.micro_batch_size on TRL's own knobs. An optimizer step trains on the rows of
        run.gradient_accumulation rollout batches (prompts_per_step x num_generations each) over all
        processes; TRL generates them as one generation batch (generation_batch_size = per-device batch x
        processes x gradient_accumulation_steps, its default steps_per_generation) and trains on them
        `per_device_train_batch_size` rows per forward/backward. So the micro-batch is the per-device batch and
        the accumulation steps make up the rest: the same prompts per optimizer step, whatever the micro-batch
        (the config refuses a micro-batch that does not divide a process's rows)."""
        s, r = self.cfg.strategy, self.cfg.run
        per_rank = s.prompts_per_step * s.num_generations * r.gradient_accumulation // self.dist.world_size
        micro = r.micro_batch_size or s.prompts_per_step * s.num_generations
        return {"per_device_train_batch_size": micro, "gradient_accumulation_steps": per_rank // micro}

    def _training_args(self):
        import torch

        cfg, s, e, r = self.cfg, self.cfg.strategy, self.cfg.engine, self.cfg.run
        common = dict(
            output_dir=str(self.scratch_dir), seed=r.seed, data_seed=r.seed,
            learning_rate=e.lr, weight_decay=e.weight_decay, warmup_steps=e.warmup_steps,
            lr_scheduler_type={"constant": "constant_with_warmup", "linear": "linear", "cosine": "cosine"}[e.lr_schedule],
            max_grad_norm=e.max_grad_norm, max_steps=r.max_steps, logging_steps=1, report_to="none",
            save_strategy="steps" if self.hooks.save else "no", save_steps=r.save_steps, save_only_model=False,
            **self.batch_args(),
            num_generations=s.num_generations, max_completion_length=cfg.model.max_new_tokens,
            temperature=cfg.model.temperature, top_p=cfg.model.top_p, beta=s.kl_coef, epsilon=e.clip_coef,
            epsilon_high=e.clip_coef_high if e.clip_coef_high is not None else e.clip_coef,
            num_iterations=s.ppo_epochs, shuffle_dataset=False, dataloader_num_workers=0, disable_tqdm=True,
            gradient_checkpointing=cfg.model.gradient_checkpointing, use_cpu=self.device.type == "cpu",
            bf16=self.dtype == torch.bfloat16, fp16=self.dtype == torch.float16 and self.device.type != "cpu",
            remove_unused_columns=False,
        )
        if cfg.strategy.name == "rloo":
            from trl import RLOOConfig

            return RLOOConfig(**common)
        from trl import GRPOConfig

        loss_type = {"token": "dapo", "sequence": "grpo", "dr_grpo": "dr_grpo"}[s.loss_type]
        # use_bias_correction_kl off: the KL term is beta * k3 as in rc1's own GRPO (rl_math.grpo_token_loss)
        return GRPOConfig(**common, scale_rewards=s.scale_rewards, loss_type=loss_type, use_bias_correction_kl=False)

    def _build_trainer(self):
        from transformers import TrainerCallback

        engine, hooks = self, self.hooks

        def rc1_reward(prompts, completions, completion_ids, rc1_item, **kwargs):
            return engine.score_completions(completions, completion_ids, rc1_item)

        rc1_reward.__name__ = "rc1_reward"

        class Bridge(TrainerCallback):
            def on_step_end(self, args, state, control, **kw):
                if state.global_step >= args.max_steps or hooks.should_stop():
                    control.should_save = hooks.save
                    control.should_training_stop = True

            def on_log(self, args, state, control, logs=None, **kw):
                if logs and "loss" in logs:
                    batch, engine._breakdowns = engine._breakdowns, []
                    hooks.on_log(int(state.global_step), dict(logs), batch)
                if hooks.should_stop():
                    control.should_save = hooks.save
                    control.should_training_stop = True

            def on_save(self, args, state, control, **kw):
                hooks.on_save(Path(args.output_dir) / f"checkpoint-{state.global_step}", state.global_step)

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
    def fit(self, resume_from: Path | None) -> int:
        """Run TRL's loop (from a checkpoint directory when resuming); returns TRL's global step."""
        self.trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
        return int(self.trainer.state.global_step)

    def eval_step(self, items: list[dict], *, seed: int, max_new_tokens: int | None = None) -> dict[str, float]:
        """Greedy single-turn answers (through rc1.envs, one turn) scored by the RewardModel."""
        import torch

        from rc1.envs.rollout import generate_episodes

        model = self.trainer.model if self.trainer is not None else self.model
        with torch.no_grad():
            episodes = generate_episodes(model, self.tokenizer, items, greedy=True, max_turns=1,
                                         max_new_tokens=max_new_tokens or self.cfg.model.max_new_tokens,
                                         batch_size=max(1, len(items)))
        scores = score_all(self.reward_model, items, episodes)  # a live judge grades them concurrently
        n = max(1, len(scores))
        return {"eval/success": sum(s.success for s in scores) / n, "eval/reward": sum(s.total for s in scores) / n,
                "eval/n": len(scores)}
