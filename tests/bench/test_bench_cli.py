"""`rc1 bench <area>`: every benchmark lives in rc1.bench behind one command, with typed options."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from rc1.bench import AREAS
from rc1.cli.main import app

RC1 = Path(__file__).resolve().parents[2] / "rc1"


def test_every_area_is_a_bench_command():
    out = CliRunner().invoke(app, ["bench", "--help"]).output
    for area in AREAS:
        assert re.search(rf"^\s*│?\s*{area}\b", out, re.M), (area, out)
    assert set(AREAS) == {p.stem for p in (RC1 / "bench").glob("*.py")} - {"__init__"}


def test_benches_live_only_in_rc1_bench_and_nothing_uses_argparse():
    stray = [p for p in RC1.rglob("bench.py")]
    assert stray == [], stray
    users = [p for p in RC1.rglob("*.py") if re.search(r"^\s*(import argparse|from argparse)", p.read_text(), re.M)]
    assert users == [], users


def test_a_bench_command_writes_its_report(tmp_path):
    res = CliRunner().invoke(app, ["--workdir", str(tmp_path), "bench", "reward", "--quick", "--no-judge"])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "reports/bench/reward.json").read_text())
    assert report["cache"]["lookups_per_s"] > 0 and "judge" not in report
    assert "wrote reports/bench/reward.json" in res.output


def test_bad_bench_options_are_one_line_config_errors(tmp_path):
    for args, msg in ((["memory", "--shape", "qwen3-40b"], "--shape 'qwen3-40b': unknown"),
                      (["memory", "--method", "qlora,lorra"], "--method qlora,lorra: expected some of"),
                      (["memory", "--strategy", "dpo"], "--strategy 'dpo': expected grpo or ppo"),
                      (["memory", "--method", "lora", "--full-depth", "full"], "--full-depth full: expected some of"),
                      (["grpo", "--engines", "pure_pt,deepspeed"], "--engines pure_pt,deepspeed"),
                      (["grpo", "--rollout-backend", "sglang"], "--rollout-backend 'sglang': expected one of torch, "
                                                                "llamacpp, paged"),
                      (["micro", "--micro", "8,x"], "--micro '8,x': expected comma-separated integers"),
                      (["micro", "--micro", "8,32"], "--micro 8,32: each must be between 1 and 31"),
                      (["eval", "--dtype", "fp8", "--model", "random:qwen3-tiny", "--n", "1"], "--dtype 'fp8'")):
        res = CliRunner().invoke(app, ["--workdir", str(tmp_path), "bench", *args])
        assert res.exit_code == 2, (args, res.output)
        assert msg in res.output, (args, res.output)
    res = CliRunner().invoke(app, ["bench", "nope"])
    assert res.exit_code == 2 and "No such command" in res.output


def test_bench_memory_writes_measured_and_extrapolated_figures(tmp_path):
    """The real command on the tiny shape: the production step it ran at full depth is `measured`, the one it did
    not run is `extrapolated` from the fitted arithmetic; a point over the budget is skipped, not run."""
    # the budget keeps out the quick grid's one large point (4 x 512 tokens, 448 generated: 2.5 GB estimated, the
    # others under 0.8 GB), a fifth of the run's time; the fit still has points for every factor it had
    res = CliRunner().invoke(app, ["--workdir", str(tmp_path), "bench", "memory", "--shape", "qwen3-tiny", "--quick",
                                   "--method", "full,lora", "--full-depth", "lora", "--device", "cpu",
                                   "--max-new-tokens", "16", "--max-length", "64", "--group-size", "2",
                                   "--prompts", "1", "--budget-gb", "1.5"])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "reports/bench/memory.json").read_text())
    skipped = [(s["label"], s["why"]) for s in report["skipped"]]
    assert skipped == [("lora L=2 4x512 (448 gen) gc=on", "over the budget")]
    assert len(report["measured"]) == 5 and not report["failed"]
    lora, full = report["methods"]["lora"], report["methods"]["full"]
    assert lora["kind"] == "measured" and full["kind"] == "extrapolated"
    assert lora["peak_gb"] == round(lora["full_depth_measured"][0]["peak_gb"], 2)
    assert report["production_step"].startswith("2 rows x 64 tokens, 16 generated")
    assert all(abs(p["error_pct"]) < 25 for p in report["fit"]["points"])
    assert "wrote reports/bench/memory.json" in res.output


def test_bench_rollout_times_every_backend_on_the_same_work(tmp_path):
    """The real command on a tiny random model: every backend that runs here decodes exactly --new-tokens per row
    at batch 1 and at the rollout batch, and each row carries its ratios (to torch fp32, to the bandwidth limit)."""
    from rc1.generation import installed
    from rc1.runtime.device import cpu_bf16_supported

    res = CliRunner().invoke(app, ["--workdir", str(tmp_path), "bench", "rollout", "--base", "random:qwen3-tiny",
                                   "--quick", "--new-tokens", "6", "--rollout-batch", "8", "--threads", "1"])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "reports/bench/rollout.json").read_text())
    rows = {r["what"]: r for r in report["rows"]}
    expected = {"torch fp32 b=1", "torch fp32 b=8"}
    if cpu_bf16_supported():
        expected |= {"torch bf16 copy b=1", "torch bf16 copy b=8"}
    if installed("llamacpp"):
        expected |= {"llamacpp f32 b=1", "llamacpp f32 b=8", "llama.cpp single stream (llama-cpp-python) f32"}
    assert set(rows) == expected
    for what, r in rows.items():
        assert r["tokens"] == 6 * r["batch"], what  # no row stopped early or ran long
        assert r["tok_per_s"] > 0 and r["vs_bandwidth_limit"] > 0
    assert set(report["vs_torch_fp32"]) == {w for w in expected if not w.startswith(("torch fp32", "llama.cpp"))}
