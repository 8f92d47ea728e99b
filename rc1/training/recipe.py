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
too: a stop request or the end of the run finishes the open window first); micro-batches inside a
micro-step (run.micro_batch_size: the engine runs a plan's rows that many at a time, rc1.engines.microbatch);
strategy.loss_type token as DAPO's token mean over the whole accumulation window (backward_scale and
window_grad_scale); AMP where the device has
it; exact resume from rc1 checkpoints, also mid-window for single-epoch strategies on one process;
data parallelism on N processes (rc1.runtime.distributed: rank r runs micro-step step + r of each
iteration; N processes with run.gradient_accumulation G compute what one process with G does).

Assumes: the caller has checked the machine state and ticket (rc1.trainer does), the
workspace holds the training data (seed_pool or data.train_path) and the reward weights.

Raises: ConfigError (bad config, missing data, `--max-steps` beyond `steps`), CheckpointError (a
corrupt or config-mismatched checkpoint on resume), VerifierError (a task's verifier failed on an
item; the run checkpoints first), and any error from the model or the rollouts, unchanged (the CLI
turns those into FATAL + reports/ERROR_<ts>.json).

Steps: `self.step` counts completed micro-steps (one batch of prompts_per_step prompts each), over all
ranks; the optimizer updates every run.gradient_accumulation steps (times the plan's epochs), and there
sampler feedback is applied and KL control adapts. Metrics line `step` = completed steps (one line per
iteration of N micro-steps, with global figures).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from rc1.engines.contract import Batch, StepEngine, StepPlan, Strategy
from rc1.runtime import checkpoint as ckpt
from rc1.judge.live import JudgeFault
from rc1.envs.verifiers import VerifierError
from rc1.runtime.errors import ConfigError
from rc1.runtime.fatal import CONTEXT
from rc1.runtime.spans import Spans
from rc1.training.base import RecipeBase, rollout_seed
from rc1.runtime.distributed import merge_records, rank_info

log = logging.getLogger("rc1.train")
FEEDBACK_MAIN = 1 << 30  # order of a micro-step's own groups' feedback: after its redraws' (numbered 1, 2, ...)


class TrainingRecipe(RecipeBase):
    """Train a policy with the pure_pt engine and the strategy named in the config. See the module docstring."""

    engine: StepEngine
    strategy: Strategy

    # ------------------------------------------------------------------ setup
    def setup(self) -> None:
        from rc1.strategies.base import strategy_class

        cfg = self.cfg
        self.setup_run()
        self.strategy = strategy_class(cfg.strategy.name)(cfg, self.reward_model)
        self.strategy.attach(self.engine.policy())
        self.accum_position = 0          # micro-steps (all ranks) back-propagated in the open accumulation window
        self.window: list[StepPlan] = []  # this rank's plans of that window, kept while further epochs remain
        self.feedback: list[tuple] = []   # (micro-step, order, item id, success rate) of the open window
        self.window_kls: list = []        # the KL of each of the window's micro-steps, in micro-step order
        self.window_tokens = 0.0          # this rank's action tokens back-propagated in the open window (dapo)
        self.iteration_steps = self.dist.world_size  # each iteration runs one micro-step per rank
        self.spans = Spans()              # where each step's time goes: time/<span>_s (rc1.runtime.spans)
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
        saved = state.get(ckpt.KEY_CALLBACKS, {})
        for cb in self.callbacks:
            if type(cb).__name__ in saved:
                cb.load_state_dict(saved[type(cb).__name__])
        recipe_state = state.get(ckpt.KEY_RECIPE, {})
        if self.judge is not None and self.dist.is_main:  # the run's totals restart on rank 0; the others add theirs
            self.judge.load_state_dict(recipe_state.get("judge", {}))
        if self.judge is not None:  # a spent budget refuses here, before a step it would stop after
            spent = self.dist.all_gather(self.judge.budget_exceeded() if self.dist.is_main else None)[0]
            if spent:
                raise ConfigError(f"cannot resume {self.ws.rel(path)}: {spent} already; raise the budget in the "
                                  "config to continue (budgets may change on resume)")
        self.accum_position = int(recipe_state.get(ckpt.KEY_ACCUM_POSITION, 0))
        self.feedback = [tuple(f) for f in recipe_state.get("feedback", [])]
        self.window_kls = list(recipe_state.get("window_kls", []))
        self.window_tokens = float(recipe_state.get("window_tokens", 0.0))
        if self.accum_position and self.dist.distributed:
            raise ckpt.CheckpointError(
                f"{self.ws.rel(path)} was taken inside an accumulation window ({self.accum_position} of "
                f"{self.cfg.run.gradient_accumulation} micro-steps, by one process); resume it with one process")
        self.load_monitor_state(recipe_state.get("monitors", {}))
        self.sampler.load_state_dict(meta[ckpt.META_SAMPLER])
        per_rank = state.get(ckpt.KEY_RNG_PER_RANK)
        same_world = per_rank is not None and len(per_rank) == self.dist.world_size
        ckpt.restore_rng(per_rank[self.dist.rank] if same_world else state[ckpt.KEY_RNG])
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
        accum = cfg.run.gradient_accumulation  # micro-steps per optimizer step, all ranks together
        n = self.dist.world_size
        for cb in self.callbacks:
            cb.on_train_start(self)
        while self.step < self.max_steps and (self.stop_reason is None or not self.at_window_boundary):
            t0 = time.perf_counter()
            CONTEXT["step"] = self.step
            before = self.step_snapshot()
            batch = self.next_batch()
            try:
                rollout = self.strategy.rollout(batch)
                record: dict = {"step": self.step + n}
                drawn = rollout
                if rollout is not None:
                    rollout, redraw_stats = self.resample_zero_signal(batch, rollout)
                    record.update(redraw_stats)
            except VerifierError as exc:  # the task's verifier failed: keep what trained, stop, name the item
                if not self.at_window_boundary:
                    raise
                log.error("stopping: %s", exc.message)
                self.stop_reason = "verifier_error"
                self.finish()
                raise
            except JudgeFault as exc:  # no grade for an episode: never a 0, never a fallback; stop where resumable
                if not self.at_window_boundary or self.dist.distributed:  # one rank's fault: no collective save
                    raise
                self.undo_step(before)
                log.error("stopping: %s", exc.message)
                self.stop_reason, self.stop_detail = exc.reason, exc.message
                self.finish()
                exc.lines.append(f"training stopped ({exc.reason}) at step {self.step} with its checkpoint; "
                                 "`rc1 resume` continues (the step is replayed, the grades given served from the cache)")
                raise
            t_rollout = time.perf_counter() - t0
            self.spans.restart()
            plan = self.strategy.plan(batch, rollout)
            self.spans.lap("plan")  # collate, advantages, old/reference log-probs when the strategy needs them
            record.update(plan.metrics)
            if self.judge is not None:
                record.update(self.judge.step_figures())
            if batch.step == 0 and rollout is not None and self.resumed_from is None:
                st = rollout.stats
                self.zero_signal_guard(groups=len(rollout.rewards) // rollout.group_size, group_size=rollout.group_size,
                                       success=st.success, truncated=st.truncated, reward=st.reward,
                                       zero_var_groups=st.zero_var_groups, pass_at_k=st.pass_at_k,
                                       no_success_signal_groups=st.no_success_signal_groups)
            closes_window = self.accum_position + n >= accum
            self.spans.restart()
            record.update(self.engine.backward(plan, scale=self.backward_scale(plan, accum), sync=closes_window))
            self.spans.lap("backward")  # forward + loss + backward
            self.accum_position += n
            if plan.epochs > 1:
                self.window.append(plan)
            if drawn is not None:  # every group fed back once: the drawn ones here, the redraws as they came
                self.feedback += [(batch.step, FEEDBACK_MAIN, item_id, rate)
                                  for item_id, rate in drawn.group_success().items()]
                if drawn is not rollout:  # the headline figures are the drawn batch's, not the filtered one's
                    record.update({f"resampled/{k}": v for k, v in rollout.stats.headline().items()})
                    record.update(drawn.stats.headline())
            if closes_window:
                record.update(self.close_window(accum))
                self.spans.lap("optimizer")  # clip + optimizer step (+ the plans' further epochs)
            self.step += n
            self.steps_this_process += n
            record["lr"] = self.engine.current_lr()
            record["accum_position"] = self.accum_position
            record["sec_per_step"] = time.perf_counter() - t0
            record["time/rollout_s"] = t_rollout  # generation + scoring + redraws
            record.update(self.spans.drain())
            record.update(self.engine.spans.drain())  # the engine's own spans (time/generate_s)
            record = self.end_iteration(record, closes_window)
            self.watch(record)
            self.stop_for_judge_budget(record)
            self.on_step_end(record)
        if self.window:  # the run ended inside a multi-epoch window: finish its epochs on what it holds
            self.close_window(accum)
        reason = self.finish()
        if self.fault is not None:
            raise self.fault
        return reason

    def judge_state(self) -> dict:
        """The run's judge totals over every rank (single process: this judge's own)."""
        if self.judge is None:
            return {}
        if self.dist.distributed:
            return {**self.judge.state_dict(), **self.judge_global}
        return self.judge.state_dict()

    def step_snapshot(self):
        """What a step changes before it trains (the sampler's stream, the RNGs, sampler feedback), kept so a step
        the judge could not grade is undone and replayed exactly on resume (its given grades: cache hits)."""
        if self.judge is None:
            return None
        import copy

        return copy.deepcopy(self.sampler.state_dict()), ckpt.capture_rng(), len(self.feedback)

    def undo_step(self, snapshot) -> None:
        sampler_state, rng, n_feedback = snapshot
        self.sampler.load_state_dict(sampler_state)
        ckpt.restore_rng(rng)
        del self.feedback[n_feedback:]
        self.judge.step_figures()  # the live calls it made still count toward the totals and budgets

    def next_batch(self) -> Batch:
        """This rank's micro-step of the iteration and its prompts. Every rank draws the prompts of all the
        iteration's micro-steps in order (the sequence one process draws) and keeps its own."""
        P, rank = self.cfg.strategy.prompts_per_step, self.dist.rank
        drawn = [self.sampler.next_batch(self.step + j, P) for j in range(self.dist.world_size)]
        return Batch(self.step + rank, tuple(drawn[rank]), rollout_seed(self.cfg.run.seed, self.step + rank))

    def end_iteration(self, record: dict, window_closed: bool) -> dict:
        """Every rank's record of the iteration -> one record with global figures, the same on every rank.

        At an optimizer step: the window's sampler feedback from every rank, applied in micro-step order, and
        KL control on the window's KLs. A stop signal that reached any rank stops every rank here."""
        gathered = self.dist.all_gather((record, self.pending_stop, self.feedback if window_closed else [],
                                         rank_info(record)))
        records = [g[0] for g in gathered]
        self.window_kls += [r.get("kl") for r in records]
        if window_closed:
            for _, _, item_id, rate in sorted(f for g in gathered for f in g[2]):
                self.sampler.update(item_id, rate)
            self.feedback = []
            self.control_kl(self.window_kls, self.strategy)
            self.window_kls = []
        signalled = next((g[1] for g in gathered if g[1] is not None), None)
        if signalled is not None:
            self.request_stop(signalled)
        out = merge_records(records)
        out.update(self.sampler.stats())
        if self.dist.distributed:
            out["world_size"] = self.dist.world_size
            out["ranks"] = [dict(g[3], rank=r) for r, g in enumerate(gathered)]
        return out

    @property
    def window_token_mean(self) -> bool:
        """The loss is a token mean over an accumulation window of several micro-steps (strategy.loss_type
        token, TRL's "dapo"; GRPO and RLOO). Their plans normalise by their own tokens; backward_scale and
        window_grad_scale turn that into the window's."""
        return self.cfg.window_token_mean

    @property
    def token_reference(self) -> float:
        """A fixed token count (the most a rollout batch generates, turns apart) the window's micro-steps are
        scaled by before the window's own count is known: keeps the accumulated gradients at the size of a mean."""
        return float(self.cfg.model.max_new_tokens * self.cfg.rollout_rows)

    def backward_scale(self, plan: StepPlan, accum: int) -> float:
        """The factor of a micro-step's loss: n / accum (the mean over the window's micro-steps, n ranks each),
        and for a window token mean also N_k / R (its action tokens N_k over token_reference R), so that
        window_grad_scale can renormalise the window by its total tokens. Counts this rank's tokens."""
        scale = self.dist.world_size / accum
        if not self.window_token_mean:
            return scale
        tokens = float(plan.tensors.action_mask.sum()) if plan.tensors is not None else 0.0
        self.window_tokens += tokens
        return scale * tokens / self.token_reference

    def window_grad_scale(self, accum: int) -> float:
        """What the window's accumulated gradients are multiplied by before clipping: accum * R / N_W, N_W the
        window's action tokens over every rank (a collective). Each micro-step k back-propagated
        (n / accum) * (N_k / R) * sum_tokens_k / N_k, so the window's gradient becomes that of
        sum over the window's tokens / N_W: DAPO's token mean (1 for every other loss)."""
        if not self.window_token_mean:
            return 1.0
        total = sum(self.dist.all_gather(self.window_tokens))
        self.window_tokens = 0.0
        return accum * self.token_reference / total if total > 0 else 1.0

    def close_window(self, accum: int) -> dict:
        """End of an accumulation window: optimizer step, then the plans' further epochs (each one step)."""
        n = self.dist.world_size
        metrics = self.engine.optimizer_step(grad_scale=self.window_grad_scale(accum))
        for _ in range(1, max((p.epochs for p in self.window), default=1)):
            for i, p in enumerate(self.window):
                metrics.update(self.engine.backward(p, scale=n / accum, sync=i == len(self.window) - 1))
            metrics.update(self.engine.optimizer_step())
        self.window.clear()
        self.accum_position = 0
        return metrics

    def resample_zero_signal(self, batch: Batch, rollout):
        """Replace groups whose successes are all equal (no correctness signal) by fresh draws, at most
        strategy.resample_zero_signal per step (DAPO's dynamic sampling). Deterministic per micro-step: a
        redraw's prompt and rollouts are seeded by (run seed, micro-step, attempt)."""
        from rc1.strategies.common import merge_groups, no_signal_groups

        budget = self.cfg.strategy.resample_zero_signal
        stale = no_signal_groups(rollout)
        stats = {"sampler/no_signal_groups_drawn": len(stale), "sampler/redraws": 0}
        attempt = 0
        while stale and attempt < budget:
            attempt += 1
            seed = rollout_seed(self.cfg.run.seed, batch.step, attempt)
            item = self.sampler.next_batch(batch.step, 1, seed=seed)  # not the sampler's stream: any rank draws it
            fresh = self.strategy.rollout(Batch(batch.step, tuple(item), seed))
            self.feedback += [(batch.step, attempt, item_id, rate) for item_id, rate in fresh.group_success().items()]
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
        """Every rank calls it (a collective: sharded weights, every rank's RNG state); rank 0 writes."""
        if not self.checkpoints:
            raise RuntimeError("this recipe was built with checkpoints=False")
        if not self.at_window_boundary:
            raise RuntimeError("cannot checkpoint inside this accumulation window")
        from safetensors.torch import save_file

        engine_state = dict(self.engine.state_dict())
        rngs = self.dist.all_gather(ckpt.capture_rng())
        path = self.ws.path(self.run_dir) / ckpt.step_dir_name(self.step)
        self.last_saved_step = self.step
        if not self.dist.is_main:
            return path
        weights = engine_state.pop(ckpt.KEY_WEIGHTS, None)
        weights_file = engine_state.pop(ckpt.KEY_WEIGHTS_FILE, None)
        trainer_state = {
            ckpt.KEY_ENGINE: engine_state,
            ckpt.KEY_STRATEGY: self.strategy.state_dict(),
            ckpt.KEY_RNG: rngs[0],
            ckpt.KEY_RNG_PER_RANK: rngs if self.dist.distributed else None,
            ckpt.KEY_CALLBACKS: {type(cb).__name__: cb_state for cb in self.callbacks
                                 if (cb_state := cb.state_dict()) is not None},
            ckpt.KEY_RECIPE: {ckpt.KEY_ACCUM_POSITION: self.accum_position, "monitors": self.monitor_state(),
                              "feedback": list(self.feedback), "window_kls": list(self.window_kls),
                              "window_tokens": self.window_tokens,
                              "judge": self.judge_state()},
        }
        writers = {ckpt.TRAINER_STATE_FILE: ckpt.torch_writer(trainer_state)}
        if weights is not None:
            writers[weights_file] = lambda p: save_file(weights, str(p), metadata={"format": "pt"})
        meta = {ckpt.META_RUN: self.cfg.run.name, ckpt.META_CONFIG_HASH: self.resume_hash,
                ckpt.META_CONFIG: self.resume_dump, ckpt.META_SAMPLER: self.sampler.state_dict(),
                ckpt.META_WEIGHTS: weights_file, ckpt.META_STOP_REASON: reason,
                "engine": self.cfg.engine.name, "strategy": self.cfg.strategy.name, "max_steps": self.max_steps,
                "seed": self.cfg.run.seed, "seed_index": self.seed_index, "world_size": self.dist.world_size}
        path = ckpt.write_checkpoint(self.ws, self.run_dir, self.step, writers, meta, keep_last=self.cfg.run.keep_last)
        log.info("checkpoint %s (%s)", self.ws.rel(path), reason)
        return path

    @property
    def at_window_boundary(self) -> bool:
        """Where the run may stop and checkpoint: outside a multi-epoch window, and on several processes only at
        an optimizer step (a distributed checkpoint then holds no per-rank gradient)."""
        return not self.window and (self.accum_position == 0 or not self.dist.distributed)

    @property
    def can_checkpoint_now(self) -> bool:
        """False inside a multi-epoch accumulation window (its plans are not part of a checkpoint), and inside
        any window on several processes."""
        return self.at_window_boundary
