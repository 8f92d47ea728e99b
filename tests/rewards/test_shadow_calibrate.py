"""Shadow run, its round 2 gate, calibration and the over-clarification ablation (CLI + core)."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from rc1.cli.main import app
from rc1.config.schema import GatesConfig, ShadowRunGate, TrainConfig
from rc1.gates import reward_weights, shadow_run as shadow_gate
from rc1.gates.base import GateContext
from rc1.rewards.calibrate import LAMBDA_GRID, calibrate_arrays, fit_weights, project_capped_simplex

SHADOW_FIELDS = ("spearman", "kendall_tau", "top10_overlap", "top20_overlap", "corr_to_success_old",
                 "corr_to_success_new", "corr_improve_pct")


def rc1(ws, *args):
    return CliRunner().invoke(app, ["--workdir", str(ws.root), *args], catch_exceptions=False)


def lenient_gates():
    return GatesConfig(shadow_run=ShadowRunGate(spearman_min=-1, top10_overlap_min=0, corr_improve_pct_min=-1e9))


def test_shadow_run_report_has_every_field_and_gate_checks_hashes(shadow_ws):
    ws = shadow_ws.ws
    r = rc1(ws, "reward", "shadow-run", "--n", "45", "--seed", "20250820", "--stratify", "--tag", "pre_run_check")
    assert r.exit_code == 0, r.output
    rep = json.loads(ws.path("reports/shadow_run_pre_run_check.json").read_text())
    for f in SHADOW_FIELDS:
        assert isinstance(rep[f], float) and np.isfinite(rep[f]), f
    assert rep["n"] == 45 and -1 <= rep["spearman"] <= 1 and 0 <= rep["top10_overlap"] <= 1
    assert {t: v["n"] for t, v in rep["by_task"].items()} == {"gsm8k": 15, "hotpotqa": 15, "strategyqa": 15}
    rows = ws.path("data/shadow_responses_pre_run_check.jsonl").read_text().splitlines()
    assert len(rows) == 45 and all("sha256" in json.loads(x) for x in rows)
    assert ws.path("data/shadow_responses_pre_run_check.jsonl.sha256").exists()

    # Same request again reuses the saved responses (no new generation).
    assert rc1(ws, "reward", "shadow-run", "--n", "45").exit_code == 0
    assert shadow_ws.generate_calls == [45]

    cfg = TrainConfig()
    ctx = GateContext(ws=ws, gates=lenient_gates(), round="round2", config=cfg)
    res = shadow_gate.evaluate(ctx)
    assert res.passed, [c for c in res.checks if not c.passed]
    # A correlation with success needs solved and failed answers: too few of either fails the gate.
    outcomes = min(rep["n_success"], rep["n_failure"])
    assert rep["n_success"] + rep["n_failure"] == 45 and outcomes >= 5
    scarce = GatesConfig(shadow_run=ShadowRunGate(spearman_min=-1, top10_overlap_min=0, corr_improve_pct_min=-1e9,
                                                  min_outcomes=outcomes + 1))
    failing = [c for c in shadow_gate.evaluate(GateContext(ws=ws, gates=scarce, round="round2", config=TrainConfig()))
               .checks if not c.passed]
    assert [(c.name, c.measured) for c in failing] == [("solved and failed answers (fewer of the two)", outcomes)]
    assert {e.path for e in res.evidence} >= {"reports/shadow_run_pre_run_check.json", "configs/weights.json",
                                              "data/shadow_eval_245.jsonl", "data/shadow_responses_pre_run_check.jsonl"}
    # Production thresholds come from the gates config and are reported with the measured values.
    prod = shadow_gate.evaluate(GateContext(ws=ws, gates=GatesConfig(), round="round2", config=cfg))
    assert {c.threshold for c in prod.checks if c.name == "spearman(old, new)"} == {">= 0.75"}

    # Weights changed after the shadow run -> the report is stale.
    w = json.loads(ws.path("configs/weights.json").read_text())
    w["weights"]["correctness"], w["weights"]["clarity"] = 0.44, 0.08
    ws.path("configs/weights.json").write_text(json.dumps(w))
    failing = [c.name for c in shadow_gate.evaluate(ctx).checks if not c.passed]
    assert failing == ["weights unchanged since the shadow run"]
    # A different penalty setting than the one the report used is caught too.
    cfg.reward.overclar.alpha = 0.1
    assert "penalty settings match the run config" in [c.name for c in shadow_gate.evaluate(ctx).checks if not c.passed]


def test_shadow_gate_without_report_fails(tmp_path):
    from rc1.runtime.workspace import Workspace

    res = shadow_gate.evaluate(GateContext(ws=Workspace(tmp_path), gates=GatesConfig(), round="round2"))
    assert not res.passed and "not available" in res.checks[0].detail


def test_calibrate_writes_constrained_weights_and_keeps_the_old(shadow_ws):
    ws = shadow_ws.ws
    assert rc1(ws, "reward", "shadow-run", "--n", "60").exit_code == 0
    old = ws.path("configs/weights.json").read_bytes()
    r = rc1(ws, "reward", "calibrate", "--bootstrap", "30", "--apply", "always", "--prior-strength", "0")
    rep_path = sorted(ws.path("reports").glob("calibration_report_*.json"))[-1]
    rep = json.loads(rep_path.read_text())
    assert r.exit_code == (0 if rep["acceptance"]["passed"] else 3), r.output
    assert rep["applied"] and rep["target"] == "success" and rep["n"] == 60
    for k in ("rank_corr_improve_pct_median", "mae_reduce_pct_median", "passed", "rank_corr_improve_pct_ci"):
        assert k in rep["acceptance"]
    assert {"lo95", "hi95", "median"} <= set(rep["out_of_bag"]["mae_fit"])
    archived = ws.path(rep["archived"])
    assert archived.read_bytes() == old and archived.name.startswith("weights.")
    ctx = GateContext(ws=ws, gates=GatesConfig(), round="round1")
    assert reward_weights.evaluate(ctx).passed
    w = json.loads(ws.path("configs/weights.json").read_text())["weights"]
    assert w == pytest.approx(rep["weights_new"]) and max(w.values()) <= 0.5 + 1e-9 and min(w.values()) >= 0


def test_calibrate_apply_pass_leaves_weights_when_acceptance_fails(shadow_ws):
    ws = shadow_ws.ws
    assert rc1(ws, "reward", "shadow-run", "--n", "60").exit_code == 0
    before = ws.path("configs/weights.json").read_bytes()
    # An overwhelming prior keeps the fit at the prior: no improvement, acceptance fails, nothing written.
    r = rc1(ws, "reward", "calibrate", "--bootstrap", "20", "--prior-strength", "1e6")
    assert r.exit_code == 3 and "FAIL" in r.output and "weights not changed" in r.output
    assert ws.path("configs/weights.json").read_bytes() == before


def test_shadow_run_old_reward_is_the_weights_calibration_replaced(shadow_ws):
    from rc1.rewards.shadow import old_reward
    from rc1.rewards.weights import read_weights
    from rc1.runtime.errors import ConfigError

    ws, cfg = shadow_ws.ws, TrainConfig()
    before = read_weights(ws, "configs/weights.json")
    _, info = old_reward(ws, cfg)  # not calibrated yet: the current weights without penalty and bonus
    assert info["weights"] == before and "no calibration" in info["name"]

    # Calibrate on a split that is not the shadow set: the base model answers items of that file.
    split = ws.path("data/calib_items.jsonl")
    shadow_lines = ws.path("data/shadow_eval_245.jsonl").read_text().splitlines()
    split.write_text("\n".join(json.dumps({**json.loads(x), "id": "cal-" + json.loads(x)["id"]})
                               for x in shadow_lines[:80]) + "\n")
    r = rc1(ws, "reward", "calibrate", "--items", "data/calib_items.jsonl", "--n", "40", "--bootstrap", "20",
            "--apply", "always")
    assert r.exit_code in (0, 3), r.output
    rep = json.loads(sorted(ws.path("reports").glob("calibration_report_*.json"))[-1].read_text())
    assert rep["items"] == "data/calib_items.jsonl" and rep["responses"] == "data/responses_calibration.jsonl"
    assert rep["n"] == 40 and rep["lambda_rule"] in (
        "strongest prior whose bootstrap acceptance passes",
        "none passed: best CV rank correlation (ties within 1%: strongest prior)")
    assert [t["lambda"] for t in rep["lambdas_tried"]] == sorted(LAMBDA_GRID, reverse=True)[:len(rep["lambdas_tried"])]
    current = json.loads(ws.path("configs/weights.json").read_text())
    assert current["previous"]["path"] == ws.path(rep["archived"]).name

    old_model, info = old_reward(ws, cfg)
    assert info["weights"] == before and info["weights_path"] == rep["archived"]
    assert rc1(ws, "reward", "shadow-run", "--n", "30").exit_code == 0
    sr = json.loads(ws.path("reports/shadow_run_pre_run_check.json").read_text())
    assert sr["old_reward"]["weights_path"] == rep["archived"] and sr["old_reward"]["weights"] == before
    assert sr["new_reward"]["weights"] == pytest.approx(rep["weights_new"])

    # An edited or missing previous file is named, not silently replaced by something else.
    ws.path(rep["archived"]).write_text(ws.path(rep["archived"]).read_text().replace("0.45", "0.44"))
    with pytest.raises(ConfigError, match="changed"):
        old_reward(ws, cfg)
    ws.path(rep["archived"]).unlink()
    with pytest.raises(ConfigError, match="missing"):
        old_reward(ws, cfg)


def test_lambda_rule_keeps_the_strongest_prior_among_equally_good_rankers():
    from rc1.rewards.calibrate import choose_lambda

    cv = [{"lambda": 0.0, "rank_corr_fit": 0.406, "rank_corr_fit_se": 0.075, "mae_fit": 0.13},
          {"lambda": 1.0, "rank_corr_fit": 0.404, "rank_corr_fit_se": 0.075, "mae_fit": 0.26},
          {"lambda": 10.0, "rank_corr_fit": 0.361, "rank_corr_fit_se": 0.068, "mae_fit": 0.34}]
    # 0.404 ranks as well as 0.406 (within 1 %), so the stronger prior wins; 0.361 ranks worse, although
    # it is within one standard error (the rule that never let the weights move).
    assert choose_lambda(cv) == 1.0
    cv[1]["rank_corr_fit"] = 0.39
    assert choose_lambda(cv) == 0.0
    flat = [{**r, "rank_corr_fit": float("nan")} for r in cv]  # no ranking signal: smallest MAE
    assert choose_lambda(flat) == 0.0


def test_lambda_is_the_strongest_prior_that_meets_the_acceptance():
    """Answers whose success the prior ranks badly: the chosen lambda passes and every stronger one did not."""
    rng = np.random.default_rng(5)
    n = 150
    X = rng.uniform(0, 1, (n, 7))
    y = (X[:, 0] + 0.3 * rng.normal(size=n) > 0.9).astype(float)  # success follows dimension 0 only
    rep = calibrate_arrays(X, y, np.full(7, 1 / 7), bootstrap=60)
    assert rep["acceptance"]["passed"] and rep["lambda_rule"] == "strongest prior whose bootstrap acceptance passes"
    tried = rep["lambdas_tried"]
    assert tried[-1]["lambda"] == rep["lambda"] and tried[-1]["passed"]
    assert all(not t["passed"] and t["lambda"] > rep["lambda"] for t in tried[:-1])
    assert rep["weights_new"]["correctness"] > 1 / 7


def test_projection_and_fit_respect_constraints():
    rng = np.random.default_rng(3)
    for _ in range(20):
        v = rng.normal(0, 1, 7)
        w = project_capped_simplex(v, 0.5)
        assert abs(w.sum() - 1) < 1e-9 and w.min() >= 0 and w.max() <= 0.5 + 1e-12
        # Optimality of the projection: no feasible pairwise move brings it closer to v.
        for i in range(7):
            for j in range(7):
                if i != j and w[i] < 0.5 - 1e-6 and w[j] > 1e-6:
                    assert (v[i] - w[i]) <= (v[j] - w[j]) + 1e-6
    X = rng.random((120, 7))
    w_true = np.array([0.4, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05])
    assert fit_weights(X, X @ w_true, np.full(7, 1 / 7), 0.0) == pytest.approx(w_true, abs=1e-5)
    capped = fit_weights(X, X[:, 0], np.full(7, 1 / 7), 0.0)
    assert capped[0] == pytest.approx(0.5) and capped.sum() == pytest.approx(1.0)


def test_calibration_core_improves_a_bad_prior_and_reports_cis():
    rng = np.random.default_rng(1)
    X = rng.random((245, 7))
    y = X @ np.array([0.4, 0.2, 0.1, 0.1, 0.1, 0.05, 0.05]) + rng.normal(0, 0.05, 245)
    prior = np.array([0.05, 0.05, 0.1, 0.1, 0.2, 0.2, 0.3])
    r = calibrate_arrays(X, y, prior, bootstrap=50)
    a = r["acceptance"]
    assert a["passed"] and a["rank_corr_improve_pct_median"] >= 8 and a["mae_reduce_pct_median"] >= 5
    assert a["mae_reduce_pct_ci"]["lo95"] <= a["mae_reduce_pct_median"] <= a["mae_reduce_pct_ci"]["hi95"]
    assert abs(sum(r["weights_new"].values()) - 1) < 1e-9 and len(r["cv"]) == len(LAMBDA_GRID)


def test_ablation_reports_both_arms(shadow_ws):
    ws = shadow_ws.ws
    r = rc1(ws, "reward", "ablate-overclar", "--n", "30", "--generations", "4")
    assert r.exit_code == 0, r.output
    rep = json.loads(sorted(ws.path("reports").glob("overclar_ablation_*.json"))[-1].read_text())
    for arm in ("without_penalty", "with_penalty"):
        assert {"overclar_rate", "avg_turns", "success"} <= set(rep[arm])
    # The penalty can only make the chosen episodes ask less when asking was not needed.
    assert rep["with_penalty"]["overclar_rate"] <= rep["without_penalty"]["overclar_rate"]
    assert "passed" in rep["acceptance"] and shadow_ws.generate_calls == [30]
