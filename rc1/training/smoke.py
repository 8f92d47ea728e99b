"""`rc1 config verify --smoke`: one optimizer step of a train config's engine and strategy, on random:qwen3-tiny.

What it KEEPS from the config: the engine and its recipe; the strategy with every setting but the batch
(group size, ppo_epochs, loss type, KL coefficient and control, target_kl, multi-turn mode, the
importance-sampling cap); gradient accumulation; the finetune method (qlora through bitsandbytes 4-bit,
wherever it runs); the precision, as the engine maps run.mixed_precision on the device it finds here
(the report says what that is and what the config's preferred device would use); the sampling settings
(temperature, top-p); the callbacks, the monitors and the reward.

What it REPLACES: the model (random:qwen3-tiny, with the base model's chat template when it can be had
offline: rc1's vendored ones (rc1.models.chat_templates), the embedded model's, a local model
directory's; so a Qwen3-Thinking config rolls out in Qwen3-Thinking's chat format), the
data (a few items of the config's task mix from the pool builder, with the workspace's templates; one
prompt per micro-step, each rolled out num_generations times; run.micro_batch_size lowered to what that batch
takes), the lengths (SMOKE_MAX_NEW_TOKENS per turn, SMOKE_MAX_LENGTH per episode), and the steps: one accumulation
window (gradient_accumulation micro-steps; PPO's further epochs add their own updates; a TRL step is
already a whole window), ending in a checkpoint and, with eval_dev, one eval. The rewards get a
tie-break below 1e-3 per episode: a random model's episodes all score the same, which would leave
group-relative advantages (and DPO pairs) empty and the backward pass untested.

WHERE: a temporary workspace, removed afterwards. The workspace's state, tickets, reports, logs and
checkpoints are never written; the config, the reward weights it names and the templates are only read.

Raises ConfigError (exit 2) with the reason when the step cannot run, whatever failed: loading, the
rollout, the loss, the backward, the optimizer or the checkpoint.
"""

from __future__ import annotations

import contextlib
import json
import logging
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from rc1.config import registry
from rc1.runtime.errors import ConfigError, Rc1Error
from rc1.runtime.workspace import Workspace

log = logging.getLogger("rc1.smoke")

SMOKE_MODEL = "random:qwen3-tiny"
SMOKE_MAX_NEW_TOKENS = 6
SMOKE_MAX_LENGTH = 1536
SMOKE_PROMPTS_PER_STEP = 1
SMOKE_TRAIN_ITEMS = 24
SMOKE_EVAL_ITEMS = 4
SMOKE_CONFIG = "configs/smoke.yaml"
TIE_BREAK = 1e-3


@dataclass
class SmokeReport:
    config: str
    lines: list[str] = field(default_factory=list)


class TieBreakReward:
    """The config's reward model, plus a deterministic tie-break in [0, TIE_BREAK) per scored episode."""

    def __init__(self, inner):
        self.inner = inner
        self.cfg = inner.cfg
        self.judge = None  # no judge bookkeeping (budgets, totals) in the smoke: the inner model grades on its own
        self.calls = 0

    def score(self, item, episode):
        b = self.inner.score(item, episode)
        b.total += TIE_BREAK * (self.calls % 7) / 7
        self.calls += 1
        return b


def smoke_config(cfg, accumulation_steps: int):
    """`cfg` with the model, lengths, steps and cadences replaced (see the module docstring)."""
    from rc1.config.schema import TrainConfig

    data = cfg.model_dump(mode="json")
    data["base_model"] = None
    data["model"]["base"] = SMOKE_MODEL
    # the smoke's random model solves nothing: its tie-break must reach the gradient in every group
    data["reward"]["shaping_groups"] = "all"
    data["model"]["revision"] = None
    data["model"]["max_new_tokens"] = SMOKE_MAX_NEW_TOKENS
    data["data"]["max_length"] = SMOKE_MAX_LENGTH
    data["eval"]["max_new_tokens"] = SMOKE_MAX_NEW_TOKENS
    data["strategy"]["prompts_per_step"] = SMOKE_PROMPTS_PER_STEP
    run = data["run"]
    run.update(max_steps=accumulation_steps, save_steps=accumulation_steps, eval_steps=accumulation_steps,
               output_dir=None, log_file="logs/train.log", tensorboard=False)
    data["steps"] = accumulation_steps
    data["seeds"] = None
    if run.get("micro_batch_size"):  # the smoke's batch is smaller: the largest micro-batch it takes, still cut
        small = cfg.strategy.model_copy(update={"prompts_per_step": SMOKE_PROMPTS_PER_STEP})
        run["micro_batch_size"] = next(
            m for m in range(run["micro_batch_size"], 0, -1)
            if cfg.model_copy(update={"strategy": small, "run": cfg.run.model_copy(update={"micro_batch_size": m})}
                              ).micro_batch_error() is None)
    for cb in data["callbacks"]:
        if cb.get("name") == "eval_dev":
            cb["eval_items"] = SMOKE_EVAL_ITEMS
    return TrainConfig.model_validate(data)


def base_chat_template(base: str) -> tuple[str | None, str]:
    """(chat template, where it came from) of the config's base model, when it can be had offline."""
    from rc1.models.chat_templates import vendored_chat_template
    from rc1.models.loader import EMBEDDED_PREFIX, load_tokenizer

    vendored = vendored_chat_template(base)
    if vendored is not None:
        return vendored, f"{base}'s, vendored by rc1"
    if base.startswith(EMBEDDED_PREFIX):
        from rc1.models.embedded import load_gguf_tokenizer

        return load_gguf_tokenizer().chat_template, f"{base}'s, from its GGUF"
    if (Path(base).expanduser() / "config.json").is_file():
        return load_tokenizer(Path(base).expanduser()).chat_template, f"{base}'s"
    return None, f"{SMOKE_MODEL}'s Qwen3-style template ({base}'s is not available offline)"


def precision_on(kind: str, mixed_precision: str) -> str:
    """What the engine computes in on a device of this kind (rc1.runtime.device.dtype_for)."""
    import torch

    from rc1.runtime.device import dtype_for

    if kind == "cuda" and mixed_precision not in ("fp16", "fp32", "no"):
        return "bf16 (fp16 on GPUs without bf16)"
    names = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}
    return names[dtype_for(torch.device(kind), mixed_precision)]


def write_items(tmp: Workspace, cfg, source: Workspace) -> None:
    """The smoke's training / eval items: the pool builder over the config's mix, tools and turn limit."""
    from rc1.data.io import write_jsonl
    from rc1.data.pool import BuildParams, build_pool

    templates = source.path(cfg.pool.templates_dir)
    if not templates.is_dir():
        raise ConfigError(f"smoke: pool.templates_dir {cfg.pool.templates_dir} not found in the workspace "
                          "(the smoke builds its items with the pool builder)")
    n = SMOKE_TRAIN_ITEMS + 2 * SMOKE_EVAL_ITEMS  # dev and held-out sets never share items (rc1.eval.splits)
    from rc1.data.generic import load_tasks

    custom = load_tasks(source, cfg.datasets.tasks, names=[t for t, w in cfg.datasets.mix.items()  # its task files
                                                           if w > 0 and t in cfg.datasets.tasks])
    params = BuildParams(n=3 * n, mix=dict(cfg.datasets.mix), max_turns=cfg.pool.max_turns, tools=list(cfg.pool.tools),
                         templates_dir=templates, seed=cfg.pool.seed, space="smoke", id_prefix="smoke",
                         clarify_rate=cfg.pool.clarify_rate, custom={t: d.train for t, d in custom.items()} or None)
    # the shortest prompts of the mix: the step's cost is mostly prompt tokens, and their length tests nothing here
    items = sorted(build_pool(params), key=lambda it: sum(len(m["content"]) for m in it["messages"]))[:n]
    for it in items:
        it["bucket"] = it["meta"].get("level") or "medium"
    train = items[:SMOKE_TRAIN_ITEMS]
    dev, held = items[SMOKE_TRAIN_ITEMS:SMOKE_TRAIN_ITEMS + SMOKE_EVAL_ITEMS], items[SMOKE_TRAIN_ITEMS + SMOKE_EVAL_ITEMS:]
    from rc1.runtime.layout import FIT_HELDOUT, FIT_TRAIN

    fitted = ((FIT_TRAIN, train), (FIT_HELDOUT, held)) if cfg.difficulty_fit.enable else ()
    for rel, rows in ((cfg.seed_pool, train), (cfg.data.train_path, train), (cfg.data.eval_path, dev),
                      (cfg.data.shadow_path, held), *fitted):
        write_jsonl(tmp.path(rel), rows)


def run_smoke(ws: Workspace, config: str) -> SmokeReport:
    """Run one optimizer step of `config` (see the module docstring); ConfigError when it cannot run."""
    from rc1.config.load import load_train_config

    cfg = load_train_config(config, ws)
    spec = registry.ENGINES[cfg.engine.name]
    accum = cfg.run.gradient_accumulation
    steps = 1 if spec.step_is_update else accum
    scfg = smoke_config(cfg, steps)
    tmpdir = Path(tempfile.mkdtemp(prefix="rc1-smoke-"))
    try:
        tmp = Workspace(tmpdir)
        tmp.ensure()
        weights = ws.path(cfg.reward.weights)
        tmp.path(cfg.reward.weights).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(weights, tmp.path(cfg.reward.weights))
        write_items(tmp, cfg, ws)
        tmp.path(SMOKE_CONFIG).parent.mkdir(parents=True, exist_ok=True)
        tmp.path(SMOKE_CONFIG).write_text(json.dumps(scfg.model_dump(mode="json")))
        try:
            with _quiet(tmp):
                return _step(tmp, cfg, scfg, config, steps)
        except Rc1Error as exc:
            raise ConfigError(f"smoke: {config} cannot run a step: {exc.message}", lines=exc.lines) from None
        except Exception as exc:  # noqa: BLE001 - any failure of the step is the answer the smoke gives
            log.debug("smoke step failed", exc_info=True)
            raise ConfigError(f"smoke: {config} cannot run a step: {type(exc).__name__}: {exc}") from None
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


@contextlib.contextmanager
def _quiet(tmp: Workspace):
    """rc1's log lines (a random model trips the zero-signal guard) go to the temporary workspace's log,
    not the terminal; no progress bars."""
    from transformers.utils import logging as hf_logging

    logger = logging.getLogger("rc1")
    handler = logging.FileHandler(tmp.path("logs/smoke.log"), encoding="utf-8")
    old = logger.handlers[:], logger.propagate
    logger.handlers, logger.propagate = [handler], False
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        handler.close()
        logger.handlers, logger.propagate = old
        hf_logging.enable_progress_bar()


def _step(tmp: Workspace, cfg, scfg, config: str, steps: int) -> SmokeReport:
    from rc1.engines.contract import StepEngine
    from rc1.engines.pure_pt import default_model_loader
    from rc1.models.loader import trained_method
    from rc1.rewards.reward import RewardModel
    from rc1.training.base import make_recipe, read_training_end

    template, template_source = base_chat_template(cfg.model.base)

    def loader(c, *, device, dtype, for_training):
        model, tok = default_model_loader(c, device=device, dtype=dtype, for_training=for_training)
        if template is not None:
            tok.chat_template = template
        return model, tok

    reward = TieBreakReward(RewardModel.from_config(scfg, tmp))
    recipe = make_recipe(tmp, scfg, config_path=SMOKE_CONFIG, model_loader=loader, reward_model=reward)
    recipe.setup()
    engine = recipe.engine
    before = [p.detach().clone() for p in engine.model.parameters() if p.requires_grad]
    try:
        reason = recipe.train()
    finally:
        recipe.cleanup()
    end = read_training_end(tmp, scfg)
    records = [json.loads(x) for x in tmp.metrics_path.read_text().splitlines()] if tmp.metrics_path.exists() else []
    after = [p.detach() for p in engine.model.parameters() if p.requires_grad]
    check_step(config, reason, recipe.step, steps, records, before, after)
    updates = engine.updates if isinstance(engine, StepEngine) else None  # a TRL step is already an update
    last = records[-1]
    return SmokeReport(config, _describe(cfg, engine, trained_method(engine.model), template_source, steps, updates,
                                         end, last))


def check_step(config: str, reason: str, step: int, steps: int, records: list[dict], before: list, after: list) -> None:
    """The step really ran: the run completed its steps, every loss is finite, a trainable parameter moved."""
    import math

    import torch

    if reason != "completed" or step != steps:
        raise ConfigError(f"smoke: {config}: the run ended '{reason}' at step {step} of {steps}")
    losses = [r["loss"] for r in records if r.get("loss") is not None]
    if not losses or not all(math.isfinite(x) for x in losses):
        raise ConfigError(f"smoke: {config}: no finite loss was computed (losses {losses})")
    if not any(not torch.equal(a.cpu(), b.cpu()) for a, b in zip(before, after)):
        raise ConfigError(f"smoke: {config}: the optimizer step left every trainable parameter unchanged")


def _describe(cfg, engine, method, template_source, steps, updates, end, last) -> list[str]:
    from rc1.envs.env import ChatFormat, resolve_multi_turn

    s, run = cfg.strategy, cfg.run
    here = engine.device.type
    first = run.device_pref[0]
    precision = engine.precision
    lines = [f"model: {SMOKE_MODEL} in place of {cfg.model.base}; chat template: {template_source}"]
    window = f"gradient_accumulation {run.gradient_accumulation}"
    if registry.ENGINES[cfg.engine.name].step_is_update:
        lines.append(f"engine {cfg.engine.name}, strategy {s.name}: {window} inside 1 trainer step "
                     f"(num_iterations {s.ppo_epochs})")
    else:
        epochs = f", ppo_epochs {s.ppo_epochs}" if s.name == "ppo" else ""
        lines.append(f"engine {cfg.engine.name}, strategy {s.name}{epochs}: {window} -> {steps} micro-steps, "
                     f"{updates} optimizer update(s)")
    lines.append(f"finetune: {cfg.finetune.method} (trained: {method})")
    sub = "" if run.mixed_precision in ("auto", precision) else f"; {run.mixed_precision} is not available here, " \
                                                                   f"the engine computes in {precision}"
    lines.append(f"precision: run.mixed_precision {run.mixed_precision} -> {precision} on {here}{sub}"
                 + ("" if first == here else f"; on {first} (first of device_pref) the engine would use "
                                             f"{precision_on(first, run.mixed_precision)}"))
    if registry.ENGINES[cfg.engine.name].multi_turn:
        fmt = ChatFormat(engine.tokenizer)
        lines.append(f"multi_turn: {s.multi_turn} -> {resolve_multi_turn(s.multi_turn, fmt)} with this template "
                     f"(it {'rewrites' if fmt.rewrites_history else 'keeps'} history"
                     f"{', opens <think>' if fmt.starts_in_think else ''})")
    differs = engine.sampler_differs
    lines.append(f"sampling: temperature {cfg.model.temperature}, top_p {cfg.model.top_p}; sampler numerics "
                 + (f"differ (bf16 copy): importance_sampling_cap {s.importance_sampling_cap}" if differs
                    else "= trainer's"))
    metrics = ", ".join(f"{k} {last[k]:.4g}" for k in ("loss", "kl", "grad_norm", "sampler_mismatch_kl")
                        if isinstance(last.get(k), (int, float)))
    lines.append(f"step: {metrics}; end: {end['reason'] if end else '?'}")
    return lines
