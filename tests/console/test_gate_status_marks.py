"""The console shows a check's status, not only pass/fail: not measurable (blocking or warned) and not applicable."""

from rich.console import Console

from rc1.console.widgets.gate_checks import blockers, gate_table
from rc1.console.widgets.state_diagram import diagram, gate_mark


def _report(policy: str, passed: bool) -> dict:
    checks = [{"name": "spearman(old, new)", "measured": 0.9, "threshold": ">= 0.75", "passed": True, "status": "pass"},
              {"name": "corr_improve_pct", "measured": None, "threshold": ">= 10", "passed": False,
               "status": "not measurable", "detail": "not measurable: the new weights are the old ones"},
              {"name": "clue overlap", "measured": None, "threshold": "applicable", "passed": True,
               "status": "not applicable", "detail": "not applicable: no supporting text"}]
    return {"passed": passed, "from": "round1", "to": "round2_pass", "time": "t",
            "results": [{"gate": "shadow_run", "passed": passed, "checks": checks, "evidence": [],
                         "not_measurable": policy}]}


def _text(renderable) -> str:
    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()


def test_warned_not_measurable_is_shown_as_a_warning_never_as_a_pass():
    rep = _report("warn", True)
    table = _text(gate_table("round2", rep))
    assert "PASSED (1 not measurable: warned" in table
    assert "? " in table and "[not measurable]" in table and "[not applicable]" in table and "–" in table
    text = blockers("round1", {"round2": rep}).plain
    assert "passed its last run" in text and "not measurable, warned" in text and "production blocks" in text
    assert gate_mark(rep) == ("!", "yellow")
    assert "!" in diagram("round1", {"round2": rep}).plain.splitlines()[1]


def test_blocking_not_measurable_is_listed_among_the_blockers():
    rep = _report("block", False)
    text = blockers("round1", {"round2": rep}).plain
    assert "1 failing check(s)" in text and "corr_improve_pct" in text and "this profile blocks on it" in text
    assert "clue overlap" not in text  # not applicable never blocks
    assert gate_mark(rep) == ("✘", "red")
