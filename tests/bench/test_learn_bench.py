"""`rc1 bench learn`: the task, the shared reward, the paused clock, the headline numbers, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from rc1.bench import learn


def test_word_problems_are_deterministic_disjoint_and_correct():
    train, held_out = learn.split_items(120, n_train=300)
    again, _ = learn.split_items(120, n_train=300)
    assert train == again and len(held_out) == 120 and len(train) == 300
    keys = lambda items: {tuple(it["meta"]["key"]) for it in items}  # noqa: E731
    assert not keys(train) & keys(held_out) and len(keys(held_out)) == 120
    for it in train + held_out:
        a, op, b = it["meta"]["key"]
        text = it["messages"][0]["content"]
        assert text.endswith(" Reply with only the final number.") and f"{a}" in text and f"{b}" in text
        assert int(it["answer"]) == (a + b if op == "+" else a - b) >= 0
        assert it["single_turn"] and it["verifier"] == "numeric" and len(it["messages"]) == 1
    assert {it["meta"]["key"][1] for it in held_out} == {"+", "-"}


def _tiny_tokenizer():
    from rc1.models.loader import load_tokenizer, resolve_base

    return load_tokenizer(resolve_base("random:qwen3-tiny"))


def test_the_reward_of_both_trainers_is_verified_correctness():
    from rc1.envs.env import ChatFormat

    tiny_tokenizer = _tiny_tokenizer()
    fmt = ChatFormat(tiny_tokenizer)
    item = learn.word_problems(1, seed=0, prefix="x")[0]
    eos = tiny_tokenizer.eos_token_id
    right, wrong = item["answer"], str(int(item["answer"]) + 1)

    def reward(text: str, *, ended: bool = True, limit: int = 24) -> float:
        ids = fmt.encode(text)[:limit]
        return learn.correctness(item, learn.single_turn_episode(fmt, item, ids + ([eos] if ended else []), limit))

    assert reward(right) == 1.0 and reward(f"The answer is {right}.") == 1.0
    assert reward(wrong) == 0.0 and reward("I do not know") == 0.0
    # cut off at max_new_tokens without ending its turn: fails even though the number is in it
    assert reward(f"{right} is what you get when you add them all up and more text", ended=False, limit=6) == 0.0


class FakeTime:
    def __init__(self):
        self.now = 100.0

    def perf_counter(self):
        return self.now


def test_budget_clock_pauses_while_evaluating_and_stops_at_the_budget(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(learn, "time", fake)
    accuracies = iter([0.0, 0.1, 0.2, 0.3, 0.4])

    def evaluate():
        fake.now += 50.0  # every eval takes 50 s of wall time: none of it is training time
        return next(accuracies)

    written = []
    clock = learn.BudgetClock(budget_s=30, eval_every_s=10, evaluate=evaluate, on_point=lambda p: written.append(len(p)))
    clock.start()
    stops = []
    for step in range(1, 20):
        fake.now += 4.0  # a 4-second step
        stops.append(clock.step_done(step))
        if stops[-1]:
            break
    pts = clock.points
    assert [p["train_s"] for p in pts] == [0.0, 12.0, 20.0, 32.0]  # first step end past 10, 20, then the budget
    assert [p["step"] for p in pts] == [0, 3, 5, 8] and stops.count(True) == 1 and len(stops) == 8
    assert clock.eval_s == 200.0 and written == [1, 2, 3, 4]  # the report is rewritten after every point


def test_budget_smaller_than_one_step_still_has_a_final_point(monkeypatch):
    fake = FakeTime()
    monkeypatch.setattr(learn, "time", fake)
    clock = learn.BudgetClock(budget_s=0.5, eval_every_s=60, evaluate=lambda: 0.25)
    clock.start()
    fake.now += 3.0
    assert clock.step_done(1)
    assert [(p["step"], p["train_s"]) for p in clock.points] == [(0, 0.0), (1, 3.0)]


def _pt(t: float, acc: float, n: int = 0) -> dict:
    """An eval point at t seconds; with n, n item scores whose mean is acc."""
    p = {"train_s": t, "accuracy": acc, "step": int(t)}
    if n:
        ones = round(acc * n)
        p["scores"] = [1.0] * ones + [0.0] * (n - ones)
    return p


def test_one_statistic_for_both_trainers_by_hand():
    """Both curves smoothed by a running mean of 3 points, read at TRL's final smoothed accuracy, linear between
    points; the ratio is rc1's time over TRL's; the old statistic is kept beside it."""
    assert learn.smoothed([_pt(0, 0.0), _pt(1, 0.3), _pt(2, 0.45), _pt(3, 0.6)]) == pytest.approx([0, 0.15, 0.25, 0.45])
    rc1 = {"final_accuracy": 0.6, "points": [_pt(0, 0.0), _pt(60, 0.3), _pt(120, 0.45), _pt(180, 0.6)]}
    trl = {"final_accuracy": 0.4, "points": [_pt(0, 0.0, 10), _pt(450, 0.2), _pt(900, 0.4, 10)]}
    # TRL smoothed: 0, 0.1, 0.2 -> target 0.2, reached at 900 s; rc1 smoothed 0, 0.15, 0.25: 60 + 0.05 / 0.10 x 60
    out = learn.compare_seed(rc1, trl, 900.0)
    assert out["target_accuracy"] == pytest.approx(0.2)
    assert out["trl_time_to_target_s"] == pytest.approx(900.0) and out["rc1_time_to_target_s"] == pytest.approx(90.0)
    assert out["ratio"] == pytest.approx(0.1) and out["trl_learned"] and out["trl_gain"] == pytest.approx(0.4)
    assert 0 < out["trl_gain_ci95"][0] <= 0.4 <= out["trl_gain_ci95"][1]
    assert out["rc1_final_smoothed"] == pytest.approx(0.45) and out["trl_final_smoothed"] == pytest.approx(0.2)
    # the old statistic: rc1's first raw point at or above TRL's last raw 0.4 is 0.45 at 120 s, of 900
    assert out["old_statistic"]["time_to_trl_accuracy_ratio"] == pytest.approx(120 / 900)
    # rc1 never reaches the target: no ratio
    never = learn.compare_seed({"final_accuracy": 0.1, "points": [_pt(0, 0.0), _pt(900, 0.1)]}, trl, 900.0)
    assert never["rc1_time_to_target_s"] is None and never["ratio"] is None
    # TRL learned nothing (its gain's interval is not above 0): the seed gives no ratio, whatever rc1 did
    flat = {"final_accuracy": 0.0, "points": [_pt(0, 0.0, 10), _pt(900, 0.0, 10)]}
    nothing = learn.compare_seed(rc1, flat, 900.0)
    assert not nothing["trl_learned"] and nothing["ratio"] is None and nothing["trl_gain_ci95"] == [0.0, 0.0]


def test_the_summary_needs_every_seed_a_low_median_and_a_tight_interval():
    def seed(ratio, rc1_final=0.4, trl_final=0.3, trl_learned=True):
        return {"ratio": ratio, "rc1_final_smoothed": rc1_final, "trl_final_smoothed": trl_final,
                "trl_learned": trl_learned,
                "old_statistic": {"time_to_trl_accuracy_ratio": 0.5}}

    good = learn.summarize([seed(0.1), seed(0.2), seed(0.3)])
    assert good["median_ratio"] == pytest.approx(0.2) and good["target_met"]
    assert 0.1 <= good["median_ratio_ci95"][0] <= 0.2 <= good["median_ratio_ci95"][1] <= 0.3
    # rc1 never reached TRL's accuracy on one seed: an unbounded ratio; the median of three is still finite
    never = learn.summarize([seed(0.1), seed(0.2), seed(None)])
    assert never["median_ratio"] == pytest.approx(0.2) and never["ratios"][2] is None
    assert never["median_ratio_ci95"][1] is None and not never["target_met"]  # the interval reaches the unbounded
    assert learn.summarize([seed(0.5), seed(None), seed(None)])["median_ratio"] is None  # the median is unbounded
    # a seed where TRL learned nothing says nothing: no median
    assert learn.summarize([seed(0.1), seed(0.2), seed(None, trl_learned=False)])["median_ratio"] is None
    assert not learn.summarize([seed(0.35), seed(0.4), seed(0.45)])["target_met"]  # median above 0.30
    wide = learn.summarize([seed(0.05), seed(0.25), seed(0.9)])  # median 0.25, but the interval reaches 0.9
    assert wide["median_ratio"] == pytest.approx(0.25) and wide["median_ratio_ci95"][1] > 0.5 and not wide["target_met"]
    worse = learn.summarize([seed(0.1, rc1_final=0.2), seed(0.2, rc1_final=0.2), seed(0.3, rc1_final=0.2)])
    assert not worse["target_met"]  # faster to TRL's accuracy, but ends lower than TRL


def test_seeds_alternate_which_trainer_goes_first():
    """Along the seed sequence, whichever seed a run starts from (--first-seed continues a measurement)."""
    assert [learn.arm_order(s) for s in (7, 8, 9)] == [("rc1", "trl"), ("trl", "rc1"), ("rc1", "trl")]


def test_the_bench_config_trains_without_a_reference_model(tmp_path):
    """beta = 0: no reference copy, no reference pass; each step logs where its time went."""
    from rc1.config.schema import TrainConfig
    from rc1.rewards.reward import RewardModel
    from rc1.runtime.workspace import Workspace
    from rc1.training.base import make_recipe

    train, _ = learn.split_items(100, n_train=20)
    (tmp_path / "data").mkdir()
    (tmp_path / "data/train.jsonl").write_text("".join(json.dumps(it) + "\n" for it in train))
    cfg = TrainConfig.model_validate(learn.rc1_config({"seed": 1, "threads": 1, "model": "random:qwen3-tiny"}))
    cfg.run.max_steps = 2
    cfg.model.max_new_tokens = 4
    ws = Workspace(tmp_path)
    recipe = make_recipe(ws, cfg, checkpoints=False, reward_model=RewardModel(learn._EQUAL_WEIGHTS, cfg.reward, False))
    recipe.setup()
    assert recipe.engine.reference_model is None and not recipe.strategy.measure_kl
    recipe.train()
    last = json.loads(ws.metrics_path.read_text().splitlines()[-1])
    spans = {k: v for k, v in last.items() if k.startswith("time/")}
    assert set(spans) >= {"time/rollout_s", "time/generate_s", "time/plan_s", "time/backward_s", "time/optimizer_s"}
    # generation is inside the rollout's span; the step's other spans do not nest
    outer = sum(v for k, v in spans.items() if k != "time/generate_s")
    assert 0 < spans["time/generate_s"] <= spans["time/rollout_s"] and outer <= last["sec_per_step"] * 1.05 + 0.005
    assert last["kl"] is None and last["completion_tokens"] > 0


@pytest.mark.parametrize("args", [["--budget-s", "0"], ["--budget-s", "-5"], ["--budget-s", "nan"],
                                  ["--budget-s", "inf"], ["--budget-s", "soon"], ["--seeds", "0"], ["--first-seed", "-1"],
                                  ["--trl-precision", "fp8"]])
def test_nonsense_budget_exits_2(tmp_path, args):
    from rc1.cli.main import app

    res = CliRunner().invoke(app, ["--workdir", str(tmp_path), "bench", "learn", *args])
    assert res.exit_code == 2, res.output
    assert not (tmp_path / "reports/bench/learn.json").exists()


def test_first_seed_continues_the_seed_sequence(tmp_path, monkeypatch):
    """`--first-seed 8 --seeds 2` trains seeds 8 and 9, TRL first on 8 (as in one run from 7), one child per arm."""
    from rc1.cli.main import app

    calls = []

    def fake_arm(fn, spec):
        calls.append((spec["seed"], fn.__name__))
        # the seed's points: TRL gains 0 -> 1 (so the seed counts), rc1 reaches it at half TRL's time
        acc = {"_train_rc1": [0.0, 1.0, 1.0], "_train_trl": [0.0, 0.0, 1.0]}[fn.__name__]
        points = [{"train_s": t, "step": i, "accuracy": a, "scores": [a] * 100}
                  for i, (t, a) in enumerate(zip((0.0, 50.0, 100.0), acc))]
        return {"trainer": fn.__name__, "complete": True, "points": points, "steps": 2, "sec_per_step_median": 1.0,
                "completion_tokens_per_s": 1.0, "final_accuracy": acc[-1], "train_s": 100.0, "peak_memory_mb": 1.0,
                "prompt_ids_of_first_held_out_item": [1, 2]}

    monkeypatch.setattr(learn, "_in_child", fake_arm)
    res = CliRunner().invoke(app, ["--workdir", str(tmp_path), "bench", "learn", "--budget-s", "100", "--seeds", "2",
                                   "--first-seed", "8"])
    assert res.exit_code == 0, res.output
    assert calls == [(8, "_train_trl"), (8, "_train_rc1"), (9, "_train_rc1"), (9, "_train_trl")]
    doc = json.loads((tmp_path / "reports/bench/learn.json").read_text())
    assert doc["complete"] and doc["seeds"] == [8, 9]
    assert [r["order"] for r in doc["per_seed"]] == [["trl", "rc1"], ["rc1", "trl"]]


def test_bench_learn_end_to_end(tmp_path):
    """The real entry point, both trainers, one seed, a budget of one step: a complete report and its plot; both
    arms evaluated by the same fresh fp32 copy (each point keeps its items' scores); TRL without checkpointing."""
    proc = subprocess.run([sys.executable, "-m", "rc1.cli.main", "--workdir", str(tmp_path), "bench", "learn",
                           "--budget-s", "0.5", "--model", "random:qwen3-tiny", "--seeds", "1",
                           "--trl-precision", "fp32"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    doc = json.loads((tmp_path / "reports/bench/learn.json").read_text())
    assert doc["complete"] and doc["eval_items"] >= 100 and doc["seeds"] == [7] and doc["trl_precision"] == "fp32"
    assert (tmp_path / doc["plot"]).stat().st_size > 1000
    (result,) = doc["per_seed"]
    assert result["seed"] == 7 and result["order"] == ["rc1", "trl"] and result["same_prompt_ids"]
    for arm in ("rc1", "trl"):
        r = result[arm]
        assert r["complete"] and r["steps"] >= 1 and r["completion_tokens_per_s"] > 0
        assert [p["step"] for p in r["points"]][0] == 0 and r["points"][-1]["train_s"] >= 0.5
        assert all(len(p["scores"]) == doc["eval_items"] for p in r["points"])
    assert result["trl"]["precision"] == "fp32" and result["trl"]["gradient_checkpointing"] is False
    assert result["rc1"]["time_breakdown_s_per_step"]["time/generate_s"] > 0
    # a random model never answers: TRL gains nothing, so the seed gives no ratio and the target is not met
    assert not result["trl_learned"] and result["ratio"] is None
    assert doc["summary"]["seeds"] == 1 and doc["summary"]["target_met"] is False
    assert "old_statistic" in result and "running" not in doc
