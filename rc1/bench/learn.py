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
  fine-tuning, no dynamic resampling. Everything else is each trainer's own default: TRL's
  GRPOConfig defaults (bf16 autocast where the CPU has native bf16, gradient checkpointing on), and
  rc1's engine with bf16 autocast where the CPU has AVX512-BF16/AMX, fp32 elsewhere.

Eval: greedy accuracy on the held-out problems (100 by default; fewer only for a smoke run, marked `smoke`) at the start, every `eval_every_s`
seconds of training time, and when the budget is spent. The clock is paused while evaluating: an
eval point's time is training time only. Both trainers are evaluated by the same function (rc1's
greedy decoder on the fp32 training weights, one turn, same max_new_tokens).

Report (reports/bench/learn.json, rewritten atomically after every eval point, so a run cut short
leaves a valid partial file with `complete: false`; reports/bench/learn.png):
- per trainer: the eval points (training seconds, step, accuracy), steps, sec/step, completion
  tokens/s, peak memory; rc1's time breakdown (`time/...` spans: generation, scoring, plan,
  reference pass, backward, optimizer).
- `trl_final_accuracy`, `rc1_final_accuracy`, `rc1_time_to_trl_accuracy_s` (the training time of
  rc1's first eval point at or above TRL's final accuracy) and `time_to_trl_accuracy_ratio` (that
  time divided by the budget; null when rc1 never reaches it). A ratio <= 0.5 meets the target.
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
TARGET_RATIO = 0.5
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


def greedy_accuracy(model, tokenizer, items: list[dict], max_new_tokens: int, batch_size: int = 128) -> float:
    """Share of `items` answered correctly by greedy decoding (one turn), the eval of both trainers."""
    from rc1.envs.rollout import generate_episodes

    correct = 0.0
    for i in range(0, len(items), batch_size):
        chunk = items[i:i + batch_size]
        episodes = generate_episodes(model, tokenizer, chunk, greedy=True, max_new_tokens=max_new_tokens,
                                     batch_size=batch_size)
        correct += sum(correctness(it, ep) for it, ep in zip(chunk, episodes))
    return correct / max(1, len(items))


# ----------------------------------------------------------------------------- the clock
class BudgetClock:
    """Training time against a budget, with evaluations off the clock.

    `step_done(step)` after each optimizer step: evaluates when the training time passed the next
    multiple of `eval_every_s`, and once more (then returns True: stop) when it reached the budget.
    """

    def __init__(self, budget_s: float, eval_every_s: float, evaluate: Callable[[], float],
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
        accuracy = self.evaluate()
        took = time.perf_counter() - e0
        self.eval_s += took
        self.points.append({"train_s": round(t, 3), "step": step, "accuracy": accuracy, "eval_s": round(took, 3)})
        self.on_point(self.points)


def time_to_accuracy(points: list[dict], target: float) -> float | None:
    """Training seconds of the first eval point at or above `target` (None when none reaches it)."""
    for p in points:
        if p["accuracy"] >= target - 1e-12:
            return p["train_s"]
    return None


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
    """Rewrites the report with this arm's progress (atomic): a run cut short leaves a valid file."""
    from rc1.runtime.atomic import atomic_write_json

    def write(progress: dict) -> None:
        doc = dict(spec["doc"])
        doc[arm] = progress
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
    import torch

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

        def evaluate() -> float:
            with torch.no_grad():
                return greedy_accuracy(engine.model, engine.tokenizer, held_out, WORK["max_new_tokens"])

        clock = BudgetClock(spec["budget_s"], spec["eval_every_s"], evaluate,
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
    from rc1.runtime.device import cpu_bf16_supported, get_device, peak_memory_mb

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
        bf16 = device.type != "cpu" or cpu_bf16_supported()  # TRL's default, except where bf16 would be emulated
        args = GRPOConfig(
            output_dir=str(root / "out"), seed=spec["seed"], data_seed=spec["seed"], report_to="none",
            save_strategy="no", logging_steps=1, disable_tqdm=True, max_steps=10**9, use_cpu=device.type == "cpu",
            bf16=bf16, per_device_train_batch_size=WORK["completions_per_step"], num_generations=g,
            max_completion_length=limit, learning_rate=WORK["lr"], lr_scheduler_type="constant",
            beta=WORK["beta"], loss_type="dapo", scale_rewards=WORK["scale_rewards"], epsilon=WORK["clip"],
            max_grad_norm=WORK["max_grad_norm"], temperature=WORK["temperature"], dataloader_num_workers=0)
        dataset = Dataset.from_list([{"prompt": it["messages"], "item": json.dumps(it)} for it in train])
        progress = {"trainer": f"trl {trl.__version__} GRPOTrainer", "precision": "bf16" if bf16 else "fp32",
                    "gradient_checkpointing": bool(args.gradient_checkpointing), **threads, "complete": False}
        holder: dict = {}

        def evaluate() -> float:
            m = holder["trainer"].model
            was_training = m.training
            try:
                with torch.no_grad():
                    return greedy_accuracy(m, tok, held_out, limit)
            finally:
                m.train(was_training)

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
def compare(rc1: dict, trl: dict, budget_s: float) -> dict:
    """The headline numbers: both final accuracies, and rc1's time to TRL's final accuracy over the budget."""
    target = trl["final_accuracy"]
    t = time_to_accuracy(rc1["points"], target)
    ratio = None if t is None else t / budget_s
    gain = target - trl["points"][0]["accuracy"]
    # when TRL did not improve on its start, rc1 "reaches" its accuracy at 0 s: a ratio that says nothing
    return {"trl_final_accuracy": target, "rc1_final_accuracy": rc1["final_accuracy"],
            "rc1_time_to_trl_accuracy_s": t, "time_to_trl_accuracy_ratio": ratio,
            "trl_gain_pp": round(100 * gain, 2), "target_ratio": TARGET_RATIO,
            "target_met": gain > 0 and ratio is not None and ratio <= TARGET_RATIO}


def plot(doc: dict, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for arm, color in (("rc1", "tab:blue"), ("trl", "tab:orange")):
        r = doc.get(arm)
        if not r or not r.get("points"):
            continue
        xs = [p["train_s"] for p in r["points"]]
        label = f"{r['trainer']} ({r.get('steps', '?')} steps"
        label += f", {r['completion_tokens_per_s']:.1f} tok/s)" if r.get("completion_tokens_per_s") else ")"
        ax.plot(xs, [100 * p["accuracy"] for p in r["points"]], marker="o", color=color, label=label)
        ax2.plot(xs, [p["step"] for p in r["points"]], marker=".", color=color, label=r["trainer"])
    if doc.get("trl_final_accuracy") is not None:
        ax.axhline(100 * doc["trl_final_accuracy"], color="tab:orange", linestyle=":", linewidth=1)
    if doc.get("rc1_time_to_trl_accuracy_s") is not None:
        ax.axvline(doc["rc1_time_to_trl_accuracy_s"], color="tab:blue", linestyle=":", linewidth=1)
    ax.axvline(TARGET_RATIO * doc["budget_s"], color="grey", linestyle="--", linewidth=0.8)
    ax.set_xlabel("training time, s (evaluation paused)")
    ax.set_ylabel(f"greedy accuracy on {doc['eval_items']} held-out items, %")
    ratio = doc.get("time_to_trl_accuracy_ratio")
    ratio_text = "none (rc1 never reached TRL's final accuracy)" if ratio is None else f"{ratio:.3f}"
    ax.set_title(f"time-to-TRL-accuracy ratio {ratio_text} (target <= {TARGET_RATIO})", fontsize=10)
    ax.legend(fontsize=8)
    ax2.set_xlabel("training time, s")
    ax2.set_ylabel("optimizer steps")
    ax2.legend(fontsize=8)
    fig.suptitle(f"rc1 bench learn: {doc['model']}, budget {doc['budget_s']:g} s", fontsize=11)
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


def run(ws, quick: bool = False, budget_s: float = 900.0, model: str = DEFAULT_MODEL, eval_every_s: float | None = None,
        eval_items: int = MIN_EVAL_ITEMS, threads: int | None = None, seed: int = SEED, **_ignored) -> dict:
    """Train rc1 then TRL for `budget_s` seconds each; returns (and writes) the report. `quick` is accepted
    for the common bench interface and changes nothing: the work is the work; pass a small budget."""
    from rc1.runtime.atomic import atomic_write_json
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
    out_dir = ws.reports / "bench"
    report, png = out_dir / REPORT, out_dir / PLOT
    doc: dict = {"bench": "learn", "complete": False, "model": model, "budget_s": float(budget_s),
                 "eval_every_s": eval_every_s, "eval_items": int(eval_items),
                 "smoke": int(eval_items) < MIN_EVAL_ITEMS, "train_items": TRAIN_ITEMS, "seed": seed,
                 "work": WORK, "eval": "greedy, one turn, fp32 training weights; clock paused while evaluating",
                 "machine": _machine(), "trl_final_accuracy": None, "rc1_final_accuracy": None,
                 "time_to_trl_accuracy_ratio": None}
    atomic_write_json(report, doc)
    spec = {"model": model, "budget_s": float(budget_s), "eval_every_s": eval_every_s, "eval_items": int(eval_items),
            "threads": threads, "seed": seed, "report": str(report)}
    print(f"rc1 bench learn: {model}, {budget_s:g} s of training each, eval every {eval_every_s:g} s on "
          f"{eval_items} held-out items")
    rc1 = _in_child(_train_rc1, {**spec, "doc": doc})
    doc.update(rc1=rc1, rc1_final_accuracy=rc1["final_accuracy"])
    atomic_write_json(report, doc)
    _print_arm(rc1)
    trl = _in_child(_train_trl, {**spec, "doc": doc})
    doc.update(trl=trl, **compare(rc1, trl, float(budget_s)), complete=True)
    doc["same_prompt_ids"] = rc1["prompt_ids_of_first_held_out_item"] == trl["prompt_ids_of_first_held_out_item"]
    doc["machine"]["load_avg_1m_end"] = round(os.getloadavg()[0], 2)
    _print_arm(trl)
    ratio = doc["time_to_trl_accuracy_ratio"]
    print(f"TRL final accuracy {trl['final_accuracy']:.3f}; rc1 final accuracy {rc1['final_accuracy']:.3f}; rc1 "
          f"reached TRL's final accuracy after "
          + (f"{doc['rc1_time_to_trl_accuracy_s']:.0f} s: ratio {ratio:.3f} (target <= {TARGET_RATIO}: "
             f"{'met' if doc['target_met'] else 'NOT met'})" if ratio is not None else "never: ratio null"))
    if not doc["same_prompt_ids"]:
        print("WARNING: rc1 and TRL tokenized the prompt differently (see *.prompt_ids_of_first_held_out_item)")
    doc["plot"] = ws.rel(plot(doc, png))
    atomic_write_json(report, doc)
    return doc


def _print_arm(r: dict) -> None:
    accs = " ".join(f"{p['train_s']:.0f}s:{p['accuracy']:.2f}" for p in r["points"])
    tps = r["completion_tokens_per_s"]
    print(f"{r['trainer']:28} {r['steps']:5d} steps  {r['sec_per_step_median'] or 0:6.2f} s/step  "
          f"{tps or 0:7.1f} tok/s  peak {r['peak_memory_mb']:.0f} MB  accuracy {accs}")
    if r.get("time_breakdown_s_per_step"):
        print("  rc1 time per step: " + ", ".join(f"{k[5:-2]} {v:.2f}s" for k, v in r["time_breakdown_s_per_step"].items()))
