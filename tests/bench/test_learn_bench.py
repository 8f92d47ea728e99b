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


def test_time_to_trl_accuracy_ratio():
    rc1 = {"final_accuracy": 0.4, "points": [{"train_s": 0.0, "accuracy": 0.0}, {"train_s": 60.0, "accuracy": 0.1},
                                             {"train_s": 120.0, "accuracy": 0.33}, {"train_s": 180.0, "accuracy": 0.4}]}
    trl = {"final_accuracy": 0.32, "points": [{"train_s": 0.0, "accuracy": 0.0}, {"train_s": 900.0, "accuracy": 0.32}]}
    out = learn.compare(rc1, trl, 900.0)
    assert out["rc1_time_to_trl_accuracy_s"] == 120.0 and out["time_to_trl_accuracy_ratio"] == pytest.approx(120 / 900)
    assert out["target_met"] and out["trl_final_accuracy"] == 0.32 and out["rc1_final_accuracy"] == 0.4
    never = learn.compare({**rc1, "points": rc1["points"][:2], "final_accuracy": 0.1}, trl, 900.0)
    assert never["time_to_trl_accuracy_ratio"] is None and not never["target_met"]
    flat = {"final_accuracy": 0.0, "points": [{"train_s": 0.0, "accuracy": 0.0}, {"train_s": 900.0, "accuracy": 0.0}]}
    nothing = learn.compare(rc1, flat, 900.0)  # TRL learned nothing: reached at once, but no target met
    assert nothing["time_to_trl_accuracy_ratio"] == 0.0 and not nothing["target_met"]


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
    assert 0 < spans["time/generate_s"] <= spans["time/rollout_s"] and sum(spans.values()) <= last["sec_per_step"] * 1.5
    assert last["kl"] is None and last["completion_tokens"] > 0


@pytest.mark.parametrize("args", [["--budget-s", "0"], ["--budget-s", "-5"], ["--budget-s", "nan"],
                                  ["--budget-s", "inf"], ["--budget-s", "soon"]])
def test_nonsense_budget_exits_2(tmp_path, args):
    from rc1.cli.main import app

    res = CliRunner().invoke(app, ["--workdir", str(tmp_path), "bench", "learn", *args])
    assert res.exit_code == 2, res.output
    assert not (tmp_path / "reports/bench/learn.json").exists()


def test_bench_learn_end_to_end(tmp_path):
    """The real entry point, both trainers, a budget of one step: a complete report and its plot."""
    proc = subprocess.run([sys.executable, "-m", "rc1.cli.main", "--workdir", str(tmp_path), "bench", "learn",
                           "--budget-s", "0.5", "--model", "random:qwen3-tiny"],
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    doc = json.loads((tmp_path / "reports/bench/learn.json").read_text())
    assert doc["complete"] and doc["same_prompt_ids"] and doc["eval_items"] >= 100
    assert (tmp_path / doc["plot"]).stat().st_size > 1000
    for arm in ("rc1", "trl"):
        r = doc[arm]
        assert r["complete"] and r["steps"] >= 1 and r["completion_tokens_per_s"] > 0
        assert [p["step"] for p in r["points"]][0] == 0 and r["points"][-1]["train_s"] >= 0.5
    assert doc["trl_final_accuracy"] == doc["trl"]["final_accuracy"]
    assert doc["rc1_final_accuracy"] == doc["rc1"]["final_accuracy"]
    assert "time_to_trl_accuracy_ratio" in doc  # a random model never answers: 0.0 (TRL's 0 is reached at once)
    assert doc["rc1"]["time_breakdown_s_per_step"]["time/generate_s"] > 0
