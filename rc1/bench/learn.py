"""`rc1 bench learn [--budget-s S] [--model M]`: does rc1 make a model better faster than TRL does?

rc1's pure PyTorch engine and TRL's `GRPOTrainer` train the same model on identical work, one after
the other, each in its own fresh process (clean threads and peak memory), for the same wall-clock
budget of training time:

- Task: add/subtract word problems built here ("Sam has 45 shells and finds 17 more. How many ...?
  Reply with only the final number."), as plain single-turn chat items (`single_turn`, no rc1
  protocol system prompt): both trainers give the model the same chat-formatted token ids (checked
  at startup and recorded). Training and held-out problems are disjoint.
- Reward: correctness only, the same function for both (`correctness`): 1 when the numeric verifier
  accepts the answer, else 0; a completion cut at max_new_tokens fails. rc1 gets it as its reward
  with shaping_scale 0 and no difficulty bonus.
- GRPO (`WORK`): 4 completions per prompt, 8 per step, at most 24 new tokens, temperature 1, lr 5e-6
  (constant), beta 0 (no reference model), token-level loss (TRL "dapo"), advantages scaled by the
  group's reward std (TRL's default "group"), one update per batch, clip 0.2, grad-norm 1, full
  fine-tuning, no dynamic resampling. Each trainer in its fastest setting on the machine: rc1's engine with
  bf16 autocast where the CPU has AVX512-BF16/AMX (its rollouts from a bf16 copy), fp32 elsewhere, its rows of
  advantage 0 skipping forward and backward (beta 0: the same gradient, rc1.strategies.grpo); TRL with
  gradient checkpointing off and `--trl-precision` (bf16 autocast or fp32: run both and report the faster).

Eval, the same for both trainers: greedy accuracy on the held-out problems (100 by default; fewer only for a smoke
run, marked `smoke`) at the start, every `eval_every_s` seconds of training time, and when the budget is spent,
each time by a fresh fp32 copy of the model (`HeldOutEval`) loaded with the trainer's current weights, outside any
autocast, through rc1's greedy decoder. The clock is paused while evaluating: an eval point's time is training time
only. Every point keeps each item's 0/1 score, so gains are paired bootstraps over the items.

Seeds: `--seeds N` (default 3) runs both trainers N times with seeds 7, 8, ..., alternating which goes first
(`arm_order`: rc1 first on seeds 7, 9, ...). `--first-seed S` starts the sequence at S, so seeds 8 and 9 measured
in one run join seed 7 measured in another with the same order each would have had in one 3-seed run.

One statistic for both (`compare_seed`): the accuracy curves are smoothed (running mean of SMOOTH eval points);
the target is TRL's final smoothed accuracy; each trainer's time to it is where its smoothed curve first reaches
it (linear between eval points); the ratio is rc1's time over TRL's. A seed counts only when TRL's own gain (its
last point over its first, paired bootstrap over the items) has a 95 % interval above 0. Across seeds
(`summarize`): the median ratio and a bootstrap 95 % interval (a seed where rc1 never reached TRL's accuracy
counts as an unbounded ratio); target: median <= TARGET_RATIO, the interval's upper
end <= TARGET_CI_HIGH, rc1's median final smoothed accuracy no lower than TRL's. The old statistic (rc1's first
raw point at or above TRL's last raw point, over the budget) is kept beside it as `old_statistic`.

Report (reports/bench/learn.json, rewritten atomically after every eval point, so a run cut short leaves a valid
partial file with `complete: false`; reports/bench/learn.png): per seed and trainer the eval points (training
seconds, step, accuracy, per-item scores), steps, sec/step, completion tokens/s, peak memory, rc1's time breakdown
(`time/...` spans); per seed the comparison; the summary.
"""

from __future__ import annotations

import json
import math
import multiprocessing as mp
import os
import random
import shutil
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable

DEFAULT_MODEL = "embedded:smollm2-135m-instruct"
REPORT = "learn.json"
PLOT = "learn.png"
MIN_EVAL_ITEMS = 100
TRAIN_ITEMS = 2000
SEED = 7
TARGET_RATIO = 0.30      # median over seeds of rc1's time / TRL's time to TRL's final smoothed accuracy
TARGET_CI_HIGH = 0.5     # the upper end of that median's bootstrap 95 % interval
SMOOTH = 3               # eval points in the running mean both accuracy curves are read on
SEEDS = 3
# The work both trainers do (the TRL measurement: 8 completions/step, 4/prompt, 24 tokens, lr 5e-6, beta 0).
WORK = {"completions_per_prompt": 4, "completions_per_step": 8, "max_new_tokens": 24, "lr": 5e-6, "beta": 0.0,
        "temperature": 1.0, "loss": "token (TRL dapo)", "scale_rewards": "group", "clip": 0.2, "max_grad_norm": 1.0,
        "lr_schedule": "constant", "finetune": "full"}
# Reward weights are irrelevant with shaping_scale 0 (total = I[success]); the RewardModel still needs valid ones.
_EQUAL_WEIGHTS = {"correctness": 0.16, "reasoning": 0.14, "grounding": 0.14, "clarity": 0.14, "conciseness": 0.14,
                  "format": 0.14, "clarification": 0.14}

# ----------------------------------------------------------------------------- the task
SUFFIX = "Reply with only the final number."
NAMES = ("Ava", "Ben", "Chloe", "Dan", "Ella", "Finn", "Grace", "Hugo", "Iris", "Jack", "Kira", "Leo", "Maya",
         "Noah", "Olivia", "Paul", "Rosa", "Sam", "Tara", "Umar", "Vera", "Will", "Yara", "Zane")
THINGS = ("apples", "marbles", "stickers", "books", "coins", "shells", "pencils", "cards", "stamps", "cookies",
          "balloons", "beads", "toy cars", "candles", "buttons", "feathers")
ADD = (
    "{n} has {a} {x}. {n} gets {b} more {x}. How many {x} does {n} have now?",
    "There are {a} {x} in a box. Someone puts in {b} more. How many {x} are in the box now?",
    "{n} collected {a} {x} on Monday and {b} {x} on Tuesday. How many {x} did {n} collect in total?",
    "A shop had {a} {x}. A delivery brought {b} more {x}. How many {x} does the shop have now?",
    "{n} had {a} {x} and was given {b} more. How many {x} does {n} have?",
    "One jar holds {a} {x} and another holds {b} {x}. How many {x} are there altogether?",
)
SUB = (
    "{n} has {a} {x}. {n} gives away {b} of them. How many {x} does {n} have left?",
    "There are {a} {x} in a box. {b} are taken out. How many {x} are still in the box?",
    "{n} had {a} {x} and lost {b}. How many {x} does {n} have now?",
    "A shop had {a} {x} and sold {b} of them. How many {x} are left in the shop?",
    "{n} needs {a} {x} and already has {b}. How many more {x} does {n} need?",
    "A bag held {a} {x}. {n} used {b} of them. How many {x} remain in the bag?",
)


def word_problems(n: int, *, seed: int, prefix: str, exclude: set | None = None) -> list[dict]:
    """`n` add/subtract word problems with two-digit operands (a difference is never negative), as generic
    single-turn items: id, task, messages, answer, verifier "numeric". Distinct (a, op, b) triples, none in
    `exclude`; deterministic per seed."""
    rng = random.Random(seed)
    out, seen = [], set(exclude or ())
    while len(out) < n:
        op = rng.choice("+-")
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        if op == "-":
            a, b = max(a, b), min(a, b)
        key = (a, op, b)
        if key in seen or (op == "-" and a == b):
            continue
        seen.add(key)
        text = rng.choice(ADD if op == "+" else SUB).format(n=rng.choice(NAMES), x=rng.choice(THINGS), a=a, b=b)
        q = f"{text} {SUFFIX}"
        out.append({"id": f"{prefix}{len(out):04d}", "task": "add_sub", "verifier": "numeric", "single_turn": True,
                    "messages": [{"role": "user", "content": q}], "question": q,
                    "answer": str(a + b if op == "+" else a - b), "meta": {"key": [a, op, b]}})
    return out


def split_items(n_eval: int, n_train: int = TRAIN_ITEMS, seed: int = SEED) -> tuple[list[dict], list[dict]]:
    """(training items, held-out items): disjoint problems."""
    held_out = word_problems(n_eval, seed=seed, prefix="heldout-")
    train = word_problems(n_train, seed=seed + 1, prefix="train-",
                          exclude={tuple(it["meta"]["key"]) for it in held_out})
    return train, held_out


def correctness(item: dict, episode) -> float:
    """The reward of both trainers: 1 when the verifier accepts the episode's answer, else 0."""
    from rc1.envs.verifiers import verify_episode

    return float(verify_episode(item, episode).success)


def single_turn_episode(fmt, item: dict, completion_ids: list[int], max_new_tokens: int):
    """The Episode of a completion TRL generated (ids up to and including its end-of-turn token)."""
    from rc1.envs.env import EpisodeState

    state = EpisodeState.start(item, fmt)
    ids = list(completion_ids)
    hit_limit = len(ids) >= max_new_tokens and not (ids and ids[-1] in fmt.eos_ids)
    state.add_model_turn(ids, hit_limit)
    return state.to_episode()


def greedy_scores(model, tokenizer, items: list[dict], max_new_tokens: int, batch_size: int = 128) -> list[float]:
    """Each item's score (1 answered correctly, else 0) under greedy decoding (one turn), the eval of both trainers."""
    from rc1.envs.rollout import generate_episodes

    scores: list[float] = []
    for i in range(0, len(items), batch_size):
        chunk = items[i:i + batch_size]
        episodes = generate_episodes(model, tokenizer, chunk, greedy=True, max_new_tokens=max_new_tokens,
                                     batch_size=batch_size)
        scores += [correctness(it, ep) for it, ep in zip(chunk, episodes)]
    return scores


def greedy_accuracy(model, tokenizer, items: list[dict], max_new_tokens: int, batch_size: int = 128) -> float:
    """Share of `items` answered correctly by greedy decoding (one turn)."""
    return statistics.fmean(greedy_scores(model, tokenizer, items, max_new_tokens, batch_size)) if items else 0.0


class HeldOutEval:
    """The held-out eval of both trainers: a fresh fp32 copy of the model, loaded with the trainer's current
    weights before each eval and decoded outside any autocast (a trainer's own model may run its forward under
    bf16 autocast: Accelerate wraps it so), by the same greedy decoder."""

    def __init__(self, base: str, device, held_out: list[dict]):
        import torch

        from rc1.config.schema import TrainConfig
        from rc1.models.loader import load_model

        cfg = TrainConfig(model={"base": base, "gradient_checkpointing": False}, finetune={"method": "full"})
        self.model, self.tokenizer = load_model(cfg, device=device, dtype=torch.float32, for_training=False)
        self.model.eval()
        self.held_out = held_out

    def __call__(self, weights_of) -> list[float]:
        """Scores of the held-out items by `weights_of`'s current weights (any module with the model's state dict)."""
        import torch

        with torch.no_grad():
            self.model.load_state_dict({k: v.detach().float() for k, v in weights_of.state_dict().items()})
            with torch.autocast(device_type=next(self.model.parameters()).device.type, enabled=False):
                return greedy_scores(self.model, self.tokenizer, self.held_out, WORK["max_new_tokens"])


# ----------------------------------------------------------------------------- the clock
class BudgetClock:
    """Training time against a budget, with evaluations off the clock.

    `step_done(step)` after each optimizer step: evaluates when the training time passed the next
    multiple of `eval_every_s`, and once more (then returns True: stop) when it reached the budget.
    `evaluate` gives the accuracy, or each held-out item's score (kept with the point as `scores`).
    """

    def __init__(self, budget_s: float, eval_every_s: float, evaluate: Callable[[], float | list[float]],
                 on_point: Callable[[list[dict]], None] = lambda points: None):
        self.budget_s, self.eval_every_s = float(budget_s), float(eval_every_s)
        self.evaluate, self.on_point = evaluate, on_point
        self.points: list[dict] = []
        self.eval_s = 0.0
        self.t0: float | None = None
        self.next_eval = self.eval_every_s

    def start(self) -> None:
        """Evaluate the starting model, then start the clock."""
        self.t0 = time.perf_counter()
        self.point(0)

    def train_s(self) -> float:
        return time.perf_counter() - self.t0 - self.eval_s

    def step_done(self, step: int) -> bool:
        t = self.train_s()
        if t >= self.budget_s:
            self.point(step)
            return True
        if t >= self.next_eval:
            self.point(step)
            self.next_eval = (math.floor(t / self.eval_every_s) + 1) * self.eval_every_s
        return False

    def point(self, step: int) -> None:
        t = self.train_s()
        e0 = time.perf_counter()
        result = self.evaluate()  # the accuracy, or each item's score
        took = time.perf_counter() - e0
        self.eval_s += took
        point = {"train_s": round(t, 3), "step": step, "eval_s": round(took, 3)}
        if isinstance(result, (list, tuple)):
            point.update(accuracy=statistics.fmean(result) if result else 0.0, scores=list(result))
        else:
            point["accuracy"] = result
        self.points.append(point)
        self.on_point(self.points)


def time_to_accuracy(points: list[dict], target: float) -> float | None:
    """Training seconds of the first eval point at or above `target` (None when none reaches it)."""
    for p in points:
        if p["accuracy"] >= target - 1e-12:
            return p["train_s"]
    return None


def smoothed(points: list[dict], k: int = SMOOTH) -> list[float]:
    """Running mean of the last `k` accuracies at each eval point (fewer at the start)."""
    accs = [p["accuracy"] for p in points]
    return [statistics.fmean(accs[max(0, i - k + 1):i + 1]) for i in range(len(accs))]


def time_to_smoothed(points: list[dict], target: float, k: int = SMOOTH) -> float | None:
    """Training seconds at which the smoothed curve first reaches `target`, linear between eval points (None when
    it never does)."""
    curve = smoothed(points, k)
    for i, (p, a) in enumerate(zip(points, curve)):
        if a >= target - 1e-12:
            if i == 0 or curve[i - 1] >= a:
                return float(p["train_s"])
            t0, a0 = points[i - 1]["train_s"], curve[i - 1]
            return float(t0 + (target - a0) / (a - a0) * (p["train_s"] - t0))
    return None


def paired_gain_ci(before: list[float], after: list[float], seed: int = 0) -> tuple[float, float]:
    """95 % bootstrap interval (scipy, items resampled) of the mean per-item gain after - before."""
    import numpy as np
    from scipy.stats import bootstrap

    diff = np.asarray(after, dtype=float) - np.asarray(before, dtype=float)
    if len(diff) < 2 or np.all(diff == diff[0]):
        return float(diff.mean()), float(diff.mean())
    res = bootstrap((diff,), np.mean, n_resamples=10000, method="percentile", random_state=seed)
    return float(res.confidence_interval.low), float(res.confidence_interval.high)


def compare_seed(rc1: dict, trl: dict, budget_s: float) -> dict:
    """One seed's comparison, the same statistic for both trainers (see the module docstring)."""
    target = smoothed(trl["points"])[-1]
    t_rc1, t_trl = time_to_smoothed(rc1["points"], target), time_to_smoothed(trl["points"], target)
    first, last = trl["points"][0], trl["points"][-1]
    gain_ci = (paired_gain_ci(first["scores"], last["scores"]) if "scores" in first and "scores" in last
               else (last["accuracy"] - first["accuracy"],) * 2)
    valid = gain_ci[0] > 0 and t_trl is not None and t_trl > 0
    return {"target_accuracy": target, "rc1_time_to_target_s": t_rc1, "trl_time_to_target_s": t_trl,
            "ratio": t_rc1 / t_trl if valid and t_rc1 is not None else None,
            "trl_gain": last["accuracy"] - first["accuracy"], "trl_gain_ci95": list(gain_ci), "trl_learned": valid,
            "rc1_final_smoothed": smoothed(rc1["points"])[-1], "trl_final_smoothed": target,
            "old_statistic": old_compare(rc1, trl, budget_s)}


def summarize(per_seed: list[dict], seed: int = 0) -> dict:
    """Across seeds: the median ratio, its bootstrap 95 % interval, and whether the target is met. A seed where TRL
    learned but rc1 never reached TRL's accuracy in the budget counts as an unbounded ratio (rc1 slower than any
    finite one): the median can still be finite, the interval's upper end is then unbounded (None), and the
    target unmet. A seed where TRL did not learn (gain interval not above 0) says nothing: no median."""
    import numpy as np
    from scipy.stats import bootstrap

    ratios = [c["ratio"] if c["ratio"] is not None or not c.get("trl_learned") else math.inf for c in per_seed]
    complete = bool(per_seed) and all(r is not None for r in ratios)
    median = ci = None
    if complete:
        finite = np.asarray([min(r, _UNBOUNDED) for r in ratios])  # scipy's percentiles need finite values
        median = float(np.median(finite))
        if len(ratios) > 1 and len(set(ratios)) > 1:
            res = bootstrap((finite,), np.median, n_resamples=10000, method="percentile", random_state=seed)
            ci = [float(res.confidence_interval.low), float(res.confidence_interval.high)]
        else:
            ci = [median, median]
        median, ci = _bounded(median), [_bounded(c) for c in ci]
    rc1_final = statistics.median(c["rc1_final_smoothed"] for c in per_seed) if per_seed else None
    trl_final = statistics.median(c["trl_final_smoothed"] for c in per_seed) if per_seed else None
    met = (complete and median is not None and median <= TARGET_RATIO and ci[1] is not None
           and ci[1] <= TARGET_CI_HIGH and rc1_final >= trl_final - 1e-12)
    old = [c["old_statistic"]["time_to_trl_accuracy_ratio"] for c in per_seed]
    return {"seeds": len(per_seed), "ratios": [_bounded(r) if r is not None else None for r in ratios],
            "rc1_never_reached": [c.get("seed") for c, r in zip(per_seed, ratios) if r == math.inf],
            "median_ratio": median, "median_ratio_ci95": ci,
            "rc1_final_smoothed_median": rc1_final, "trl_final_smoothed_median": trl_final,
            "target": f"median ratio <= {TARGET_RATIO}, its 95 % interval's upper end <= {TARGET_CI_HIGH}, rc1's "
                      "final accuracy no lower than TRL's, TRL's gain above 0 on every seed",
            "target_met": bool(met), "old_statistic_ratios": old}


_UNBOUNDED = 1e9  # stands in for an infinite ratio inside the bootstrap; anything above 1e6 reads back as None


def _bounded(x: float) -> float | None:
    """A ratio for the report: None where it is unbounded (rc1 never reached TRL's accuracy)."""
    return None if x > 1e6 else x


# ----------------------------------------------------------------------------- the two trainers (child processes)
def _setup_process(threads: int | None) -> dict:
    import torch

    if threads:
        torch.set_num_threads(threads)
    try:
        torch.set_num_interop_threads(1)  # nothing here runs inter-op parallel work; fewer idle threads
    except RuntimeError:  # already set in this process
        pass
    return {"torch_threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads()}


def _progress_writer(spec: dict, arm: str) -> Callable[[dict], None]:
    """Rewrites the report with this arm's progress in the running seed (atomic): a run cut short leaves a valid
    file."""
    from rc1.runtime.atomic import atomic_write_json

    def write(progress: dict) -> None:
        doc = dict(spec["doc"])
        doc["running"] = {**doc.get("running", {}), arm: progress}
        atomic_write_json(spec["report"], doc)
    return write


@contextmanager
def _arm(spec: dict, name: str):
    """What each arm's child process starts with: its threads set, the items split (train, held out), a
    scratch folder removed after, and its progress writer."""
    threads = _setup_process(spec["threads"])
    train, held_out = split_items(spec["eval_items"])
    root = Path(tempfile.mkdtemp(prefix=f"rc1-bench-learn-{name}-"))
    try:
        yield threads, train, held_out, root, _progress_writer(spec, name)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def rc1_config(spec: dict) -> dict:
    """rc1's training config for the work (WORK)."""
    g = WORK["completions_per_prompt"]
    return {
        "profile": "laptop", "seed_pool": "data/none.jsonl", "callbacks": ["logging"], "use_overclar_penalty": False,
        "run": {"name": "bench-learn", "seed": spec["seed"], "max_steps": 10**9, "save_steps": 10**9,
                "eval_steps": 10**9, "mixed_precision": "bf16", "threads": spec["threads"]},
        "data": {"train_path": "data/train.jsonl"},
        "model": {"base": spec["model"], "max_new_tokens": WORK["max_new_tokens"], "temperature": WORK["temperature"],
                  "top_p": 1.0, "gradient_checkpointing": False, "lora": {"enable": False}},
        "finetune": {"method": "full"}, "priority_sampling": {"enable": False},
        "engine": {"name": "pure_pt", "lr": WORK["lr"], "lr_schedule": "constant", "clip_coef": WORK["clip"],
                   "max_grad_norm": WORK["max_grad_norm"]},
        "strategy": {"name": "grpo", "num_generations": g, "prompts_per_step": WORK["completions_per_step"] // g,
                     "kl_coef": WORK["beta"], "loss_type": "token", "scale_rewards": WORK["scale_rewards"],
                     "resample_zero_signal": 0, "max_turns": 1},
        "reward": {"shaping_scale": 0.0, "difficulty_beta": 0.0},
    }


def _train_rc1(spec: dict) -> dict:
    """Child process: rc1's pure PyTorch engine (the recipe `rc1 train` runs) for the budget."""
    from rc1.callbacks.base import BaseCallback
    from rc1.config.schema import TrainConfig
    from rc1.envs.env import ChatFormat, episode_messages
    from rc1.rewards.reward import RewardModel
    from rc1.runtime.device import peak_memory_mb
    from rc1.runtime.workspace import Workspace
    from rc1.training.base import make_recipe

    with _arm(spec, "rc1") as (threads, train, held_out, root, write):
        ws = Workspace(root)
        (root / "data").mkdir(parents=True)
        (root / "data/train.jsonl").write_text("".join(json.dumps(it) + "\n" for it in train))
        cfg = TrainConfig.model_validate(rc1_config(spec))
        reward = RewardModel(_EQUAL_WEIGHTS, cfg.reward, use_overclar_penalty=False)
        recipe = make_recipe(ws, cfg, checkpoints=False, reward_model=reward)
        recipe.setup()
        engine = recipe.engine
        fmt = ChatFormat(engine.tokenizer)
        prompt_ids = fmt.prompt_ids(episode_messages(held_out[0]))
        progress = {"trainer": "rc1 pure_pt", "precision": engine.precision, **threads, "complete": False}

        held_out_eval = HeldOutEval(spec["model"], engine.device, held_out)
        clock = BudgetClock(spec["budget_s"], spec["eval_every_s"], lambda: held_out_eval(engine.model),
                            on_point=lambda points: write({**progress, "points": list(points)}))

        class Budget(BaseCallback):
            def on_train_start(self, r):
                clock.start()

            def on_step_end(self, r, record):
                if clock.step_done(r.step):
                    r.request_stop("budget")

        recipe.callbacks.insert(0, Budget())  # before logging (which always runs last)
        recipe.train()
        steps = []
        for line in ws.metrics_path.read_text().splitlines():
            r = json.loads(line)
            spans = {k: v for k, v in r.items() if k.startswith("time/")}
            spans["time/score_s"] = spans.get("time/rollout_s", 0.0) - spans.get("time/generate_s", 0.0)
            steps.append({"step": r["step"], "sec": r["sec_per_step"], "completion_tokens": r.get("completion_tokens"),
                          "reward": r.get("reward"), **spans})
        return _summary(progress, clock, steps=steps, peak_mb=peak_memory_mb(engine.device), prompt_ids=prompt_ids)


def _train_trl(spec: dict) -> dict:
    """Child process: TRL's GRPOTrainer (its defaults, WORK's settings) for the budget."""
    import torch
    import trl
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from rc1.config.schema import TrainConfig
    from rc1.envs.env import ChatFormat
    from rc1.models.loader import load_model
    from rc1.runtime.device import get_device, peak_memory_mb

    with _arm(spec, "trl") as (threads, train, held_out, root, write):
        device = get_device()
        mcfg = TrainConfig(model={"base": spec["model"], "gradient_checkpointing": False}, finetune={"method": "full"})
        model, tok = load_model(mcfg, device=device, dtype=torch.float32, for_training=True)
        fmt = ChatFormat(tok)
        limit = WORK["max_new_tokens"]
        completion_tokens: list[int] = []
        rewards: list[float] = []

        def correct(prompts, completions, completion_ids, item, **_):
            out = []
            for ids, it in zip(completion_ids, item):
                it = json.loads(it)
                out.append(correctness(it, single_turn_episode(fmt, it, ids, limit)))
                completion_tokens.append(len(ids))
            rewards.extend(out)
            return out

        g = WORK["completions_per_prompt"]
        bf16 = spec["trl_precision"] == "bf16"
        args = GRPOConfig(
            output_dir=str(root / "out"), seed=spec["seed"], data_seed=spec["seed"], report_to="none",
            save_strategy="no", logging_steps=1, disable_tqdm=True, max_steps=10**9, use_cpu=device.type == "cpu",
            bf16=bf16, per_device_train_batch_size=WORK["completions_per_step"], num_generations=g,
            max_completion_length=limit, learning_rate=WORK["lr"], lr_scheduler_type="constant",
            beta=WORK["beta"], loss_type="dapo", scale_rewards=WORK["scale_rewards"], epsilon=WORK["clip"],
            max_grad_norm=WORK["max_grad_norm"], temperature=WORK["temperature"], dataloader_num_workers=0,
            gradient_checkpointing=False)  # TRL's default is on: it recomputes activations this small model need not
        dataset = Dataset.from_list([{"prompt": it["messages"], "item": json.dumps(it)} for it in train])
        progress = {"trainer": f"trl {trl.__version__} GRPOTrainer", "precision": "bf16" if bf16 else "fp32",
                    "gradient_checkpointing": bool(args.gradient_checkpointing), **threads, "complete": False}
        holder: dict = {}
        held_out_eval = HeldOutEval(spec["model"], device, held_out)

        def evaluate() -> list[float]:
            trainer = holder["trainer"]
            return held_out_eval(trainer.accelerator.unwrap_model(trainer.model))

        clock = BudgetClock(spec["budget_s"], spec["eval_every_s"], evaluate,
                            on_point=lambda points: write({**progress, "points": list(points)}))
        steps: list[dict] = []

        class Budget(TrainerCallback):
            def on_train_begin(self, args, state, control, **kw):
                clock.start()
                self.last = clock.train_s()
                self.seen = 0

            def on_step_end(self, args, state, control, **kw):
                now = clock.train_s()
                n = len(completion_tokens)
                steps.append({"step": state.global_step, "sec": now - self.last,
                              "completion_tokens": float(sum(completion_tokens[self.seen:n])),
                              "reward": statistics.fmean(rewards[self.seen:n]) if n > self.seen else None})
                self.seen = n
                if clock.step_done(state.global_step):
                    control.should_training_stop = True
                self.last = clock.train_s()

        trainer = GRPOTrainer(model=model, reward_funcs=[correct], args=args, train_dataset=dataset,
                              processing_class=tok, callbacks=[Budget()])
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)
        holder["trainer"] = trainer
        prompt_ids = list(tok.apply_chat_template(held_out[0]["messages"], add_generation_prompt=True, tokenize=True,
                                                  return_dict=True)["input_ids"])
        trainer.train()
        return _summary(progress, clock, steps=steps, peak_mb=peak_memory_mb(device), prompt_ids=prompt_ids)


def _summary(progress: dict, clock: BudgetClock, *, steps: list[dict], peak_mb: float, prompt_ids: list[int]) -> dict:
    train_s = clock.points[-1]["train_s"] if clock.points else 0.0
    secs = [s["sec"] for s in steps]
    tokens = sum(s["completion_tokens"] or 0.0 for s in steps)
    out = {**progress, "complete": True, "points": clock.points, "final_accuracy": clock.points[-1]["accuracy"],
           "train_s": train_s, "eval_s_total": round(clock.eval_s, 3), "steps": len(steps),
           "sec_per_step_median": statistics.median(secs) if secs else None,
           "sec_per_step_mean": statistics.fmean(secs) if secs else None,
           "completion_tokens": tokens, "completion_tokens_per_s": tokens / sum(secs) if secs else None,
           "peak_memory_mb": round(peak_mb, 1), "prompt_ids_of_first_held_out_item": prompt_ids,
           "per_step": steps}
    spans = sorted({k for s in steps for k in s if k.startswith("time/")})
    if spans:
        out["time_breakdown_s_per_step"] = {k: statistics.fmean(s.get(k, 0.0) for s in steps) for k in spans}
    return out


def _in_child(fn, spec: dict) -> dict:
    ctx = mp.get_context("spawn")
    with ctx.Pool(1) as pool:
        return pool.apply(fn, (spec,))


# ----------------------------------------------------------------------------- report
def old_compare(rc1: dict, trl: dict, budget_s: float) -> dict:
    """The statistic of the first version of this bench, kept for comparison: rc1's first raw eval point at or
    above TRL's last raw point, over the budget, target <= 0.5 (it compares a noisy point of rc1's against one of
    TRL's and counts any TRL gain above 0)."""
    target = trl["final_accuracy"]
    t = time_to_accuracy(rc1["points"], target)
    ratio = None if t is None else t / budget_s
    gain = target - trl["points"][0]["accuracy"]
    # when TRL did not improve on its start, rc1 "reaches" its accuracy at 0 s: a ratio that says nothing
    return {"trl_final_accuracy": target, "rc1_final_accuracy": rc1["final_accuracy"],
            "rc1_time_to_trl_accuracy_s": t, "time_to_trl_accuracy_ratio": ratio,
            "trl_gain_pp": round(100 * gain, 2), "target_ratio": 0.5,
            "target_met": gain > 0 and ratio is not None and ratio <= 0.5}


def plot(doc: dict, path: Path) -> Path:
    """Left: each seed's smoothed accuracy against training time (raw points faint), the targets dotted. Right:
    optimizer steps against training time."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for result in doc["per_seed"]:
        for arm, color in (("rc1", "tab:blue"), ("trl", "tab:orange")):
            r = result[arm]
            xs = [p["train_s"] for p in r["points"]]
            label = f"{r['trainer']}, seed {result['seed']} ({r.get('steps', '?')} steps)"
            ax.plot(xs, [100 * a for a in smoothed(r["points"])], color=color, label=label, linewidth=1.2)
            ax.plot(xs, [100 * p["accuracy"] for p in r["points"]], ".", color=color, alpha=0.35)
            ax2.plot(xs, [p["step"] for p in r["points"]], marker=".", color=color, label=label)
        ax.axhline(100 * result["target_accuracy"], color="grey", linestyle=":", linewidth=0.8)
    summ = doc.get("summary") or {}
    ratio, ci = summ.get("median_ratio"), summ.get("median_ratio_ci95")
    text = "none" if ratio is None else f"{ratio:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"
    ax.set_title(f"median time-to-target ratio rc1/TRL {text} (target <= {TARGET_RATIO})", fontsize=9)
    ax.set_xlabel("training time, s (evaluation paused)")
    ax.set_ylabel(f"greedy accuracy on {doc['eval_items']} held-out items, % (running mean of {SMOOTH})")
    ax.legend(fontsize=6)
    ax2.set_xlabel("training time, s")
    ax2.set_ylabel("optimizer steps")
    ax2.legend(fontsize=6)
    fig.suptitle(f"rc1 bench learn: {doc['model']}, budget {doc['budget_s']:g} s, TRL {doc['trl_precision']}",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _machine() -> dict:
    import platform

    import torch

    from rc1.runtime.device import cpu_bf16_supported

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "cpu_bf16": cpu_bf16_supported(), "torch": torch.__version__,
            "load_avg_1m_start": round(os.getloadavg()[0], 2)}


def arm_order(seed: int) -> tuple[str, str]:
    """Which trainer runs first for `seed`: alternating along the seed sequence (rc1 on SEED, SEED + 2, ...), so
    neither always has the cooler machine, whichever seed a run starts from."""
    return ("rc1", "trl") if (seed - SEED) % 2 == 0 else ("trl", "rc1")


def run(ws, quick: bool = False, budget_s: float = 900.0, model: str = DEFAULT_MODEL, eval_every_s: float | None = None,
        eval_items: int = MIN_EVAL_ITEMS, threads: int | None = None, seed: int = SEED, seeds: int = SEEDS,
        trl_precision: str = "auto", **_ignored) -> dict:
    """Train rc1 and TRL for `budget_s` seconds each, `seeds` times; returns (and writes) the report. `quick` is
    accepted for the common bench interface and changes nothing: the work is the work; pass a small budget."""
    from rc1.runtime.atomic import atomic_write_json
    from rc1.runtime.device import cpu_bf16_supported, get_device
    from rc1.runtime.errors import ConfigError

    if not (isinstance(budget_s, (int, float)) and math.isfinite(budget_s) and budget_s > 0):
        raise ConfigError(f"--budget-s {budget_s!r}: expected a number of seconds > 0")
    eval_every_s = float(eval_every_s) if eval_every_s is not None else max(1.0, budget_s / 15)
    if not (math.isfinite(eval_every_s) and eval_every_s > 0):
        raise ConfigError(f"eval_every_s {eval_every_s!r}: expected seconds > 0")
    if int(eval_items) < 1:
        raise ConfigError(f"--eval-items {eval_items}: expected >= 1 (the measurement uses {MIN_EVAL_ITEMS} or more)")
    if threads is not None and int(threads) < 1:
        raise ConfigError(f"threads {threads}: expected >= 1")
    if int(seeds) < 1:
        raise ConfigError(f"--seeds {seeds}: expected >= 1 (the measurement uses {SEEDS})")
    native_bf16 = get_device().type != "cpu" or cpu_bf16_supported()
    if trl_precision == "auto":
        trl_precision = "bf16" if native_bf16 else "fp32"
    if trl_precision not in ("bf16", "fp32"):
        raise ConfigError(f"--trl-precision {trl_precision!r}: expected auto, bf16 or fp32")
    if trl_precision == "bf16" and not native_bf16:
        raise ConfigError("--trl-precision bf16: this CPU has no native bf16 (AVX512-BF16 or AMX), where bf16 is "
                          "emulated and slower; use fp32")
    out_dir = ws.reports / "bench"
    report, png = out_dir / REPORT, out_dir / PLOT
    seed_list = [int(seed) + i for i in range(int(seeds))]
    doc: dict = {"bench": "learn", "complete": False, "model": model, "budget_s": float(budget_s),
                 "eval_every_s": eval_every_s, "eval_items": int(eval_items),
                 "smoke": int(eval_items) < MIN_EVAL_ITEMS, "train_items": TRAIN_ITEMS, "seeds": seed_list,
                 "trl_precision": trl_precision, "work": WORK, "smooth_points": SMOOTH,
                 "eval": "greedy, one turn, a fresh fp32 copy loaded with the trainer's weights, no autocast; clock "
                         "paused while evaluating",
                 "machine": _machine(), "per_seed": [], "summary": None}
    atomic_write_json(report, doc)
    print(f"rc1 bench learn: {model}, {budget_s:g} s of training each, eval every {eval_every_s:g} s on "
          f"{eval_items} held-out items, seeds {seed_list} (alternating order), TRL in {trl_precision}")
    trainers = {"rc1": _train_rc1, "trl": _train_trl}
    for s in seed_list:
        spec = {"model": model, "budget_s": float(budget_s), "eval_every_s": eval_every_s,
                "eval_items": int(eval_items), "threads": threads, "seed": s, "trl_precision": trl_precision,
                "report": str(report)}
        order = arm_order(s)
        doc["running"] = {"seed": s, "order": list(order)}
        arms: dict = {}
        for arm in order:
            arms[arm] = _in_child(trainers[arm], {**spec, "doc": doc})
            doc["running"][arm] = arms[arm]
            atomic_write_json(report, doc)
            _print_arm(arms[arm])
        result = {"seed": s, "order": list(order), "rc1": arms["rc1"], "trl": arms["trl"],
                  "same_prompt_ids": arms["rc1"]["prompt_ids_of_first_held_out_item"]
                  == arms["trl"]["prompt_ids_of_first_held_out_item"],
                  **compare_seed(arms["rc1"], arms["trl"], float(budget_s))}
        doc["per_seed"].append(result)
        doc.pop("running")
        atomic_write_json(report, doc)
        ratio = result["ratio"]
        print(f"seed {s}: target {result['target_accuracy']:.3f} (TRL's final smoothed accuracy; TRL gain 95 % "
              f"interval [{result['trl_gain_ci95'][0]:+.3f}, {result['trl_gain_ci95'][1]:+.3f}]); time to it: rc1 "
              f"{_secs(result['rc1_time_to_target_s'])}, TRL {_secs(result['trl_time_to_target_s'])}; ratio "
              + ("none" if ratio is None else f"{ratio:.3f}"))
        if not result["same_prompt_ids"]:
            print("WARNING: rc1 and TRL tokenized the prompt differently (see *.prompt_ids_of_first_held_out_item)")
    doc["summary"] = summarize(doc["per_seed"])
    doc["machine"]["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    doc["complete"] = True
    summ = doc["summary"]
    ci = summ["median_ratio_ci95"]
    print(f"median ratio over {len(seed_list)} seed(s): "
          + ("none" if summ["median_ratio"] is None else f"{summ['median_ratio']:.3f} [{_ratio(ci[0])}, {_ratio(ci[1])}]")
          + (f" (rc1 never reached TRL's accuracy on seed(s) {summ['rc1_never_reached']})" if summ["rc1_never_reached"]
             else "")
          + f"; final smoothed accuracy rc1 {summ['rc1_final_smoothed_median']:.3f}, TRL "
          f"{summ['trl_final_smoothed_median']:.3f}; target ({summ['target']}): "
          f"{'met' if summ['target_met'] else 'NOT met'}")
    doc["plot"] = ws.rel(plot(doc, png))
    atomic_write_json(report, doc)
    return doc


def _ratio(r: float | None) -> str:
    return "unbounded" if r is None else f"{r:.3f}"


def _secs(t: float | None) -> str:
    return "never" if t is None else f"{t:.0f} s"


def _print_arm(r: dict) -> None:
    accs = " ".join(f"{p['train_s']:.0f}s:{p['accuracy']:.2f}" for p in r["points"])
    tps = r["completion_tokens_per_s"]
    print(f"{r['trainer']:28} {r['steps']:5d} steps  {r['sec_per_step_median'] or 0:6.2f} s/step  "
          f"{tps or 0:7.1f} tok/s  peak {r['peak_memory_mb']:.0f} MB  accuracy {accs}")
    if r.get("time_breakdown_s_per_step"):
        print("  rc1 time per step: " + ", ".join(f"{k[5:-2]} {v:.2f}s" for k, v in r["time_breakdown_s_per_step"].items()))
