"""The pure PyTorch engine: model, AdamW, LR schedule, clipping, AMP; the `Policy` strategies call.
Its forward maths (log-probs under the sampling distribution, entropy, the chunked vocabulary projection,
the shared-prompt forward) are in rc1.engines.forward.

The recipe (rc1.training.recipe) drives it through rc1.engines.contract.Engine: `backward(plan,
scale)` runs the plan's loss on the plan's tensors and back-propagates loss * scale (the recipe
passes 1/gradient_accumulation, times a token share for a window token mean), run.micro_batch_size rows
at a time (rc1.engines.microbatch); `optimizer_step(grad_scale=)` unscales, renormalises the window's
gradients, clips, steps the optimizer and the scheduler and clears the gradients. Gradients accumulated
but not yet applied are part of `state_dict()`, so a checkpoint taken mid-window resumes bit-exactly.

For RL strategies dropout is turned off (as TRL's `disable_dropout`): the forward that computes old
log-probs and values is then the same function as the loss's, and PPO's ratio is exactly 1 at the
start of its first epoch.

Rollouts go through rc1.envs (batched generation with a KV cache). The reference policy for KL:
with LoRA the base model with the adapters disabled (no second copy); with full fine-tuning a
frozen copy made at setup.

Data parallel (a `DataParallel` context from rc1.runtime.distributed): the model and the extra modules
sit under one `PolicyModules` root that Accelerate wraps (DDP; FSDP2 or DeepSpeed when sharded) when the
optimizer is built. Its forward runs a closure: the strategy's loss runs inside it, where DDP sets up
its gradient hooks (and FSDP2 / DeepSpeed gather their shards), however many sub-modules the loss calls.
`backward(..., sync=False)` accumulates under `no_sync`; the last micro-step of a window syncs.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import math
from typing import Any, Callable

from rc1.engines.contract import ForwardOutput, StepPlan
from rc1.engines.forward import token_logprobs
from rc1.models.loader import causal_lm, is_peft
from rc1.runtime.checkpoint import (ADAPTER_FILE, KEY_EXTRA_MODULES, KEY_OPTIMIZER, KEY_PENDING_GRADS,
                                    KEY_SCALER, KEY_SCHEDULER, KEY_WEIGHTS, KEY_WEIGHTS_FILE, MODEL_FILE)
from rc1.rewards.reward import score_all
from rc1.runtime.device import dtype_for, get_device, memory_used_mb, to_device
from rc1.runtime.spans import Spans

log = logging.getLogger("rc1.engine")

RL_STRATEGIES = ("grpo", "rloo", "ppo", "dpo")
DEEPSPEED = ("deepspeed_zero2", "deepspeed_zero3")


def lr_lambda(schedule: str, warmup_steps: int, total_updates: int) -> Callable[[int], float]:
    """Multiplier of the base LR after `n` optimizer updates: linear warmup, then the schedule."""
    total = max(1, total_updates)

    def f(n: int) -> float:
        if warmup_steps and n < warmup_steps:
            return (n + 1) / (warmup_steps + 1)
        if schedule == "constant":
            return 1.0
        progress = min(1.0, (n - warmup_steps) / max(1, total - warmup_steps))
        if schedule == "linear":
            return max(0.0, 1.0 - progress)
        return 0.5 * (1.0 + math.cos(math.pi * progress))  # cosine
    return f


def default_model_loader(cfg, *, device, dtype, for_training: bool):
    from rc1.models.loader import load_model

    return load_model(cfg, device=device, dtype=dtype, for_training=for_training)


class PurePTEngine:
    """Engine protocol on plain PyTorch. See the module docstring."""

    name = "pure_pt"

    def __init__(self, ws=None, *, reward_model=None, model_loader=None, dist=None):
        from rc1.runtime.distributed import SingleProcess

        self.ws = ws
        self.reward_model = reward_model
        self.model_loader = model_loader or default_model_loader
        self.dist = dist or SingleProcess()
        self.wrapped = None          # the Accelerate-prepared PolicyModules (data parallel only)
        self._inside_wrapper = False
        self._window_losses = 0      # micro-steps with a loss since the last optimizer step (data parallel)
        self.cfg = None
        self.micro_batch_size: int | None = None
        self.model = None
        self.tokenizer = None
        self.reference_model = None
        self._gen_model = None
        self._gen_packed = None   # rc1.models.packed.PackedLinears of the bf16 copy; False where unavailable
        self._adapter, self._adapter_failed = None, False  # generation.rollout_backend llamacpp
        self._paged_failed = False  # generation.rollout_backend paged: generate_batch failed once, torch samples
        self.sampled_by: str | None = None  # the backend that sampled the last training rollout
        self.extra_modules: dict[str, Any] = {}
        self.optimizer = None
        self.scheduler = None
        self.scaler = None
        self.updates = 0
        self.spans = Spans()  # time/generate_s: the recipe drains it into each step's metrics

    # ------------------------------------------------------------------ setup
    def setup(self, cfg) -> None:
        import torch

        self.cfg = cfg
        self.micro_batch_size = cfg.run.micro_batch_size  # rows per forward/backward (None: a plan at once)
        self.device = self.dist.device if self.dist.distributed else get_device(cfg.run.device_pref)
        self.amp_dtype = dtype_for(self.device, cfg.train_precision)
        if cfg.generation.rollout_dtype == "bf16" and self.device.type != "cpu":
            from rc1.runtime.errors import ConfigError

            raise ConfigError(f"generation.rollout_dtype: bf16 is a CPU setting; on {self.device.type} the rollouts "
                              "run in the training precision (run.mixed_precision); use auto")
        # Master weights stay fp32; the forward runs under autocast in amp_dtype (on a CPU only when
        # run.mixed_precision asks for bf16 and the CPU has bf16 instructions).
        self.use_amp = self.device.type in ("cuda", "mps", "cpu") and self.amp_dtype != torch.float32
        load_dtype = torch.float32 if self.device.type == "cpu" or self.use_amp else self.amp_dtype
        self.model, self.tokenizer = self.model_loader(cfg, device=self.device, dtype=load_dtype, for_training=True)
        self.is_peft = is_peft(self.model)
        if cfg.strategy.name in RL_STRATEGIES:
            self.dropout_off = disable_dropout(self.model)
        if self.use_amp and self.amp_dtype == torch.float16:
            self.scaler = torch.amp.GradScaler(self.device.type)
        rollouts = ("llama.cpp with the adapter swapped each step" if cfg.generation.rollout_backend == "llamacpp"
                    else "transformers' continuous batching" if cfg.generation.rollout_backend == "paged"
                    else "a bf16 copy" if self.bf16_copy else "the policy")
        log.info("engine pure_pt: device=%s amp=%s dtype=%s peft=%s rollouts=%s", self.device, self.use_amp,
                 self.amp_dtype, self.is_peft, rollouts)

    @property
    def precision(self) -> str:
        """The dtype the forward passes compute in: 'fp32', or 'bf16'/'fp16' autocast."""
        import torch

        if not self.use_amp:
            return "fp32"
        return {torch.bfloat16: "bf16", torch.float16: "fp16"}.get(self.amp_dtype, str(self.amp_dtype))

    @property
    def skips_nonfinite_steps(self) -> bool:
        """fp16 autocast: the GradScaler skips an optimizer step whose gradients overflowed (and lowers its scale)."""
        return self.scaler is not None

    # ------------------------------------------------------------------ Policy (what strategies call)
    def policy(self) -> "PurePTEngine":
        return self

    @property
    def hidden_size(self) -> int:
        return int(self.model.config.get_text_config().hidden_size)

    def use_reference(self) -> None:
        """A strategy needs the reference policy; full fine-tuning gets a frozen copy (LoRA: adapters off)."""
        if self.is_peft or self.reference_model is not None:
            return
        self.reference_model = copy.deepcopy(self.model).eval()
        for p in self.reference_model.parameters():
            p.requires_grad_(False)

    def add_module(self, name: str, module):
        """A trainable module beside the model (PPO's value head): optimized and checkpointed with it;
        returns it on the engine's device."""
        if self.optimizer is not None:
            raise RuntimeError("add_module after the optimizer was built")
        self.extra_modules[name] = to_device(module, self.device)
        return self.extra_modules[name]

    def trainable_parameters(self) -> list:
        params = [p for p in self.model.parameters() if p.requires_grad]
        for name in sorted(self.extra_modules):
            params += [p for p in self.extra_modules[name].parameters() if p.requires_grad]
        return params

    def _ensure_optimizer(self) -> None:
        if self.optimizer is not None:
            return
        import torch

        e = self.cfg.engine
        # fused: one kernel over all parameters, the same maths; on a 2-core CPU 0.45 -> 0.08 s per step of a
        # 135M model. Left to the default for distributed runs, whose wrappers may own the parameters.
        fused = self.device.type in ("cpu", "cuda") and not self.dist.distributed
        self.optimizer = torch.optim.AdamW(self.trainable_parameters(), lr=e.lr, weight_decay=e.weight_decay,
                                           fused=fused or None)
        # the horizon is the planned run's (cfg.schedule_steps), not this chunk's --max-steps: a run trained in
        # chunks decays as one run does
        total_updates = math.ceil(self.cfg.schedule_steps / self.cfg.run.gradient_accumulation)
        total_updates *= self.cfg.strategy.ppo_epochs if self.cfg.strategy.name == "ppo" else 1
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(
            self.optimizer, lr_lambda(e.lr_schedule, e.warmup_steps, total_updates))
        if self.dist.distributed:
            self._wrap_data_parallel()

    def _wrap_data_parallel(self) -> None:
        """Hand the policy's modules (and the optimizer, for the sharding plugins) to Accelerate."""
        acc = self.dist.accelerator()
        root = PolicyModules(self.model, self.extra_modules)
        if self.dist.sharding == "none":
            self.wrapped = acc.prepare_model(root)
        else:
            self.wrapped, self.optimizer = acc.prepare(root, self.optimizer)
        log.info("engine pure_pt: rank %d/%d wrapped in %s", self.dist.rank, self.dist.world_size,
                 type(self.wrapped).__name__)

    @property
    def sharded(self) -> bool:
        return self.wrapped is not None and self.dist.sharding != "none"

    def _under_wrapper(self, fn: Callable[[], Any]) -> Any:
        """fn() inside the data-parallel wrapper's forward (directly when there is none, or already inside)."""
        if self.wrapped is None or self._inside_wrapper:
            return fn()
        self._inside_wrapper = True
        try:
            return self.wrapped(fn)
        finally:
            self._inside_wrapper = False

    # ------------------------------------------------------------------ model helpers
    def autocast(self):
        import torch

        if not self.use_amp:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.device.type, dtype=self.amp_dtype)

    def to_device(self, obj):
        return to_device(obj, self.device)

    def forward(self, input_ids, attention_mask, *, positions=None, reference: bool = False, hidden: bool = False,
                entropy: bool | str = False, temperature: float = 1.0, top_p: float = 1.0) -> ForwardOutput:
        """Per-token log-probs of input_ids[:, 1:] (shape [B, T-1]) and optionally entropy / hidden states, of the
        policy or the reference, under the sampling distribution (temperature, top-p) and the engine's autocast:
        rc1.engines.forward.token_logprobs (where `positions` selects the scored tokens)."""
        if self.sharded and not self._inside_wrapper:  # FSDP2 / DeepSpeed gather their shards in the wrapper
            return self._under_wrapper(lambda: self.forward(input_ids, attention_mask, positions=positions,
                                                            reference=reference, hidden=hidden, entropy=entropy,
                                                            temperature=temperature, top_p=top_p))
        if reference and self.is_peft:
            ctx, model = self.model.disable_adapter(), self.model
        elif reference:
            ctx, model = contextlib.nullcontext(), self.reference_model
        else:
            ctx, model = contextlib.nullcontext(), self.model
        with ctx:
            return token_logprobs(model, input_ids, attention_mask, positions=positions, hidden=hidden,
                                  entropy=entropy, temperature=temperature, top_p=top_p, precision=self.autocast())

    def rollout(self, items: list[dict], num_generations: int, *, seed: int, greedy: bool = False,
                max_new_tokens: int | None = None, for_eval: bool = False) -> list:
        """Episodes for `items` (each repeated num_generations times, consecutive) via rc1.envs. `for_eval`: in
        the precision `rc1 eval` uses (fp32 weights, no autocast, where the eval dtype is fp32), so the dev eval
        during training and the final eval measure the same model the same way."""
        import torch

        from rc1.generation import SamplingParams
        from rc1.generation.torch_backend import TorchSampler

        params = SamplingParams.training(self.cfg, seed=seed, rows=len(items) * num_generations, greedy=greedy,
                                         max_new_tokens=max_new_tokens)
        if not for_eval and self.cfg.generation.rollout_backend == "llamacpp" and self._adapter_sampler() is not None:
            with self.spans("sync"):
                self._adapter.sync(self.model)
            with torch.no_grad(), self.spans("generate"):
                episodes = self._adapter.episodes(items, num_generations=num_generations, params=params)
            self.sampled_by = self._adapter.backend
            return episodes
        paged = not for_eval and self.cfg.generation.rollout_backend == "paged" and not self._paged_failed
        model, amp = self.eval_model() if for_eval else self.generation_model(for_paged=paged)
        was_training = self.model.training
        self.model.eval()
        try:
            def generate():
                if paged:
                    episodes = self._paged_episodes(model, items, num_generations, params)
                    if episodes is not None:
                        return episodes
                return TorchSampler(model, self.tokenizer).episodes(items, num_generations=num_generations,
                                                                     params=params)

            with torch.no_grad(), (self.autocast() if amp else contextlib.nullcontext()), self.spans("generate"):
                # sharded weights are gathered only inside the wrapper; DDP replicas generate directly
                episodes = self._under_wrapper(generate) if self.sharded else generate()
        finally:
            self.model.train(was_training)
        if not for_eval:
            self.sampled_by = "paged" if paged and not self._paged_failed else "torch"
        return episodes

    def _adapter_sampler(self):
        """The llama.cpp adapter-sync sampler (generation.rollout_backend llamacpp), opened and checked against
        the torch policy at the first rollout; None (torch samples, one logged line) when it disagrees."""
        if self._adapter is None and not self._adapter_failed:
            from rc1.generation.adapter_sync import AdapterSyncSampler

            sampler = AdapterSyncSampler(self.cfg, self.model, self.tokenizer, threads=self.cfg.run.threads)
            was_training = self.model.training
            self.model.eval()
            try:
                agreement = sampler.check(self.model)
            finally:
                self.model.train(was_training)
            if agreement.ok:
                self._adapter = sampler
            else:
                sampler.close()
                self._adapter_failed = True
                log.warning("generation.rollout_backend llamacpp: disagrees with the torch policy (%s); training "
                            "rollouts sample with torch", agreement.problems[0])
        return self._adapter

    def _paged_episodes(self, model, items: list[dict], num_generations: int, params) -> list | None:
        """The rollout through transformers' continuous batching (generation.rollout_backend paged,
        rc1.generation.paged); None (torch samples this rollout and every later one, one logged line) where
        generate_batch is unavailable or fails."""
        from rc1.envs.rollout import eos_ids
        from rc1.generation import paged

        why = paged.available()
        if why is None:
            try:
                return paged.PagedSampler(model, self.tokenizer, eos_ids(model, self.tokenizer)).episodes(
                    items, num_generations=num_generations, params=params)
            except Exception as exc:  # any failure inside generate_batch: torch's decoder still works
                why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        self._paged_failed = True
        log.warning("generation.rollout_backend paged: generate_batch unavailable or failed (%s); training rollouts "
                    "sample with torch", why)
        return None

    @property
    def bf16_copy(self) -> bool:
        """Rollouts from a bf16 copy of the policy (rc1.runtime.device.rollouts_from_bf16_copy)."""
        import torch

        from rc1.runtime.device import rollouts_from_bf16_copy

        return rollouts_from_bf16_copy(self.cfg, self.device.type, self.use_amp and self.amp_dtype == torch.bfloat16)

    @property
    def sampler_differs(self) -> bool:
        """True when rollouts are sampled with other numerics than the training forward's: from a bf16 COPY of
        the policy (generation_model: on a CPU under bf16 autocast, or with generation.rollout_dtype bf16 under
        fp32 training), by llama.cpp (generation.rollout_backend llamacpp), or by transformers' continuous
        batching (paged: its own attention kernels, and a copy in the autocast dtype under mixed precision).
        Strategies then correct for it (truncated importance sampling, rc1.strategies.rl_math.truncated_is_weight)."""
        return self.bf16_copy or self.cfg.generation.rollout_backend in ("llamacpp", "paged")

    def eval_model(self):
        """(model, whether to autocast) for greedy evals: the fp32 master weights without autocast where the
        eval dtype (rc1.eval.harness.eval_dtype) is fp32, else the sampling model."""
        import torch

        from rc1.eval.loading import eval_dtype

        if eval_dtype(self.cfg, self.device) == torch.float32:
            return self.model, False
        return self.generation_model()

    def generation_model(self, *, for_paged: bool = False):
        """(model to sample from, whether to autocast). On a CPU with bf16 autocast, a bf16 copy of the
        policy, refreshed from the fp32 weights before every rollout: autocast re-casts every weight
        at every decoded token, which made sampling slower than plain fp32; the copy is ~1.7x faster.
        `for_paged` (generation.rollout_backend paged) under mixed precision: a copy in the autocast dtype, as
        continuous batching decodes in its own thread, which autocast (thread-local) does not reach."""
        import torch

        dtype = torch.bfloat16 if self.bf16_copy else self.amp_dtype if for_paged and self.use_amp else None
        if dtype is None:
            return self.model, True
        if self._gen_model is None:
            # weights only: buffers (rotary inv_freq) stay fp32, else the positions' angles drift from the trainer's
            self._gen_model = copy.deepcopy(self.model).eval()
            for p in self._gen_model.parameters():
                p.data = p.data.to(dtype)
                p.requires_grad_(False)
        with torch.no_grad():
            for dst, src in zip(self._gen_model.parameters(), self.model.parameters(), strict=True):
                dst.copy_(src)
        if self.bf16_copy:
            self._pack_generation_model()
        return self._gen_model, False

    def _pack_generation_model(self) -> None:
        """The bf16 copy's linear layers on oneDNN's packed layout for the rollout batch (rc1.models.packed:
        1.32x an 8-row rollout here, the same tokens), re-packed after every refresh; plain where unavailable."""
        from rc1.models import packed

        if self._gen_packed is None:
            why = packed.available()
            if why is not None:
                self._gen_packed = False
                log.info("bf16 rollout copy on plain linear layers: %s", why)
                return
            self._gen_packed = packed.PackedLinears(self._gen_model, rows=self.cfg.rollout_rows)
        elif self._gen_packed:
            self._gen_packed.refresh()

    # ------------------------------------------------------------------ Engine protocol (what the recipe calls)
    def backward(self, plan: StepPlan, *, scale: float, sync: bool = True) -> dict[str, float]:
        """Forward + the plan's loss + backward of loss * scale; the gradients stay until optimizer_step().

        Micro-batches (run.micro_batch_size, rc1.engines.microbatch): the plan's rows go through forward and
        backward `micro_batch_size` at a time; the strategies normalise with the whole plan's counts, so the
        micro-batches' losses sum to the plan's loss and their gradients to its gradient. `loss` in the
        metrics is that sum; the other metrics are the micro-batches' values averaged by their weight.

        Data parallel: `sync=False` accumulates locally (no_sync); the window's last micro-batch syncs. A rank
        whose batch has no loss back-propagates a zero through every parameter, so the ranks' all-reduces
        still match up."""
        from rc1.engines.microbatch import combine_metrics, micro_batches

        self._ensure_optimizer()
        self.model.train()
        parts = list(micro_batches(plan.tensors, self.micro_batch_size))
        total, has_any, collected = 0.0, False, []
        for i, tensors in enumerate(parts):
            last_sync = sync and i == len(parts) - 1
            with self._sync_context(last_sync):
                loss, metrics, has_loss, weight = self._under_wrapper(lambda: self._loss(plan, tensors))
                if loss is not None:
                    self._backprop(loss * scale, last_sync)
                if has_loss:
                    total += float(loss.detach())
                    has_any = True
                collected.append((dict(metrics), weight))
                del loss
        metrics = combine_metrics(collected)
        metrics["loss"] = total if has_any else None
        metrics["mem_used_mb"] = memory_used_mb(self.device)
        return metrics

    def _backprop(self, scaled, sync: bool) -> None:
        if self.scaler is not None:
            self.scaler.scale(scaled).backward()
        elif self.dist.sharding in DEEPSPEED:
            acc = self.dist.accelerator()
            acc.gradient_state._set_sync_gradients(sync)  # DeepSpeed steps its optimizer when it syncs
            acc.backward(scaled, scale_wrt_gas=False)
        else:
            scaled.backward()

    def _loss(self, plan: StepPlan, tensors):
        """(loss, metrics, whether the plan had a loss, the metrics' weight) of one micro-batch. Data parallel:
        a missing loss becomes a zero through every trainable parameter."""
        out = plan.loss_fn(self, tensors)
        loss, metrics = out.loss, out.metrics
        weight = out.weight
        if weight is None:
            weight = float(tensors.action_mask.sum()) if tensors is not None else 1.0
        if loss is not None:
            self._window_losses += 1
            return loss, metrics, True, weight
        if self.dist.distributed:
            loss = self.zero_loss()
        return loss, metrics, False, weight

    def zero_loss(self):
        """A loss of exactly 0 without a forward: its backward gives every trainable parameter a zero gradient, as
        the backward of a batch whose loss has no gradient does (AdamW then steps every parameter, its moments
        carrying on; data-parallel ranks all-reduce as usual). 0.05 s against 0.4 s for a one-row forward and
        backward of a 135M model here."""
        return sum(p.sum() for p in self.trainable_parameters()) * 0.0

    def _sync_context(self, sync: bool):
        if self.wrapped is None or sync or self.dist.sharding in DEEPSPEED:
            return contextlib.nullcontext()
        return self.dist.accelerator().no_sync(self.wrapped)

    def optimizer_step(self, *, grad_scale: float = 1.0) -> dict[str, float]:
        """Unscale, multiply the accumulated gradients by `grad_scale` (the recipe's window normalisation, see
        TrainingRecipe.window_grad_scale), clip, step the optimizer and the scheduler, clear the gradients."""
        import torch

        self._ensure_optimizer()
        params = self.trainable_parameters()
        if grad_scale != 1.0:
            if self.dist.sharding in DEEPSPEED:
                raise RuntimeError("DeepSpeed steps its optimizer inside backward: a window's gradients cannot be "
                                   "renormalised; use strategy.loss_type sequence or dr_grpo, or distributed.sharding "
                                   "fsdp2")
            with torch.no_grad():
                for p in params:
                    if p.grad is not None:
                        p.grad.mul_(grad_scale)
        if self.dist.distributed:
            # No rank had a loss in this window: one process would have no gradient at all (not zeros), and
            # AdamW skips a parameter without one; drop the zeros the ranks exchanged.
            if not any(self.dist.all_gather(self._window_losses)):
                self.optimizer.zero_grad(set_to_none=True)
            self._window_losses = 0
        if self.scaler is not None:
            self.scaler.unscale_(self.optimizer)
        if self.wrapped is not None:
            grad_norm = self.dist.accelerator().clip_grad_norm_(params, self.cfg.engine.max_grad_norm)
        else:
            grad_norm = torch.nn.utils.clip_grad_norm_(params, self.cfg.engine.max_grad_norm)
        if self.scaler is not None:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.updates += 1
        return {"grad_norm": float(grad_norm), "optimizer_updates": self.updates, "lr": self.current_lr()}

    def current_lr(self) -> float:
        if self.optimizer is None:
            return self.cfg.engine.lr
        return float(self.optimizer.param_groups[0]["lr"])

    def eval_step(self, items: list[dict], *, seed: int, max_new_tokens: int | None = None) -> dict[str, float]:
        """Greedy rollouts of `items`, scored by the reward model: success rate and mean reward."""
        if self.reward_model is None:
            raise RuntimeError("eval_step needs a reward model")
        episodes = self.rollout(items, 1, seed=int(seed), greedy=True, max_new_tokens=max_new_tokens, for_eval=True)
        scores = score_all(self.reward_model, items, episodes)  # a live judge grades them concurrently
        n = max(1, len(scores))
        return {"eval/success": sum(s.success for s in scores) / n, "eval/reward": sum(s.total for s in scores) / n,
                "eval/truncated": sum(bool(ep.truncated) for ep in episodes) / n, "eval/n": len(scores)}

    def state_dict(self) -> dict[str, Any]:
        """Weights (trainable parameters: the adapter with LoRA) apart from the trainer state. Sharded (FSDP2,
        DeepSpeed): gathered into the same format, a collective every rank calls (rc1.engines.sharded_state)."""
        self._ensure_optimizer()
        if self.sharded:
            from rc1.engines import sharded_state

            weights, extras, optimizer = sharded_state.gather(self)
            return {KEY_WEIGHTS: weights, KEY_WEIGHTS_FILE: ADAPTER_FILE if self.is_peft else MODEL_FILE,
                    KEY_OPTIMIZER: optimizer, KEY_SCHEDULER: self.scheduler.state_dict(), KEY_SCALER: None,
                    KEY_PENDING_GRADS: None, KEY_EXTRA_MODULES: extras, "updates": self.updates}
        weights = {n: p.detach().cpu().contiguous() for n, p in self.model.named_parameters() if p.requires_grad}
        pending = None
        if any(p.grad is not None for p in self.trainable_parameters()):
            pending = [None if p.grad is None else p.grad.detach().cpu().clone() for p in self.trainable_parameters()]
        return {
            KEY_WEIGHTS: weights,
            KEY_WEIGHTS_FILE: ADAPTER_FILE if self.is_peft else MODEL_FILE,
            KEY_OPTIMIZER: self.optimizer.state_dict(),
            KEY_SCHEDULER: self.scheduler.state_dict(),
            KEY_SCALER: self.scaler.state_dict() if self.scaler is not None else None,
            KEY_PENDING_GRADS: pending,
            KEY_EXTRA_MODULES: {k: m.state_dict() for k, m in self.extra_modules.items()},
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        import torch

        self._ensure_optimizer()
        weights = state[KEY_WEIGHTS]
        named = dict(self.model.named_parameters())
        missing = sorted(n for n, p in named.items() if p.requires_grad and n not in weights)
        unknown = sorted(set(weights) - set(named))
        if missing or unknown:
            from rc1.runtime.checkpoint import CheckpointError

            raise CheckpointError(f"checkpoint weights do not fit the model: missing {missing[:3]}, unexpected {unknown[:3]}")
        if self.sharded:
            from rc1.engines import sharded_state

            sharded_state.scatter(self, weights, state.get(KEY_EXTRA_MODULES, {}), state[KEY_OPTIMIZER])
            self.scheduler.load_state_dict(state[KEY_SCHEDULER])
            self.updates = int(state.get("updates", 0))
            return
        with torch.no_grad():
            for n, t in weights.items():
                named[n].copy_(to_device(t, named[n].device))
        for k, sd in state.get(KEY_EXTRA_MODULES, {}).items():
            self.extra_modules[k].load_state_dict(sd)
        self.optimizer.load_state_dict(state[KEY_OPTIMIZER])
        self.scheduler.load_state_dict(state[KEY_SCHEDULER])
        if self.scaler is not None and state.get(KEY_SCALER):
            self.scaler.load_state_dict(state[KEY_SCALER])
        self.updates = int(state.get("updates", 0))
        pending = state.get(KEY_PENDING_GRADS)
        for p in self.trainable_parameters():
            p.grad = None
        if pending:
            for p, g in zip(self.trainable_parameters(), pending):
                p.grad = None if g is None else to_device(g, p.device).to(p.dtype)


@functools.cache
def _policy_modules_class():
    import torch

    class PolicyModules(torch.nn.Module):
        """The model and the extra trainable modules under one root, for DDP / FSDP2 / DeepSpeed to wrap.
        forward(fn) runs fn(): the engine passes the strategy's loss (or a rollout), so every parameter the
        loss touches is used inside the wrapper's forward, however many sub-modules it calls."""

        def __init__(self, model, extra_modules: dict):
            super().__init__()
            self.model = model
            self.extras = torch.nn.ModuleDict(extra_modules)
            # what accelerate's FSDP2 auto-wrap shards one by one (the decoder layers): a transformers model's
            # attribute (None on some), on the model or under its peft wrapper
            self._no_split_modules = getattr(model, "_no_split_modules", None) or getattr(
                causal_lm(model), "_no_split_modules", None)

        def forward(self, fn):
            return fn()

    return PolicyModules


def PolicyModules(model, extra_modules: dict):  # noqa: N802 - a class built lazily (torch stays un-imported)
    return _policy_modules_class()(model, extra_modules)


def disable_dropout(model) -> int:
    """Set every dropout probability to 0 (LoRA dropout included); returns how many modules it changed."""
    import torch

    n = 0
    for m in model.modules():
        if isinstance(m, torch.nn.Dropout) and m.p > 0:
            m.p = 0.0
            n += 1
    return n
