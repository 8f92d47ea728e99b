"""Tables and charts laid out at 80, 120, 160 and 250 columns (and the narrow panels they sit in at 80):
no column collapses, the status glyph and the check name always show, charts keep their axis."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console
from tests.helpers.console import DIFFICULTY_FIT, eval_report

from rc1.console.widgets.charts import difficulty_fit_chart, heldout_gain_chart
from rc1.console.widgets.gate_checks import gate_table
from rc1.console.widgets.json_report import render_doc

WIDTHS = [36, 50, 80, 120, 160, 250]
LONG_DETAIL = "96 episodes of 24 prompts; fix: easier items (pool.difficulty_target) or a stronger base model (model.base)"
REPORT = {"passed": False, "from": "round1", "to": "round2_pass", "time": "2026-11-22T03:00:00Z", "profile": "laptop",
          "results": [
              {"gate": "learning_signal", "evidence": [{"path": "reports/learning_signal.json", "sha256": "ab" * 32}],
               "checks": [{"name": "pass@4", "measured": 0.083, "threshold": ">= 0.1", "status": "fail", "detail": LONG_DETAIL},
                          {"name": "groups without a correctness signal", "measured": 0.917, "threshold": "<= 0.8",
                           "status": "fail", "detail": LONG_DETAIL}]},
              {"gate": "pool", "evidence": [], "checks": [
                  {"name": "distinct-2", "measured": 0.71, "threshold": ">= 0.6", "status": "pass"},
                  {"name": "clue overlap", "measured": None, "threshold": "<= 0.5", "status": "not applicable",
                   "detail": "N/A: the task file has no supporting text"}]}]}


def render(renderable, width: int) -> list[str]:
    console = Console(width=width, file=io.StringIO(), color_system=None, legacy_windows=False)
    with console.capture() as cap:
        console.print(renderable)
    return cap.get().splitlines()


@pytest.mark.parametrize("width", WIDTHS)
def test_gate_table_keeps_glyph_and_check_name_at_every_width(width):
    lines = render(gate_table("round2", REPORT), width)
    assert all(len(line) <= width for line in lines)
    rows = [line for line in lines if line[:1] in "✔✘–?"]
    assert [r[0] for r in rows] == ["✘", "✘", "✔", "–"]  # every check's glyph, first column, in order
    text = " ".join(" ".join(line.split()) for line in lines)
    header = next(i for i, line in enumerate(lines) if "check" in line and "measu" in line)
    cells = []  # the check column, unwrapped: a glyph row's first cell, and the continuation lines under it
    for line in lines[header + 2:]:
        rest = line[1:].strip() if line[:1] in "✔✘–?" else line.strip()
        cells.append(re.split(r"\s{2,}", rest)[0] if line[:1] in "✔✘–?" else rest)
    folded = "".join("".join(cells).split())
    joined = "".join(text.split())  # where the area column shows, the names fit on one line
    for name in ("pass@4", "distinct-2", "clueoverlap", "groupswithoutacorrectnesssignal"):
        assert name in folded or name in joined
    assert "0.083" in text and ">= 0.1" in text
    if width >= 160:
        assert "reports/learning_signal.json" in text  # the evidence column where it fits


@pytest.mark.parametrize("width", [40, 80, 160])
def test_charts_keep_their_axis_and_labels(width):
    fit = render(difficulty_fit_chart(DIFFICULTY_FIT), width)
    assert all(len(line) <= width for line in fit)
    assert sum("└" in line and "┘" in line for line in fit) == 3  # one axis per task
    assert any("L3 4 ops" in line and line.rstrip().endswith("—") for line in fit)  # a level not measured
    assert any(line.split()[:2] == ["0", "0.5"] or line.split()[:1] == ["0"] for line in fit)
    assert any("✔ L0 1 op" in line and "●" in line for line in fit) and any("dropped" in line for line in fit)
    gain = render(heldout_gain_chart(eval_report()), width)
    assert any("gsm8k" in line and "●" in line for line in gain)
    axis_labels = gain[-1].split()
    assert axis_labels[0].startswith("-") and "0" in axis_labels  # symmetric axis with 0 marked


def test_a_long_record_list_shows_whole_columns_and_names_the_ones_left_out():
    records = [{f"column_{i}": i * 1.5 for i in range(12)} for _ in range(3)]
    lines = render(render_doc({"rows": records})[-1], 80)
    header = next(line for line in lines if "column_0" in line)
    assert "column_5" in header and "column_11" not in header
    text = " ".join(lines)
    assert "columns left out at this width" in text and "column_11" in text
