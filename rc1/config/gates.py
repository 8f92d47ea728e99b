"""The gates config's schema (configs/gates.yaml): every threshold the gates judge by.

A run config names its gates config (`gates:`); rc1.config.load reads it, passing the run's custom task
names as validation context so the mixes here may name them.
"""

from __future__ import annotations

from typing import Iterable, Literal

from pydantic import Field, ValidationInfo, field_validator

from rc1.config.names import DEFAULT_MIX, check_mix
from rc1.config.strict import Strict


def _context_tasks(info: ValidationInfo) -> Iterable[str]:
    """Custom task names a gates config may use in its mixes: those of the run config that names it,
    passed as validation context (rc1.config.load.load_gates_config(..., tasks=...))."""
    return (info.context or {}).get("tasks", ())


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
    mix: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_MIX))
    mix_tol_pp: float = Field(3.0, ge=0)
    min_items: int = Field(1, ge=1)

    _mix = field_validator("mix")(classmethod(lambda cls, v, info: check_mix(v, _context_tasks(info))))


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
    mix: dict[str, float] = Field(default_factory=lambda: dict(DEFAULT_MIX))
    mix_tol_pp: float = Field(3.0, ge=0)

    _mix = field_validator("mix")(classmethod(lambda cls, v, info: check_mix(v, _context_tasks(info))))


class LearningSignalGate(Strict):
    min_prompts: int = Field(8, ge=1, description="training prompts the base policy is rolled out on")
    pass_rate_min: float = Field(0.0, ge=0, le=1, description="base pass rate must be above this (0: any success)")
    pass_at_k_min: float = Field(0.1, ge=0, le=1, description="prompts with >= 1 correct episode among num_generations")
    truncation_max: float = Field(0.5, ge=0, le=1)
    no_signal_max: float = Field(0.95, ge=0, le=1, description="groups whose successes are all equal")
    informative_groups_min: float = Field(
        0.0, ge=0, description="expected groups with a correctness signal over the whole run (steps x prompts per "
                               "step x the Wilson 95% lower bound of the measured informative share) must reach this")


class TrainingDoneGate(Strict):
    kl_tolerance: float = Field(1.5, ge=1, description="drift bound = kl_tolerance x target_kl: the trained policy's "
                                                       "per-token KL to the reference on fixed prompts (rc1 drift) is "
                                                       "refused when its CI lower bound exceeds it")
    drift_prompts: int = Field(64, ge=8, description="fixed prompts (dev + held-out) the drift is measured on")
    drift_samples: int = Field(4, ge=1, description="answers sampled per prompt at the training temperature")
    drift_confidence: float = Field(0.95, gt=0.5, lt=1, description="confidence of the prompt-level bootstrap CI")


class ResourcesGate(Strict):
    min_free_disk_gb: float = Field(50.0, ge=0)
    memory_max_fraction: float = Field(
        0.90, gt=0, le=1, description="a training step's estimated peak may use at most this share of the device's "
                                      "memory (RAM on a CPU, GPU memory on CUDA, the MPS working set)")


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
    """RC1 thresholds on held-out deltas (trained - base, paired items). Each is judged on the end of the
    paired-bootstrap 95 % CI least favourable to the model; the point estimate is printed beside it."""

    success_delta_pp_gt: float = Field(0.0, description="overall success delta: CI lower bound must exceed it (pp)")
    vs_majority_pp_gt: float = Field(
        0.0, description="trained success minus the majority-class baseline on the same items: CI lower bound must "
                         "exceed it (pp)")
    needs_clar_success_pp_min: float = 5.0
    overclar_rel_reduction_min: float = Field(0.20, ge=0, le=1)
    avg_turns_max_increase: float = Field(0.0, description="average turns delta: CI upper bound must not exceed it")
    hard_success_pp_min: float = 5.0
    shadow_noninferiority_pp: float = Field(
        -5.0, description="with a difficulty fit: the success delta on the full-difficulty shadow set, CI lower bound "
                          "must reach this (pp; non-inferiority)")
    shadow_min_n: int = Field(200, ge=1, description="shadow items the non-inferiority check needs (fewer: it fails)")


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
    training_done: TrainingDoneGate = Field(default_factory=TrainingDoneGate)
    learning_signal: LearningSignalGate = Field(default_factory=LearningSignalGate)
    shadow_run: ShadowRunGate = Field(default_factory=ShadowRunGate)
    calibration: CalibrationGate = Field(default_factory=CalibrationGate)
    ablation: AblationGate = Field(default_factory=AblationGate)
    eval: EvalGate = Field(default_factory=EvalGate)
    scale: ScaleGate = Field(default_factory=ScaleGate)
