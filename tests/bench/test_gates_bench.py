"""`rc1 bench gates`: each broken case is the config with one change, in a workspace of its own, and is
detected only when the expected gate refused it on the expected check."""

from __future__ import annotations

import json

import pytest

from rc1.bench.gates import CASES, case_workspace, verdict


def _gate_report(ws, gate: str, checks: list[tuple[str, str]]) -> None:
    path = ws.path(f"reports/gates/{gate}.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"results": [{"gate": "a", "checks": [{"name": n, "status": s} for n, s in checks]}]}))


def test_each_case_changes_only_what_it_names_in_its_own_workspace(ws):
    from rc1.config.load import load_train_config

    base = load_train_config("configs/local.yaml", ws)
    sub, rel = case_workspace(ws, "configs/local.yaml", CASES["drift"])
    drift = load_train_config(rel, sub)
    assert drift.engine.lr == pytest.approx(20 * base.engine.lr) and drift.steps == base.steps
    assert sub.root != ws.root and (sub.root / "templates").is_dir()
    sub, rel = case_workspace(ws, "configs/local.yaml", CASES["no-level"])
    levels = load_train_config(rel, sub).difficulty_fit.levels  # local.yaml fits gsm8k 0-4, the others 0-2
    assert {t: tuple(v) for t, v in levels.items()} == {"gsm8k": (4, 4), "hotpotqa": (2, 2), "strategyqa": (2, 2)}
    sub, rel = case_workspace(ws, "configs/local.yaml", CASES["no-change"], max_steps=30)
    short = load_train_config(rel, sub)
    assert short.engine.lr == pytest.approx(1e-6 * base.engine.lr) and short.run.max_steps == short.steps == 30
    sub, rel = case_workspace(ws, "configs/local.yaml", CASES["hacking"])
    hacking = load_train_config(rel, sub)
    assert not hacking.reward.pay_success and hacking.reward.shaping_groups == "all" and base.reward.pay_success
    weights = json.loads(sub.path(hacking.reward.weights).read_text())["weights"]
    assert weights["correctness"] == 0 and sum(weights.values()) == pytest.approx(1.0) and max(weights.values()) <= 0.5


def test_a_reward_that_does_not_pay_success_scores_a_correct_and_a_wrong_answer_alike():
    """The hacking case's reward: with reward.pay_success false, the total is the shaping alone, so a correct
    answer and a wrong one with the same dimensions score the same (with it, the correct one scores 1 more)."""
    from rc1.config.names import REWARD_DIMENSIONS
    from rc1.config.schema import RewardSection
    from rc1.rewards.reward import RewardModel

    weights = {d: 1 / len(REWARD_DIMENSIONS) for d in REWARD_DIMENSIONS}
    dims = {d: 0.6 for d in REWARD_DIMENSIONS}
    paid = RewardModel(weights, RewardSection(), use_overclar_penalty=False)
    unpaid = RewardModel(weights, RewardSection(pay_success=False), use_overclar_penalty=False)
    assert paid.total_of(True, dims, 0.0)[0] - paid.total_of(False, dims, 0.0)[0] == pytest.approx(1.0)
    assert unpaid.total_of(True, dims, 0.0) == unpaid.total_of(False, dims, 0.0)
    total, shaping = unpaid.total_of(True, dims, 0.0)
    assert total == pytest.approx(RewardSection().shaping_scale * shaping) and 0 < shaping < 1


def test_a_case_is_detected_only_by_its_own_gate_and_check(ws):
    case = CASES["drift"]
    _gate_report(ws, "training_done", [("seed 0 (1): drift vs bound (per-token KL to the reference, CI lower bound)",
                                        "fail"), ("seed 0 (1): steps trained", "pass")])
    v = verdict(ws, case, 3)
    assert v["detected"] and v["failing"] == {"training_done": [
        "seed 0 (1): drift vs bound (per-token KL to the reference, CI lower bound)"]}
    assert not verdict(ws, case, 0)["detected"]            # the pipeline went on: not refused
    _gate_report(ws, "training_done", [("seed 0 (1): steps trained", "fail")])
    assert not verdict(ws, case, 3)["detected"]            # refused, but not for drifting
    _gate_report(ws, "training_done", [])
    _gate_report(ws, "rc1_eval", [("held-out success delta (pp, CI lower bound)", "fail")])
    assert not verdict(ws, case, 3)["detected"] and verdict(ws, CASES["no-change"], 3)["detected"]
