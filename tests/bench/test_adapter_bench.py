"""rc1 bench adapter: a LoRA adapter written from PEFT-named tensors and swapped onto a base of the shape loaded in
llama.cpp, every figure measured; a synthesised base says so and is deleted; bad input is one line, exit 2."""

from __future__ import annotations

import json
import tempfile
from collections import namedtuple

import pytest
from typer.testing import CliRunner

from rc1.cli.main import app
from rc1.config.schema import LORA_MODULES
from rc1.models.shapes import QWEN3_TINY

pytest.importorskip("llama_cpp")


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """The temporary directory the bench synthesises its base in (to see that it is emptied)."""
    d = tmp_path / "scratch"
    d.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(d))
    return d


def test_the_swap_of_a_tiny_shaped_adapter_is_timed_end_to_end(tmp_path, scratch):
    res = CliRunner().invoke(app, ["--workdir", str(tmp_path / "ws"), "bench", "adapter", "--shape", "qwen3-tiny",
                                   "--r", "4", "--repeats", "2", "--threads", "1"])
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "ws/reports/bench/adapter.json").read_text())
    adapter, swap, base = report["adapter"], report["swap"], report["base"]
    assert adapter["params"] == QWEN3_TINY.lora_params(4, list(LORA_MODULES)) and adapter["rank"] == 4
    assert adapter["bytes"] > 4 * adapter["params"] and adapter["tensors"] == 2 * 7 * QWEN3_TINY.layers
    assert len(adapter["write_s_all"]) == 2 and adapter["write_s"] > 0
    assert swap["load_ms"] > 0 and swap["set_ms"] > 0 and len(swap["load_ms_all"]) == 2
    assert report["sync_s"] >= adapter["write_s"] + swap["load_ms"] / 1000
    assert base["source"] == "synthesised" and base["arch"] == "qwen3" and base["load_s"] > 0
    assert report["memory"]["peak_rss_gb"] >= report["memory"]["rss_after_base_load_gb"] > 0
    assert all(report["decode_ms"][k] > 0 for k in ("base", "first_after_swap", "second_after_swap"))
    assert "instead of 49154" in report["synthesised"] and "synthesised:" in res.output
    assert list(scratch.iterdir()) == []   # the synthesised base and the adapters are gone


def test_bad_input_is_one_line_and_exit_2(tmp_path, scratch, monkeypatch):
    for args, msg in ((["--shape", "qwen3-40b"], "--shape 'qwen3-40b': unknown; known: qwen3-4b"),
                      (["--shape", "qwen3-tiny", "--r", "0"], "--r 0: the LoRA rank must be at least 1"),
                      (["--shape", "qwen3-tiny", "--base-dtype", "q4_0"], "--base-dtype 'q4_0': expected one of")):
        res = CliRunner().invoke(app, ["--workdir", str(tmp_path), "bench", "adapter", *args])
        assert res.exit_code == 2 and msg in res.output, (args, res.output)
        assert len(res.output.strip().splitlines()) == 1, res.output
    Usage = namedtuple("Usage", "total used free")
    monkeypatch.setattr("rc1.bench.adapter.shutil.disk_usage", lambda p: Usage(100 * 2**30, 99 * 2**30, 2**30))
    res = CliRunner().invoke(app, ["--workdir", str(tmp_path), "bench", "adapter", "--shape", "qwen3-tiny"])
    assert res.exit_code == 2 and "1.1 GB free in" in res.output and "needs 12.9 GB" in res.output, res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    assert not (tmp_path / "reports/bench/adapter.json").exists() and list(scratch.iterdir()) == []
