"""`rc1 bench seeds`: the config at N seeds (written beside the reports), and each seed's gain read back."""

from __future__ import annotations

import yaml
from typer.testing import CliRunner

from rc1.bench.seeds import derived_config, seed_list, summarize
from rc1.cli.main import app
from rc1.runtime.workspace import Workspace
from tests.helpers.workspace import make_workspace


def test_seed_list_keeps_the_configs_own_seeds_first_and_never_repeats():
    assert seed_list([20250820], 3) == [20250820, 20250830, 20250840]
    assert seed_list([5, 15], 3) == [5, 15, 25]
    assert seed_list([1, 2, 3, 4], 2) == [1, 2]


def test_the_derived_config_is_the_same_run_at_n_seeds(tmp_path, tiny_dir):
    config = make_workspace(tmp_path, tiny_dir)
    ws = Workspace(tmp_path)
    rel, seeds = derived_config(ws, str(config), 3)
    assert rel == "reports/bench/run_seeds3.yaml" and seeds == [7, 17, 27]
    own, derived = yaml.safe_load((tmp_path / config).read_text()), yaml.safe_load(ws.path(rel).read_text())
    assert derived.pop("seeds") == seeds and derived["run"].pop("seed") == own["run"].pop("seed") == 7
    own.pop("seeds", None)
    assert derived == own


def test_a_bad_config_or_seed_count_is_a_one_line_error(tmp_path, tiny_dir):
    make_workspace(tmp_path, tiny_dir)
    res = CliRunner().invoke(app, ["--workdir", str(tmp_path), "bench", "seeds", "--config", "configs/nope.yaml"])
    assert res.exit_code == 2 and "configs/nope.yaml: config file not found" in res.output
    res = CliRunner().invoke(app, ["--workdir", str(tmp_path), "bench", "seeds", "--seeds", "1"])
    assert res.exit_code == 2 and "--seeds" in res.output
    assert not (tmp_path / "reports/bench/run_seeds1.yaml").exists()


def _run(i, seed, trained, delta, ci, stopped=False):
    return {"seed_index": i, "seed": seed, "training": {"stopped_early": stopped},
            "results": {s: {"trained": {"success": {"rate": trained}},
                            "delta": {"success": {"delta_pp": delta, "ci95_pp": ci}}} for s in ("fitted", "shadow")}}


def test_summary_judges_each_seed_on_the_gates_set_and_counts_the_ones_whose_ci_clears_zero():
    base = {"base": {"success": {"rate": 0.35, "n": 96}}, "majority": {"overall": {"rate": 0.08}}}
    report = {"heldout_set": "fitted", "results": {"fitted": base, "shadow": base},
              "runs": [_run(0, 1, 0.54, 18.8, [8.3, 29.2]), _run(1, 11, 0.40, 5.0, [-2.0, 12.0]),
                       _run(2, 21, 0.50, 15.0, [4.0, 25.0], stopped=True)]}
    s = summarize(report)
    assert s["set"] == "fitted" and list(s["sets"]) == ["fitted", "shadow"]
    assert s["seeds_with_ci_above_0"] == 2 and not s["all_seeds_ci_above_0"]
    assert [r["seed"] for r in s["sets"]["fitted"]["per_seed"]] == [1, 11, 21]
    assert s["sets"]["fitted"]["per_seed"][2]["stopped_early"] is True
    report["runs"][1]["results"]["fitted"]["delta"]["success"]["ci95_pp"] = [0.5, 12.0]
    assert summarize(report)["all_seeds_ci_above_0"]


def test_the_benchmark_reads_the_eval_of_its_own_config_and_every_gates_failing_checks(tmp_path):
    import json

    from rc1.bench.seeds import _gate_verdicts, _latest_eval

    ws = Workspace(tmp_path)
    (tmp_path / "reports/gates").mkdir(parents=True)
    for name, path, runs in (("eval_1.json", "reports/bench/local_seeds3.yaml", 3),
                             ("eval_2.json", "configs/local.yaml", 1),           # make run's, newer
                             ("eval_0.json", "reports/bench/local_seeds3.yaml", 2)):
        (tmp_path / "reports" / name).write_text(json.dumps({"config": {"path": path}, "runs": [{}] * runs}))
    rep, path = _latest_eval(ws, "reports/bench/local_seeds3.yaml", 3)
    assert path.name == "eval_1.json" and len(rep["runs"]) == 3
    assert _latest_eval(ws, "reports/bench/local_seeds3.yaml", 4) == (None, None)
    kl = {"name": "seed 2 (20250840): KL vs target_kl", "measured": 0.081, "threshold": "<= 0.075", "status": "fail"}
    (tmp_path / "reports/gates/training_done.json").write_text(json.dumps(
        {"results": [{"checks": [{"name": "steps", "status": "pass"}, kl]}]}))
    assert _gate_verdicts(ws) == {"training_done": {"failing": [
        {"name": kl["name"], "measured": 0.081, "threshold": "<= 0.075"}]}}


def test_summary_reports_the_pooled_estimate_beside_the_seeds():
    from rc1.bench.seeds import _table
    from rc1.eval.metrics import EpisodeRecord, pooled_compare

    def rec(i, ok):
        return EpisodeRecord(f"i{i}", "strategyqa", "medium", False, ok, float(ok), 0, 1, 0, False)

    base_recs = [rec(i, i < 50) for i in range(100)]
    runs_recs = [[rec(i, (i < 50 and not 5 * s <= i < 5 * s + 10) or 50 + 7 * s <= i < 70 + 7 * s) for i in range(100)]
                 for s in range(3)]                                  # +10 pp each, different items
    base = {"base": {"success": {"rate": 0.5, "n": 100}}, "majority": {"overall": {"rate": 0.5}}}
    report = {"heldout_set": "shadow", "results": {"shadow": base},
              "pooled": {"shadow": pooled_compare(base_recs, runs_recs)},
              "runs": [_run(i, 1 + 10 * i, 0.6, 10.0, [-1.0, 21.0]) for i in range(3)]}
    s = summarize(report)
    p = s["sets"]["shadow"]["pooled"]
    assert s["seeds_with_ci_above_0"] == 0 and s["pooled_ci_above_0"]      # no seed alone, the pooled three do
    assert p["seeds"] == 3 and p["delta_pp"] == 10.0 and 0 < p["ci95_pp"][0] < 10
    assert "pooled" in _table(s) and "mean of 3 seeds" in _table(s)


def test_a_refused_pipeline_fails_the_command_after_writing_its_report(tmp_path, monkeypatch):
    """The gates refusing (the pipeline's exit 1) is the command's exit 1, the measurement still written; a
    pipeline that passed exits 0."""
    import json

    import rc1.bench.seeds as seeds_bench

    for code, expected in ((1, 1), (0, 0)):
        result = {"config": "configs/local.yaml", "pipeline_exit": code, "summary": None,
                  "gates": {"training_done": {"failing": [{"name": "drift"}] if code else []}}}
        monkeypatch.setattr(seeds_bench, "run", lambda ws, **kw: dict(result))
        res = CliRunner().invoke(app, ["--workdir", str(tmp_path), "bench", "seeds"])
        assert res.exit_code == expected, res.output
        assert json.loads((tmp_path / "reports/bench/seeds.json").read_text())["pipeline_exit"] == code
        assert ("gate(s) refused: training_done" in res.output) == bool(code)
