"""`rc1 bench micro`: what `run.micro_batch_size` costs in step time at equal total rows.

Work: `rc1 bench grpo`'s GRPO steps on the pure PyTorch engine (the embedded SmolLM2-135M, full fine-tune, 8
prompts x 4 completions x <= 32 new tokens, one turn), once with the whole batch in one forward/backward and once
per micro-batch size, every run in its own fresh process with the same seeds (so the same rollouts), `repeats`
rounds in alternating order (whole, 8, 4, then 4, 8, whole, ...) so a slow spell of the machine does not land on
one setting. A micro-batch changes only the training part of a step (the recipe's plan, backward and optimizer
spans); the rollout is the same work, so both are reported: the step time (the target's figure) and the
training part alone.

Reported per setting: median seconds per step and of its training part over every timed step of every round; the
ratio of each micro-batch's median to the whole batch's with a bootstrap 95 % interval (scipy, the two settings'
steps resampled independently). Target: micro-batching costs <= 10 % step time (ratio <= 1.10).
"""

from __future__ import annotations

import statistics

from rc1.bench.grpo import _in_child, _run_engine

TARGET = 1.10


def _ratio_ci(whole: list[float], micro: list[float], seed: int) -> tuple[float, float]:
    import numpy as np
    from scipy.stats import bootstrap

    res = bootstrap((np.asarray(whole), np.asarray(micro)), lambda a, b: np.median(b) / np.median(a),
                    vectorized=False, paired=False, n_resamples=2000, method="percentile",
                    random_state=np.random.default_rng(seed))
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def run(ws, quick: bool = False, micro: tuple[int, ...] = (8, 4), repeats: int | None = None,
        steps: int | None = None, warmup: int = 1, threads: int | None = None, prompts: int | None = None,
        generations: int | None = None, max_new_tokens: int | None = None) -> dict:
    from rc1.runtime.atomic import atomic_write_json
    from rc1.runtime.errors import ConfigError

    work = ({"prompts": 4, "completions_per_prompt": 4, "max_new_tokens": 16} if quick else
            {"prompts": 8, "completions_per_prompt": 4, "max_new_tokens": 32})
    work.update({k: v for k, v in (("prompts", prompts), ("completions_per_prompt", generations),
                                   ("max_new_tokens", max_new_tokens)) if v is not None})
    rows = work["prompts"] * work["completions_per_prompt"]
    bad = [m for m in micro if not 1 <= m < rows]
    if bad or not micro:
        raise ConfigError(f"--micro {','.join(map(str, micro))}: each must be between 1 and {rows - 1} "
                          f"(the step has {rows} rows; the whole batch is always measured)")
    repeats = repeats or (1 if quick else 3)
    steps = steps or (1 if quick else 3)
    work.update(model="embedded:smollm2-135m-instruct", finetune="full")
    settings: list[int | None] = [None, *micro]
    runs: dict[str, dict] = {}
    partial = ws.reports / "bench" / "micro.partial.json"  # survives a run killed half-way
    for r in range(repeats):
        for m in settings if r % 2 == 0 else settings[::-1]:
            out = _in_child(_run_engine, "pure_pt", steps, warmup, threads, {**work, "micro_batch_size": m})
            key = "whole" if m is None else str(m)
            got = runs.setdefault(key, {"micro_batch_size": m, "sec_per_step_all": [], "train_s_all": [],
                                        "mean_reward": []})
            got["sec_per_step_all"] += out["sec_per_step_all"]
            got["train_s_all"] += out["train_s_all"]
            got["mean_reward"].append(out["mean_reward"])
            atomic_write_json(partial, {"work": work, "runs": runs, "rounds_done": r})
    partial.unlink(missing_ok=True)  # every round is in `runs`, which the caller writes as the report
    for got in runs.values():
        got["sec_per_step"] = statistics.median(got["sec_per_step_all"])
        got["train_s"] = statistics.median(got["train_s_all"])
    whole = runs["whole"]
    print(f"{'rows/fwd':>8} {'s/step':>8} {'train s':>8} {'step ratio [95% CI]':>26} {'train ratio':>12}")
    print(f"{rows:>8} {whole['sec_per_step']:8.2f} {whole['train_s']:8.2f} {'1':>26} {'1':>12}")
    met = True
    for key in map(str, micro):
        got = runs[key]
        got["step_ratio"] = got["sec_per_step"] / whole["sec_per_step"]
        got["step_ratio_ci95"] = _ratio_ci(whole["sec_per_step_all"], got["sec_per_step_all"], seed=1)
        got["train_ratio"] = got["train_s"] / whole["train_s"]
        got["train_ratio_ci95"] = _ratio_ci(whole["train_s_all"], got["train_s_all"], seed=2)
        met = met and got["step_ratio"] <= TARGET
        lo, hi = got["step_ratio_ci95"]
        ci = f"{got['step_ratio']:.3f} [{lo:.3f}, {hi:.3f}]"
        print(f"{key:>8} {got['sec_per_step']:8.2f} {got['train_s']:8.2f} {ci:>26} {got['train_ratio']:12.3f}")
    print(f"micro-batching's step time / the whole batch's: target <= {TARGET}: {'met' if met else 'NOT met'}")
    return {"work": {**work, "rows_per_step": rows, "single_turn": True, "timed_steps_per_run": steps,
                     "warmup_steps": warmup, "repeats": repeats, "order": "alternating"},
            "runs": runs, "target": f"step ratio <= {TARGET}", "target_met": met}
