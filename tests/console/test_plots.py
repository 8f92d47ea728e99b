"""The plots a user looks at instead of reading: the curriculum's level mix on the Training screen, the
difficulty fit and the held-out gain per task on the Reports screen (fixtures: tests/helpers/console.py)."""

from __future__ import annotations

import pytest
from tests.helpers.console import RecordingBackend, curriculum_fields, text_of, wait_for, write_plotted_reports

from rc1.console.app import make_app
from rc1.console.metrics_feed import MetricsStore
from rc1.console.widgets.plot import short_name


def test_curriculum_mix_plots_each_level_weight_and_not_its_pass_rate():
    store = MetricsStore()
    for step in range(1, 50):
        store.add({"step": step, "loss": 1.0, **curriculum_fields(step)})
    names = [name for name, _, _ in store.plot_series()["curriculum mix"]]
    assert names == ["curriculum/gsm8k/L0/weight", "curriculum/gsm8k/L1/weight"]
    assert [short_name(n) for n in names] == ["gsm8k L0", "gsm8k L1"]
    xs, ys = store.series["curriculum/gsm8k/L1/weight"].points()
    assert xs[-1] == 49 and ys[-1] > ys[0]  # the mix moves to L1 over the steps
    assert MetricsStore().plot_series()["curriculum mix"] == []  # no curriculum: nothing plotted, no error


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.mark.anyio
async def test_reports_screen_plots_the_difficulty_fit_and_the_heldout_gain(console_ws):
    write_plotted_reports(console_ws)
    app = make_app(backend=RecordingBackend(console_ws), poll_interval=0.05, watch_interval=0.1)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.view is not None, what="first load")
        await pilot.press("2")
        await wait_for(pilot, lambda: app.screen.__class__.__name__ == "ReportsScreen", what="reports screen")
        fit = app.screen.query_one("#rep-difficulty-fit .report-chart")
        await wait_for(pilot, lambda: "target band" in text_of(fit), what="fit chart")
        text = text_of(fit)
        assert "0.2–0.6" in text and "✔ L0 1 op" in text and "0.28 9/32" in text
        assert "hotpotqa  dropped  no level reaches 0.2" in text
        gain = text_of(app.screen.query_one("#rep-eval .report-chart"))
        assert "held-out gain, trained − base (pp), 95 % CI — seed 7" in gain
        assert "+20.0 pp n=40" in gain and "-5.0 pp n=40" in gain


def test_training_plots_show_one_run_at_a_time():
    """A config with three seeds trains them one after another into one metrics.jsonl (steps restart at 1):
    the plots follow the newest seed's run rather than drawing it back across the previous one, and a run
    resumed from an earlier checkpoint replaces the steps it redoes."""
    store = MetricsStore()
    for seed_index, loss in ((0, 1.0), (1, 2.0)):
        for step in range(1, 11):
            store.add({"step": step, "loss": loss + step / 100, "seed_index": seed_index})
    xs, ys = store.series["loss"].points()
    assert xs == list(range(1, 11)) and min(ys) > 2.0  # seed index 1 only, steps in order
    assert store.seed_index == 1
    for step in range(6, 9):  # resumed from the step-5 checkpoint: steps 6-8 again, with other values
        store.add({"step": step, "loss": 9.0, "seed_index": 1})
    xs, ys = store.series["loss"].points()
    assert xs == [1, 2, 3, 4, 5, 6, 7, 8] and ys[-3:] == [9.0, 9.0, 9.0]
    store.add({"step": 8, "alert": "reward rose while success did not", "seed_index": 1})
    assert store.series["loss"].points()[0][-1] == 8  # a second record of the same step rewinds nothing


def test_small_and_constant_series_keep_readable_axis_labels():
    """plotext labels its y axis with one decimal and centres a constant series in [-1, 1]: a constant lr of
    1e-05 read 0.0 and a KL of 0.002-0.004 read 0.0 throughout. Their ticks are set to what the values are."""
    from rc1.console.plotting import render_plot, y_ticks

    assert y_ticks([1e-5] * 10, 3) == pytest.approx([5e-6, 1e-5, 1.5e-5])
    assert y_ticks([0.002, 0.004], 3) == pytest.approx([0.002, 0.003, 0.004])
    assert y_ticks([0.1, 2.0], 3) is None  # plotext's own ticks read fine there
    text = render_plot([("lr", [1.0, 2.0, 3.0], [1e-5, 1e-5, 1e-5])], 40, 10)
    assert "1e-05" in text and "1.5e-05" in text
