"""rc1 bench memory: a real step is measured, the fit recovers what the arithmetic cannot count, and every
production figure says whether it was measured or extrapolated."""

from __future__ import annotations

from dataclasses import asdict, replace

import pytest

from rc1.bench.memory import (
    Point,
    fit_calibration,
    full_depth_point,
    measure_point,
    point_plan,
    production_results,
)
from rc1.models.memory import GB, Calibration, MemoryPlan, estimate
from rc1.models.shapes import QWEN3_4B, QWEN3_TINY

SETTINGS = {"lora_r": 4, "lora_targets": ["q_proj", "v_proj"], "lora_dropout": 0.0, "kl_coef": 0.04,
            "strategy": "grpo"}


@pytest.mark.parametrize("strategy", ["grpo", "ppo"])
def test_a_step_of_the_engine_is_measured_phase_by_phase(tiny_dir, strategy):
    point = Point("lora", 2, 4, 48, 16)
    r = measure_point(point, str(tiny_dir), {**SETTINGS, "strategy": strategy}, ["cpu"])
    phases = r["phase_peaks_gb"]
    assert set(phases) == {"plan (reference forward)", "forward + backward", "optimizer step"}
    assert r["peak_gb"] == pytest.approx(max(phases.values()), abs=1e-3)
    # each phase's peak counts from the RSS at its start; the allocator may hand a few pages back between the
    # reading before the step and the first phase (it did: 0.7604 vs 0.7607 GB), never a large share
    assert r["peak_gb"] >= 0.97 * r["rss_before_step_gb"] > 0
    assert r["adam_state_gb"] > 0 and r["precision"] == "fp32" and r["device"] == "cpu"
    assert r["label"] == "lora L=2 4x48 (16 gen) gc=on"


def _rows(shape, points, cal, device="cpu", precision="fp32"):
    """Rows as measure_point returns them, with peaks made by the arithmetic under calibration `cal`."""
    return [{"point": asdict(p), "label": p.label, "peak_gb": estimate(shape.with_layers(p.layers),
                                                                       point_plan(p, device, precision, SETTINGS),
                                                                       cal).train_bytes / GB, "step_s": 1.0}
            for p in points]


def test_the_fit_recovers_the_factors_that_made_the_peaks():
    truth = Calibration(overhead_bytes=0.6 * GB, layer_gc=1.7, layer_nogc=1.2, logits_copies=2.5,
                        embedding_grad_copies=1.5)
    points = [Point("lora", 1, 4, 256, 64), Point("lora", 1, 4, 512, 128), Point("lora", 1, 4, 256, 192),
              Point("lora", 1, 2, 1024, 32), Point("lora", 1, 4, 512, 128, gradient_checkpointing=False),
              Point("qlora", 1, 4, 256, 64), Point("full", 1, 4, 256, 64)]
    prior = Calibration(overhead_bytes=1 * GB, layer_gc=3.0, layer_nogc=3.0, logits_copies=1.0,
                        embedding_grad_copies=3.0)
    fitted, residuals = fit_calibration(QWEN3_4B, _rows(QWEN3_4B, points, truth), "cpu", "fp32", SETTINGS, prior)
    assert fitted.overhead_bytes == pytest.approx(truth.overhead_bytes, rel=1e-3)
    assert (fitted.layer_gc, fitted.layer_nogc, fitted.logits_copies, fitted.embedding_grad_copies) == \
        pytest.approx((1.7, 1.2, 2.5, 1.5), rel=1e-3)
    assert all(abs(r["error_pct"]) < 0.1 for r in residuals) and len(residuals) == len(points)
    assert any(abs(r["shipped_error_pct"]) > 5 for r in residuals)  # the prior was wrong, and it shows


def test_a_factor_no_point_exercises_keeps_its_prior():
    truth = Calibration(overhead_bytes=0.6 * GB, layer_gc=1.7, layer_nogc=1.2, logits_copies=2.5,
                        embedding_grad_copies=1.5)
    points = [Point("lora", 1, 4, 256, 64), Point("lora", 1, 4, 256, 192), Point("lora", 1, 2, 1024, 32)]
    prior = Calibration(overhead_bytes=1 * GB, layer_gc=3.0, layer_nogc=9.9, logits_copies=1.0,
                        embedding_grad_copies=7.0)  # no full fine-tune and no gc=off point measured
    fitted, _ = fit_calibration(QWEN3_4B, _rows(QWEN3_4B, points, truth), "cpu", "fp32", SETTINGS, prior)
    assert fitted.layer_nogc == 9.9 and fitted.embedding_grad_copies == 7.0
    assert fitted.layer_gc == pytest.approx(1.7, rel=1e-3)


def test_production_figures_are_labelled_measured_or_extrapolated():
    cal = Calibration(overhead_bytes=0.5 * GB, layer_gc=2.0, layer_nogc=1.0, logits_copies=3.0,
                      embedding_grad_copies=2.0)
    shape = replace(QWEN3_TINY, layers=2)
    prod = {m: MemoryPlan(method=m, sequences=4, seq_len=64, action_tokens=16, gen_rows=4, gen_prompts=2, lora_r=4,
                          lora_targets=("q_proj", "v_proj")) for m in ("qlora", "lora")}
    ran = Point("lora", 2, 4, 64, 16)
    rows = _rows(shape, [ran], cal)
    rows[0]["peak_gb"] = 1.234  # what the machine said, not what the arithmetic says
    out = production_results(shape, prod, rows, cal)
    assert out["lora"]["kind"] == "measured" and out["lora"]["peak_gb"] == 1.23
    assert out["qlora"]["kind"] == "extrapolated"
    assert out["qlora"]["peak_gb"] == round(estimate(shape, prod["qlora"], cal).train_bytes / GB, 2)
    assert out["lora"]["full_depth_measured"][0]["peak_gb"] == 1.234


def test_full_depth_points_shrink_to_the_budget_or_are_skipped():
    cal = Calibration(overhead_bytes=0.75 * GB, layer_gc=2.0, layer_nogc=1.0, logits_copies=3.0,
                      embedding_grad_copies=2.0)
    prod = MemoryPlan(method="qlora", sequences=16, seq_len=4096, action_tokens=1024, lora_r=4,
                      lora_targets=("q_proj", "v_proj"))
    p = full_depth_point(QWEN3_4B, "qlora", prod, "cpu", "fp32", SETTINGS, 13 * GB, cal)
    assert p.layers == 36 and p.sequences * p.seq_len <= 256 and not p.warmup  # a CPU: small, no warm-up
    gpu = full_depth_point(QWEN3_4B, "qlora", replace(prod, device="cuda", precision="bf16"), "cuda", "bf16",
                           SETTINGS, 40 * GB, cal)
    assert gpu.warmup and gpu.sequences * gpu.seq_len > 256
    assert estimate(QWEN3_4B, point_plan(gpu, "cuda", "bf16", SETTINGS), cal).train_bytes <= 40 * GB
    # a full fine-tune of 4B (16 B/param before any activation) cannot fit 13 GB at any batch
    assert full_depth_point(QWEN3_4B, "full", replace(prod, method="full"), "cpu", "fp32", SETTINGS, 13 * GB,
                            cal) is None


def test_a_point_that_raises_or_is_killed_is_reported_not_a_hang():
    import os

    from rc1.bench.memory import PointFailed, _in_child

    assert _in_child(int, "42") == 42
    with pytest.raises(PointFailed, match="ValueError: invalid literal"):
        _in_child(int, "forty-two")
    with pytest.raises(PointFailed, match="killed by signal 6"):  # as the OOM killer's SIGKILL would be
        _in_child(os.abort)
