"""Shadow run, its round 2 gate, calibration and the over-clarification ablation (CLI + core)."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from rc1.cli.main import app
from rc1.config.gates import GatesConfig, ShadowRunGate
from rc1.config.schema import TrainConfig
from rc1.gates import reward_weights, shadow_run as shadow_gate
from rc1.gates.base import NOT_MEASURABLE, GateContext
from rc1.rewards.calibrate import LAMBDA_GRID, calibrate_arrays, fit_weights, project_capped_simplex

SHADOW_FIELDS = ("spearman", "kendall_tau", "top10_overlap", "top20_overlap", "corr_to_success_old",
                 "corr_to_success_new", "corr_improve_pct")


def rc1(ws, *args):
    return CliRunner().invoke(app, ["--workdir", str(ws.root), *args], catch_exceptions=False)


def lenient_gates(**kw):
    return GatesConfig(shadow_run=ShadowRunGate(spearman_min=-1, top10_overlap_min=0, corr_improve_pct_min=-1e9), **kw)


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
    # Nothing was calibrated: the new weights are the old ones, so the improvement is not measurable.
    # Production blocks on that, the laptop profile warns.
    assert rep["weights_changed"] is False
    res = shadow_gate.evaluate(GateContext(ws=ws, gates=lenient_gates(), round="round2", config=cfg))
    res.not_measurable_blocks = True
    improve = next(c for c in res.checks if c.name.startswith("corr_improve_pct"))
    assert improve.status == NOT_MEASURABLE and "calibration did not change" in improve.detail
    assert not res.passed and res.failing == [improve]
    ctx = GateContext(ws=ws, gates=lenient_gates(not_measurable="warn"), round="round2", config=cfg)
    res = shadow_gate.evaluate(ctx)
    res.not_measurable_blocks = False
    assert res.passed and res.warnings == [improve]
    # A correlation with success needs solved and failed answers: too few of either is not measurable.
    outcomes = min(rep["n_success"], rep["n_failure"])
    assert rep["n_success"] + rep["n_failure"] == 45 and outcomes >= 5
    scarce = GatesConfig(shadow_run=ShadowRunGate(min_outcomes=outcomes + 1))
    check = shadow_gate.improvement_check(rep, scarce.shadow_run)
    assert check.status == NOT_MEASURABLE and f"at least {outcomes + 1} of each" in check.detail
    # With changed weights the improvement is judged on its CI's lower bound.
    changed = {**rep, "weights_changed": True, "corr_improve_pct": 25.0,
               "corr_improve_pct_ci": {"lo": -3.0, "hi": 60.0, "confidence": 0.95}}
    check = shadow_gate.improvement_check(changed, GatesConfig().shadow_run)
    assert check.status == "fail" and check.measured == -3.0 and check.threshold == ">= 10 (95% CI)"
    changed["corr_improve_pct_ci"]["lo"] = 12.0
    assert shadow_gate.improvement_check(changed, GatesConfig().shadow_run).passed
    assert {e.path for e in res.evidence} >= {"reports/shadow_run_pre_run_check.json", "configs/weights.json",
                                              "data/shadow_eval_245.jsonl", "data/shadow_responses_pre_run_check.jsonl"}
    # Production thresholds come from the gates config and are reported with the measured values.
    prod = shadow_gate.evaluate(GateContext(ws=ws, gates=GatesConfig(), round="round2", config=cfg))
    assert {c.threshold for c in prod.checks if c.name == "spearman(old, new)"} == {">= 0.75"}

    # Weights changed after the shadow run -> the report is stale.
    w = json.loads(ws.path("configs/weights.json").read_text())
    w["weights"]["correctness"], w["weights"]["clarity"] = 0.44, 0.08
    ws.path("configs/weights.json").write_text(json.dumps(w))
    failing = [c.name for c in shadow_gate.evaluate(ctx).checks if c.status == "fail"]
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
    for k in ("rank_corr_improve_pct_median", "mae_reduce_pct_median", "passed", "rank_corr_improve_pct", "judged_on"):
        assert k in rep["acceptance"]
    assert {"lo", "hi", "median"} <= set(rep["out_of_bag"]["mae_fit"])
    # correctness is the verifier's score: held at its prior weight, never fitted
    assert rep["features"] == ["reasoning", "grounding", "clarity", "conciseness", "format", "clarification"]
    assert rep["weights_new"]["correctness"] == rep["weights_prior"]["correctness"] == 0.45
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
    assert rep["n"] == 40 and rep["lambda_rule"].startswith("best 5-fold CV rank correlation")
    assert [r["lambda"] for r in rep["cv"]] == list(LAMBDA_GRID)
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


def calibration_data(n=150, seed=5, signal="format", noise=0.0):
    """Scored answers (a quarter solved) whose success shows in one dimension: `correctness` (the verifier's
    own score: circular) or a shaping dimension such as `format` (a real, non-circular signal); `noise`
    flips that share of the outcomes."""
    from rc1.config.names import REWARD_DIMENSIONS

    rng = np.random.default_rng(seed)
    X = rng.uniform(0.2, 1, (n, 7))
    y = (rng.random(n) < 0.25).astype(float)
    j = REWARD_DIMENSIONS.index(signal)
    X[:, j] = y if signal == "correctness" else np.clip(0.35 + 0.5 * y + rng.normal(0, 0.15, n), 0, 1)
    flip = rng.random(n) < noise
    y[flip] = 1 - y[flip]
    return X, y


def test_a_real_signal_is_found_lambda_by_cv_and_accepted_on_out_of_bag_cis():
    X, y = calibration_data(signal="format")
    rep = calibrate_arrays(X, y, np.full(7, 1 / 7), bootstrap=60)
    a = rep["acceptance"]
    assert a["passed"] and a["rank_corr_improve_pct"]["lo"] >= 8 and a["mae_reduce_pct"]["lo"] >= 5
    assert a["rank_corr_improve_pct"]["lo"] <= a["rank_corr_improve_pct_median"] <= a["rank_corr_improve_pct"]["hi"]
    assert rep["weights_new"]["format"] > 1 / 7 and rep["weights_new"]["correctness"] == pytest.approx(1 / 7)
    best = max(r["rank_corr_fit"] for r in rep["cv"])
    assert next(r for r in rep["cv"] if r["lambda"] == rep["lambda"])["rank_corr_fit"] >= best * 0.99
    assert sum(rep["lambda_chosen_in_resamples"].values()) == a["resamples_used"]  # chosen again in every resample


def test_calibration_is_not_circular_correctness_cannot_carry_it():
    """Success that only the verifier's own score predicts: fitting the correctness weight would 'improve'
    automatically; held at its prior, the other dimensions have nothing to find and acceptance fails."""
    X, y = calibration_data(signal="correctness")
    rep = calibrate_arrays(X, y, np.full(7, 1 / 7), bootstrap=60)
    assert "correctness" not in rep["features"] and rep["weights_new"]["correctness"] == pytest.approx(1 / 7)
    assert not rep["acceptance"]["passed"] and rep["acceptance"]["rank_corr_improve_pct"]["lo"] < 8


def test_acceptance_is_judged_on_the_ci_lower_bound_not_the_median():
    """A weak signal on few answers: the median improvement clears 8 %, its CI's lower bound does not."""
    X, y = calibration_data(n=50, seed=5, signal="format", noise=0.3)
    rep = calibrate_arrays(X, y, np.full(7, 1 / 7), bootstrap=60)
    a = rep["acceptance"]
    assert a["rank_corr_improve_pct_median"] >= 8 and a["rank_corr_improve_pct"]["lo"] < 8 and not a["passed"]


def test_resampling_keeps_an_items_answers_together():
    from rc1.rewards.calibrate import group_folds

    groups = np.repeat(np.arange(12), 3)
    for fold in group_folds(groups, 5, np.random.default_rng(0)):
        assert all(np.isin(groups, groups[fold]).sum() == len(fold) for _ in [0])
    X, y = calibration_data(n=36, seed=1)
    with pytest.raises(Exception, match="items"):
        calibrate_arrays(X[:12], y[:12], np.full(7, 1 / 7), groups=np.repeat(np.arange(4), 3), bootstrap=5)


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
    y = X @ np.array([0.05, 0.4, 0.2, 0.1, 0.1, 0.1, 0.05]) + rng.normal(0, 0.05, 245)
    prior = np.array([0.05, 0.05, 0.1, 0.1, 0.2, 0.2, 0.3])
    r = calibrate_arrays(X, y, prior, bootstrap=50)
    a = r["acceptance"]
    assert a["passed"] and a["rank_corr_improve_pct"]["lo"] >= 8 and a["mae_reduce_pct"]["lo"] >= 5
    assert abs(sum(r["weights_new"].values()) - 1) < 1e-9 and len(r["cv"]) == len(LAMBDA_GRID)
    assert r["weights_new"]["reasoning"] > r["weights_prior"]["reasoning"]


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


def test_shadow_gate_refuses_weights_that_reorder_the_answers(shadow_ws):
    """New weights that throw away what the old reward ranked by (all on clarity and clarification): the
    totals no longer agree with the old reward, and spearman and top-10 % overlap fail."""
    from rc1.rewards.weights import write_weights

    ws = shadow_ws.ws
    write_weights(ws.path("configs/weights.json"), {"correctness": 0.0, "reasoning": 0.0, "grounding": 0.0,
                  "clarity": 0.5, "conciseness": 0.0, "format": 0.0, "clarification": 0.5}, version="bad", note="test")
    assert rc1(ws, "reward", "shadow-run", "--n", "60").exit_code == 0
    rep = json.loads(ws.path("reports/shadow_run_pre_run_check.json").read_text())
    assert rep["weights_changed"] is True and rep["corr_improve_pct_ci"]["lo"] is not None
    res = shadow_gate.evaluate(GateContext(ws=ws, gates=GatesConfig(), round="round2", config=TrainConfig()))
    failing = {c.name for c in res.failing}
    assert {"spearman(old, new)", "top10_overlap"} <= failing, [c.to_dict() for c in res.checks]


def test_base_answers_then_calibrate_keep_on_fail_as_the_pipeline_runs_them(shadow_ws):
    """`rc1 reward base-answers` answers the dev split once; calibrate fits on that file; with --on-fail keep a
    failed acceptance keeps the weights (exit 0), and current_report() tells the pipeline the stage is done
    until the answers or the weights change."""
    from rc1.rewards.calibrate import current_report

    ws = shadow_ws.ws
    dev = ws.path("data/eval_min.jsonl")
    dev.write_text("".join(line.replace('"id": "t', '"id": "dev-t') + "\n"
                           for line in ws.path("data/shadow_eval_245.jsonl").read_text().splitlines()[:30]))
    cfg_args = ["reward", "base-answers", "--items", "data/eval_min.jsonl", "--answers", "90"]
    r = rc1(ws, *cfg_args)
    assert r.exit_code == 0 and "90 answers (3 per item) to 30 items" in r.output, r.output
    assert rc1(ws, *cfg_args).exit_code == 0 and shadow_ws.generate_calls == [30]  # reused, not regenerated
    before = ws.path("configs/weights.json").read_bytes()
    r = rc1(ws, "reward", "calibrate", "--items", "data/eval_min.jsonl", "--responses", "data/responses_dev_base.jsonl",
            "--bootstrap", "20", "--prior-strength", "1e6", "--on-fail", "keep")
    assert r.exit_code == 0 and "the current weights stay" in r.output, r.output
    assert ws.path("configs/weights.json").read_bytes() == before
    rep = current_report(ws, "configs/weights.json", "data/responses_dev_base.jsonl")
    assert rep is not None and not rep["applied"] and rep["n"] == 90 and rep["n_items"] == 30
    ws.path("configs/weights.json").write_text(before.decode().replace("0.45", "0.44").replace("0.12,", "0.13,", 1))
    assert current_report(ws, "configs/weights.json", "data/responses_dev_base.jsonl") is None
    assert rc1(ws, "reward", "calibrate", "--on-fail", "maybe").exit_code == 2
