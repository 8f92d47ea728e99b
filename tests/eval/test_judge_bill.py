"""The eval report's judge bill: per run from its training end record, summed over the runs."""

from rc1.report.build import _judge_lines


def _run(run_dir, calls, tokens, cost, note=None):
    judge = {"provider": "deepseek", "model": "deepseek-chat", "dimensions": ["reasoning", "clarity"],
             "calls": calls, "live": calls - 1, "cache": 1, "billable_tokens": tokens, "cost": cost, "unstable": 2,
             "seconds": 12.0, "note": note}
    return {"run_dir": run_dir, "training": {"judge": judge}}


def test_judge_bill_sums_tokens_and_cost_over_runs():
    lines = _judge_lines([_run("checkpoints/a", 10, 400, 0.25), _run("checkpoints/b", 20, 600, 0.5)])
    assert "10 calls (live 9, cache 1), 400 billable tokens, cost 0.2500" in lines[0]
    assert lines[-1] == "- Judge total over 2 runs: 30 calls, 1000 billable tokens, cost 0.7500."


def test_rules_runs_say_no_judge_was_called():
    assert "rules only" in _judge_lines([{"run_dir": "c", "training": {"judge": None}}])[0]
