"""Where rc1's artifacts live in a workspace: each default path named once, workspace-relative.

Configs may point elsewhere (`pool.out`, `data.shadow_path`, ...); these are the defaults the schema,
the data pipeline, the gates, the machine and the report agree on."""

from __future__ import annotations

from pathlib import PurePath

# data/: the seed pool, its difficulty metrics and balanced pool, the previous (v1) pool, the eval sets
POOL = "data/rollouts/rc1_seed.jsonl"
POOL_METRICS = "data/rollouts/rc1_seed.metrics.jsonl"
BALANCED_POOL = "data/rollouts/rc1_seed.balanced.jsonl"
V1_POOL = "data/rollouts/rc1_v1.jsonl"
SHADOW_SET = "data/shadow_eval_245.jsonl"
TRAIN_MIN = "data/train_min.jsonl"
EVAL_MIN = "data/eval_min.jsonl"
# the difficulty fit's items (rc1 data fit): training, dev (chooses best/) and held-out (eval set a)
FIT_TRAIN = "data/fit/train.jsonl"
FIT_DEV = "data/fit/dev.jsonl"
FIT_HELDOUT = "data/fit/heldout.jsonl"

# data/: model answers (rc1.rewards.responses); dev_base: the base model's answers to the dev split, which
# difficulty validation and calibration read
DEV_BASE_TAG = "dev_base"


def responses_path(tag: str, *, shadow: bool = True) -> str:
    """The answers file of `tag`: to the shadow set (shadow=True), or to an items file such as the dev split."""
    return f"data/shadow_responses_{tag}.jsonl" if shadow else f"data/responses_{tag}.jsonl"


DEV_BASE_RESPONSES = responses_path(DEV_BASE_TAG, shadow=False)

# configs/
WEIGHTS = "configs/weights.json"

# reports/
SHADOW_MANIFEST = "reports/rc1/sample_manifest.json"
DIVERSITY_REPORT = "reports/diversity_report.json"
DIFFICULTY_REPORT = "reports/rc1/difficulty_report.json"
JUDGE_STATS = "reports/judge_stats.json"              # the judge client's figures (probe, calibration)
JUDGE_STATS_TRAIN = "reports/judge_stats_train.json"  # the live judge's figures during training
JUDGE_UNSTABLE = "reports/unstable_samples.jsonl"     # grades whose variance exceeded reward.unstable_variance
PROBE_REPORT = "reports/scorer_probe.json"
JUDGE_SERVER_STATE = "reports/state/judge.json"       # the local judge server's pid, port, base_url, model
JUDGE_SERVER_LOG = "logs/judge_server.log"
SCALE_REPORTS = "reports/scale"                       # <stage>_{before,after}.json of the scale gate
LEARNING_SIGNAL_REPORT = "reports/learning_signal.json"
DIFFICULTY_FIT_REPORT = "reports/difficulty_fit.json"
GATE_REPORTS = "reports/gates"            # one <gate>.json per gate: its last run
RC1_REPORT = "reports/rc1/rc1_report.md"
RC1_PLOTS = "reports/rc1/plots"           # the RC1 report's PNGs, beside it
EVAL_REPORTS = "reports/eval_*.json"      # `rc1 eval`'s reports, whatever the strategy trained (eval_report_path)
PIPELINE_TIMINGS = "reports/rc1/pipeline_timings.json"


def eval_report_path(stamp: str) -> str:
    """One `rc1 eval` report: reports/eval_<stamp>.json (stamp: its UTC time, plus _<k> when that name is taken)."""
    return f"reports/eval_{stamp}.json"


def eval_report_stamp(path: str | PurePath) -> str:
    """The stamp eval_report_path was given: what orders the eval reports."""
    return PurePath(path).stem.removeprefix("eval_")


def expansion_path(stage: str) -> str:
    """A scale stage's expansion of the training pool (rc1.data.expansion)."""
    return f"data/rollouts/rc1_{stage}.jsonl"


def metrics_path_for(pool: str) -> str:
    """The difficulty-metrics file beside a pool: x.jsonl -> x.metrics.jsonl."""
    return pool[:-len(".jsonl")] + ".metrics.jsonl" if pool.endswith(".jsonl") else pool + ".metrics.jsonl"
