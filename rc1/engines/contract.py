"""The training contract, read this first: everything a recipe, a strategy, an engine and a callback hand each
other or may call on each other. The loop (rc1.training.recipe) asks no hasattr: what is not here is no one
else's business.

    recipe ──Batch──▶ strategy.rollout(batch) ──ScoredRollout──▶ strategy.plan(batch, rollout) ──StepPlan──┐
      ▲                      │ Policy: rollout / forward / reference / add_module                          │
      │                      ▼                                                                              ▼
      │                   engine ◀── backward(plan, scale) x plan.epochs, optimizer_step() at each window ── recipe
      └── callbacks: on_train_start / on_step_end(trainer, record) / on_train_end, reading the recipe as `Trainer`

Values (what crosses a boundary; frozen where nothing may write them later):
- `Batch`: the prompts of one micro-step and the seed its rollouts use.
- `ScoredRollout`: the step's episodes (rc1.envs.episode.Episode), their rewards, successes and reward
  dimensions, in groups of `group_size` consecutive episodes per prompt; its `stats` (`RolloutStats`) are the
  rollout's named figures, and `RolloutStats.record()` their metrics.jsonl keys.
- `StepPlan`: the collated rows (`PlanTensors`: typed fields, every tensor row-first, so a micro-batch is a
  row slice), the loss function, how many optimisation passes (`epochs`, PPO's ppo_epochs) the recipe runs
  over them, the rollout (None for SFT) and the step's metrics. Like torchtune's `Trajectory`/`PPOStats`
  (torchtune/rlhf/_types.py).
- `ForwardOutput` (log-probs, entropy, hidden states) and `LossOutput` (loss, metrics, what they average over).

Protocols (who calls what):
- `Strategy` (rc1.strategies): `rollout(batch)` then `plan(batch, rollout)`; between the two the recipe may
  replace groups without a learning signal (dynamic sampling). `KLAdjustable`: a strategy whose loss has a KL
  coefficient the recipe adapts toward target_kl (rc1.training.monitor.KLControl).
- `Policy`: exactly what a strategy may call on the engine: roll out, forward (policy or reference, under the
  sampling distribution: temperature and top-p), move tensors to the device, ask for a reference policy, add a
  trainable module (PPO's value head), and whether its sampler's numerics differ from forward's.
- `Engine`: what every engine (pure_pt, trl) gives its recipe and the callbacks: the model, its precision,
  a greedy eval step. `StepEngine`: an engine whose loop the recipe runs (pure_pt): `backward` and
  `optimizer_step`, the LR, the state dict. The recipe owns the loop: it runs `plan.epochs` passes of
  `backward` and steps the optimizer at the end of each gradient-accumulation window (and after each extra
  epoch), as torchtune's recipes/ppo_full_finetune_single_device.py does.
- `Trainer`: what a callback may read and call on the recipe (step, cfg, ws, engine, stop, checkpoint,
  evaluate). `Callback`: what the recipe calls on a callback (rc1.callbacks.base.BaseCallback has no-op hooks
  and no state; `state_dict()` None means nothing to checkpoint).

A loss function is `loss_fn(policy, tensors) -> LossOutput(loss, metrics)`; `loss` is None when the
step has nothing to learn from (a DPO batch without a preference pair: its plan's tensors are None). The
engine may call it on a micro-batch of the plan's rows (rc1.engines.microbatch, run.micro_batch_size): a loss
normalises with the plan-wide counts the strategy put in the tensors (`token_weight`, `n_pairs`), so the
micro-batches' losses sum to the plan's. Whatever a loss reads beyond the policy's own forward is computed in
`plan()` (PPO's old log-probs and values, the reference log-probs); a loss writes nothing into its tensors.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Callable, NamedTuple, Protocol, runtime_checkable

from rc1.config.names import REWARD_DIMENSIONS

if TYPE_CHECKING:  # pragma: no cover
    from pathlib import Path

    import torch

    from rc1.config.schema import TrainConfig
    from rc1.envs.episode import Episode
    from rc1.runtime.distributed import DataParallel, SingleProcess
    from rc1.runtime.spans import Spans
    from rc1.runtime.workspace import Workspace

Metrics = dict[str, "float | None"]


@dataclass(frozen=True)
class Batch:
    step: int                    # steps completed before this one
    items: tuple[dict, ...]      # the prompts (pool items) of this step
    seed: int                    # seed of this step's rollouts: a function of (run seed, step) alone


class ForwardOutput(NamedTuple):
    logp: "torch.Tensor"                      # [B, T-1] log-probs of input_ids[:, 1:] (0 outside positions)
    entropy: "torch.Tensor | None" = None     # [B, T-1] when asked for
    hidden: "torch.Tensor | None" = None      # [B, T-1, H] last hidden states when asked for


class LossOutput(NamedTuple):
    loss: "torch.Tensor | None"
    metrics: Metrics
    weight: float | None = None   # what the metrics average over in these tensors (None: their action tokens)


ZERO_VAR_TOL = 1e-9   # a group whose rewards differ by less has zero variance (its GRPO advantages are 0)


@dataclass(frozen=True)
class RolloutStats:
    """The statistics of one step's scored rollout: the training metrics of every step, the learning-signal
    check before training and the step-0 guard all read them (`RolloutStats.of`). A group is the `group_size`
    consecutive episodes of one prompt; a group whose successes are all equal gives no correctness signal
    (every answer right, or every one wrong); a group whose rewards are all equal gives no signal at all."""

    reward: float                     # mean total reward per episode
    reward_std: float                 # its sample standard deviation over the episodes
    success: float                    # share of verified successes
    pass_at_k: float                  # share of groups with at least one success
    completion_len: float             # mean generated tokens per episode
    truncated: float                  # share of episodes that hit max_new_tokens
    turns: float                      # mean model turns per episode
    tool_hops: float
    clarifications: float
    zero_var_groups: float            # share of groups whose rewards are all equal
    no_success_signal_groups: float   # share of groups whose successes are all equal
    completion_tokens: float          # generated tokens of the step
    signal_tokens_frac: float         # share of them in groups whose rewards vary: the tokens a group-relative
                                      # advantage can teach (a zero-variance group's advantages are all 0)
    shaping: float | None             # mean shaping term (None when the rollout carries none)
    dims: dict[str, float]            # mean of each reward dimension (rc1.config.schema.REWARD_DIMENSIONS)

    @classmethod
    def of(cls, ro: "ScoredRollout") -> "RolloutStats":
        n = max(1, len(ro.rewards))
        g = ro.group_size
        reward_groups = _groups(ro.rewards, g)
        success_groups = _groups([float(s) for s in ro.successes], g)
        comp_lens = [sum(ep.action_mask) for ep in ro.episodes]
        return cls(
            reward=sum(ro.rewards) / n,
            reward_std=_std(ro.rewards),
            success=sum(ro.successes) / n,
            pass_at_k=sum(1 for grp in success_groups if max(grp) > 0) / max(1, len(success_groups)),
            completion_len=sum(comp_lens) / n,
            truncated=sum(bool(ep.truncated) for ep in ro.episodes) / n,
            turns=sum(int(ep.turns) for ep in ro.episodes) / n,
            tool_hops=sum(int(ep.tool_hops) for ep in ro.episodes) / n,
            clarifications=sum(int(ep.clarifications) for ep in ro.episodes) / n,
            zero_var_groups=sum(1 for grp in reward_groups if max(grp) - min(grp) < ZERO_VAR_TOL)
            / max(1, len(reward_groups)),
            no_success_signal_groups=sum(1 for grp in success_groups if max(grp) == min(grp))
            / max(1, len(success_groups)),
            completion_tokens=float(sum(comp_lens)),
            signal_tokens_frac=sum(sum(toks) for grp, toks in zip(reward_groups, _groups(comp_lens, g))
                                   if max(grp) - min(grp) >= ZERO_VAR_TOL) / max(1, sum(comp_lens)),
            shaping=sum(ro.shaping) / n if ro.shaping else None,
            dims={d: sum(x[d] for x in ro.dims) / n for d in REWARD_DIMENSIONS},
        )

    def headline(self) -> Metrics:
        """The figures a step is judged by (reward, success, signal): the recipe logs them from the prompts as
        drawn, before dynamic sampling replaced groups (the filtered batch's beside them as resampled/...)."""
        return {"reward": self.reward, "reward_std": self.reward_std, "success": self.success,
                "pass_at_k": self.pass_at_k, "truncated": self.truncated, "zero_var_groups": self.zero_var_groups,
                "no_success_signal_groups": self.no_success_signal_groups}

    def record(self) -> Metrics:
        """The metrics-record keys (reports/metrics.jsonl: the console, the report and the gates read them)."""
        out: Metrics = {
            "reward": self.reward, "reward_std": self.reward_std, "success": self.success,
            "pass_at_k": self.pass_at_k, "completion_len": self.completion_len, "truncated": self.truncated,
            "turns": self.turns, "tool_hops": self.tool_hops, "clarifications": self.clarifications,
            "zero_var_groups": self.zero_var_groups, "no_success_signal_groups": self.no_success_signal_groups,
            "completion_tokens": self.completion_tokens, "signal_tokens_frac": self.signal_tokens_frac,
        }
        if self.shaping is not None:
            out["reward/shaping"] = self.shaping
        out.update({f"reward/{d}": v for d, v in self.dims.items()})
        return out


def _groups(xs: list, g: int) -> list[list]:
    return [xs[i:i + g] for i in range(0, len(xs), g)]


def _std(xs: list[float]) -> float:
    if len(xs) < 2:
        return 0.0
    m = sum(xs) / len(xs)
    return (sum((x - m) ** 2 for x in xs) / (len(xs) - 1)) ** 0.5


@dataclass
class ScoredRollout:
    """The scored episodes of one step (rc1.strategies.common.rollout_and_score builds it)."""

    items: list[dict]            # one per episode (each prompt repeated group_size times, consecutive)
    episodes: "list[Episode]"
    rewards: list[float]
    successes: list[bool]
    dims: list[dict[str, float]]
    group_size: int
    advantage_scales: list[float] = field(default_factory=list)   # the difficulty bonus per episode
    shaping: list[float] = field(default_factory=list)

    @cached_property
    def stats(self) -> RolloutStats:
        """Measured once, from the rollout as scored (merge_groups makes a new rollout, with its own)."""
        return RolloutStats.of(self)

    def groups(self, xs: list) -> list[list]:
        """`xs` (one value per episode) cut into this rollout's groups."""
        return _groups(xs, self.group_size)

    def group_success(self) -> dict[str, float]:
        """item id -> success rate of its group (feeds the priority sampler)."""
        out: dict[str, list[bool]] = {}
        for it, s in zip(self.items, self.successes):
            out.setdefault(it["id"], []).append(bool(s))
        return {k: sum(v) / len(v) for k, v in out.items()}


@dataclass(frozen=True)
class PlanTensors:
    """The collated rows of a StepPlan, on the policy's device (rc1.strategies.common.collate makes the first four;
    a strategy's plan() adds what its loss reads, with `dataclasses.replace`). Every tensor has the plan's rows
    first, so a micro-batch is the same slice of each (`take`); `n_pairs` is a plan-wide count. Log-probs and
    per-token tensors are over input_ids[:, 1:] ([rows, T-1])."""

    input_ids: torch.Tensor                   # [rows, T] long, right-padded
    attention_mask: torch.Tensor              # [rows, T]
    action_mask: torch.Tensor                 # [rows, T-1] float: 1 on the generated tokens
    episode: torch.Tensor                     # [rows] long: the row's episode (rows of one episode consecutive)
    sample_logp: torch.Tensor | None = None   # the sampler's log-probs, when every row carries them
    unit: torch.Tensor | None = None          # [rows] long: rows with one id stay in one micro-batch (DPO's pair)
    token_weight: torch.Tensor | None = None  # the loss type's weight per token over the WHOLE plan
    advantages: torch.Tensor | None = None    # [rows] (GRPO, RLOO) or [rows, T-1] (PPO)
    ref_logp: torch.Tensor | None = None      # the reference policy's log-probs (KL)
    # PPO: pi_old is the policy that sampled, computed in plan() before any update (GRPO's single update reads
    # it off the loss's own forward, detached)
    old_logp: torch.Tensor | None = None
    old_values: torch.Tensor | None = None
    returns: torch.Tensor | None = None
    is_weight: torch.Tensor | None = None     # truncated importance weights min(pi_old / pi_sampler, cap)
    n_pairs: int = 0                          # DPO: preference pairs in the whole plan

    @property
    def rows(self) -> int:
        return int(self.input_ids.shape[0])

    def take(self, rows) -> PlanTensors:
        """These rows (a slice, or a 1-D long tensor of increasing indices) of every tensor; `episode` and `unit`
        renumbered 0, 1, ... in order; plan-wide counts as they are."""
        import torch

        cut: dict[str, Any] = {}
        for name, v in vars(self).items():
            if v is None or name in PLAN_WIDE:
                continue
            v = v[rows]
            if name in ("episode", "unit") and v.numel():
                v = torch.unique_consecutive(v, return_inverse=True)[1]
            cut[name] = v
        return replace(self, **cut)


PLAN_WIDE = ("n_pairs",)   # PlanTensors fields that are counts over the whole plan, not rows


@dataclass(frozen=True)
class StepPlan:
    """What a strategy hands the recipe for one micro-step (see the module docstring)."""

    tensors: PlanTensors | None   # None: nothing to learn from (a DPO batch without a pair)
    loss_fn: Callable[["Policy", PlanTensors | None], LossOutput]
    epochs: int = 1
    rollout: ScoredRollout | None = None
    metrics: Metrics = field(default_factory=dict)

    def __post_init__(self):
        if self.epochs < 1:
            raise ValueError(f"StepPlan.epochs must be >= 1 (got {self.epochs})")


@runtime_checkable
class Policy(Protocol):
    """What a strategy may call on the engine (and nothing else)."""

    tokenizer: Any
    hidden_size: int
    sampler_differs: bool   # rollouts sampled with other numerics than forward's (a bf16 copy, an inference engine)

    def rollout(self, items: list[dict], num_generations: int, *, seed: int, greedy: bool = False,
                max_new_tokens: int | None = None) -> "list[Episode]": ...

    def forward(self, input_ids, attention_mask, *, positions=None, reference: bool = False, hidden: bool = False,
                entropy: bool | str = False, temperature: float = 1.0, top_p: float = 1.0) -> ForwardOutput: ...

    def to_device(self, obj: Any) -> Any: ...

    def use_reference(self) -> None: ...

    def zero_loss(self) -> Any: ...   # a loss of 0, no forward: its backward gives every trainable parameter a 0 gradient

    def add_module(self, name: str, module: Any) -> Any: ...


@runtime_checkable
class Strategy(Protocol):
    """rc1.strategies: `rollout(batch)` scores episodes (None for SFT), `plan(batch, rollout)` makes the StepPlan;
    between the two the recipe may replace groups without a learning signal (dynamic sampling)."""

    name: str

    def attach(self, policy: Policy) -> None: ...

    def rollout(self, batch: Batch) -> ScoredRollout | None: ...

    def plan(self, batch: Batch, rollout: ScoredRollout | None) -> StepPlan: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class KLAdjustable(Protocol):
    """A strategy with a KL coefficient in its loss (GRPO and RLOO's beta, PPO's reward penalty)."""

    kl_coef: float

    def set_kl_coef(self, value: float) -> None: ...


@runtime_checkable
class Engine(Protocol):
    """What every engine gives its recipe and the callbacks (pure_pt and trl alike): the trained model, what it
    computes in, and a greedy evaluation. SPEC §6's setup and eval step."""

    model: Any        # the trained module (its fine-tune method is read off it)
    tokenizer: Any

    @property
    def precision(self) -> str: ...   # what forward/backward compute in (fp32, bf16 autocast, ...)

    @property
    def sampler_differs(self) -> bool: ...   # rollouts sampled with other numerics than the trainer's

    @property
    def skips_nonfinite_steps(self) -> bool: ...   # an fp16 GradScaler skips a step whose gradients overflowed

    def setup(self, cfg: Any) -> None: ...

    def eval_step(self, items: list[dict], *, seed: int, max_new_tokens: int | None = None) -> Metrics: ...


@runtime_checkable
class StepEngine(Engine, Protocol):
    """An engine whose loop the recipe runs (pure_pt; TRL runs its own): SPEC §6's train step and state dict,
    made explicit as backward + optimizer step."""

    spans: "Spans"    # the engine's own timings (time/generate_s), drained into each step's metrics
    updates: int      # optimizer updates so far

    def policy(self) -> Policy: ...

    def backward(self, plan: StepPlan, *, scale: float, sync: bool = True) -> Metrics: ...

    def optimizer_step(self, *, grad_scale: float = 1.0) -> Metrics: ...

    def current_lr(self) -> float: ...

    def state_dict(self) -> dict[str, Any]: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...


@runtime_checkable
class Trainer(Protocol):
    """What a callback may read and call on the recipe driving the run (rc1.training's TrainingRecipe and
    TRLRecipe): nothing else of a recipe is a callback's business."""

    cfg: "TrainConfig"
    ws: "Workspace"
    dist: "SingleProcess | DataParallel"   # this process's rank (is_main writes, distributed)
    engine: Engine
    callbacks: "list[Callback]"
    step: int                # completed steps
    max_steps: int
    seed_index: int          # which of the config's seeds this run is
    checkpoints: bool        # False: this run writes no checkpoint at all (benchmarks)
    saves_on_schedule: bool  # False: the engine schedules its own saves (TRL), the checkpoint callback stays out

    @property
    def can_checkpoint_now(self) -> bool: ...   # False inside a window a checkpoint cannot hold

    def crossed(self, every: int) -> bool: ...   # the last iteration's steps reached a multiple of `every`

    def save_checkpoint(self, reason: str = "scheduled") -> "Path": ...

    def evaluate(self, items: list[dict], *, seed: int, max_new_tokens: int | None = None) -> Metrics: ...

    def request_stop(self, reason: str) -> None: ...   # finish this step, checkpoint, stop

    def stop_after_fault(self, exc: Any, note: str) -> None: ...   # keep the step, checkpoint, stop, raise `exc`


@runtime_checkable
class Callback(Protocol):
    """What the recipe calls on a callback (rc1.callbacks; rc1.callbacks.base.BaseCallback has no-op hooks and no
    state). `on_step_end` may add keys to the step's metrics record or ask the trainer to stop. `state_dict` is
    None for a callback with nothing to checkpoint; otherwise it is saved under the callback's class name and
    handed back to `load_state_dict` on resume."""

    def on_train_start(self, trainer: Trainer) -> None: ...

    def on_step_end(self, trainer: Trainer, record: dict) -> None: ...

    def on_train_end(self, trainer: Trainer) -> None: ...

    def state_dict(self) -> dict[str, Any] | None: ...

    def load_state_dict(self, state: dict[str, Any]) -> None: ...
