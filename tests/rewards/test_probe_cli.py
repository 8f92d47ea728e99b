"""`rc1 reward probe` / `assert-live` and the scorer gate, against the scripted fault server."""

import json
import sqlite3

import pytest
import yaml
from typer.testing import CliRunner

from rc1.cli.main import app
from rc1.config.load import load_train_config
from rc1.config.gates import GatesConfig
from rc1.gates import scorer as scorer_gate
from rc1.gates.base import GateContext
from rc1.runtime.workspace import Workspace
from tests.helpers import judges


@pytest.fixture
def ws(tmp_path, monkeypatch, fault_server):
    monkeypatch.setenv("RC1_TEST_FAULT_KEY", "sk-test-fault-0123456789abcdef")
    cfg = {"scorer": {"provider": "openai", "samples": 3, "concurrency": 2, "max_retries": 1, "timeout_s": 5,
                      "providers": {"openai": {"base_url": fault_server.base_url, "model": "fault-model",
                                               "api_key_env": "RC1_TEST_FAULT_KEY"}}}}
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "run.yaml").write_text(yaml.safe_dump(cfg))
    fault_server.responder = judges.honest_judge  # grades correct answers high, wrong ones low
    return Workspace(tmp_path)


def rc1(ws, *args):
    return CliRunner().invoke(app, ["--workdir", str(ws.root), *args], catch_exceptions=False)


def gate(ws, rnd="round1"):
    cfg = load_train_config("configs/run.yaml", ws)
    return scorer_gate.evaluate(GateContext(ws=ws, gates=GatesConfig(), round=rnd, config=cfg))


def test_live_probe_calls_the_judge_every_time_and_a_cached_probe_is_refused(ws, fault_server):
    r = rc1(ws, "reward", "probe", "--n", "8", "--provider", "openai", "--live", "--seed", "11", "-c", "configs/run.yaml")
    assert r.exit_code == 0, r.output
    rep = json.loads(ws.path("reports/scorer_probe.json").read_text())
    assert rep["passed"] and rep["responses"] == 72 and rep["live_samples"] == 216 and rep["cache_samples"] == 0
    assert rep["latency_p50_s"] > 0 and rep["billable_tokens"] == 216 * 41
    assert ws.path("reports/scorer_probe.json.sha256").exists()
    assert len(fault_server.requests) == 216
    assert rc1(ws, "reward", "assert-live", "--cache-hit-lt", "0.90", "-c", "configs/run.yaml").exit_code == 0
    res = gate(ws)
    assert res.passed, [c for c in res.checks if not c.passed]
    assert {e.path for e in res.evidence} == {"reports/scorer_probe.json", "reports/judge_stats.json"}

    # --live asks the judge again even for requests it answered before: the repeat is live, not cached.
    r = rc1(ws, "reward", "probe", "--n", "8", "--provider", "openai", "--live", "--seed", "11", "-c", "configs/run.yaml")
    assert r.exit_code == 0 and len(fault_server.requests) == 432

    # --allow-cache serves the identical probe from the cache: not live, so assert-live and the gate refuse.
    r = rc1(ws, "reward", "probe", "--n", "8", "--provider", "openai", "--allow-cache", "--seed", "11", "-c",
            "configs/run.yaml")
    assert len(fault_server.requests) == 432
    assert json.loads(ws.path("reports/scorer_probe.json").read_text())["cache_samples"] == 216
    r = rc1(ws, "reward", "assert-live", "--cache-hit-lt", "0.90", "-c", "configs/run.yaml")
    assert r.exit_code == 3 and "cache hit rate 1.000" in r.output
    failing = {c.name for c in gate(ws).checks if not c.passed}
    assert "probe was live" in failing and "cache hit rate, last judge run" in failing


def test_mock_scores_in_the_ledger_are_refused(ws):
    assert rc1(ws, "reward", "probe", "--n", "2", "--seed", "5", "-c", "configs/run.yaml").exit_code == 0
    db = sqlite3.connect(ws.path("reports/judge_cache.sqlite"))
    db.execute("INSERT INTO ledger(ts, run_id, provider, model, provenance, status, score) "
               "VALUES (1, 'other', 'openai', 'm', 'mock', 'ok', 0.9)")
    db.commit()
    db.close()
    r = rc1(ws, "reward", "assert-live", "--cache-hit-lt", "0.95", "-c", "configs/run.yaml")
    assert r.exit_code == 3 and "non-live source ['mock']" in r.output
    assert any(c.name == "scores from mock/non-live sources" and not c.passed for c in gate(ws, "round2").checks)


def test_no_probe_no_ledger_fails_the_gate(ws):
    res = gate(ws)
    assert not res.passed and all("not available" in c.detail for c in res.checks)
    assert rc1(ws, "reward", "assert-live", "-c", "configs/run.yaml").exit_code == 3


def test_missing_key_is_a_config_error_before_any_call(ws, fault_server, monkeypatch):
    monkeypatch.delenv("RC1_TEST_FAULT_KEY")
    r = CliRunner().invoke(app, ["--workdir", str(ws.root), "reward", "probe", "-c", "configs/run.yaml"])
    assert r.exit_code == 2 and "RC1_TEST_FAULT_KEY" in r.output
    assert fault_server.requests == []


def test_local_provider_without_a_server_is_a_config_error(ws):
    r = CliRunner().invoke(app, ["--workdir", str(ws.root), "reward", "probe", "--provider", "local"])
    assert r.exit_code == 2 and "rc1 judge serve" in r.output


def test_probe_of_another_provider_too_small_or_without_usage_fails_the_gate(ws, fault_server):
    """Each scorer check refuses what it exists to stop: a probe of the wrong provider, fewer items than the
    gates config asks for, and a server that reports no usage (nothing billable: not a real model call)."""
    fault_server.usage = None
    r = rc1(ws, "reward", "probe", "--n", "2", "--seed", "9", "-c", "configs/run.yaml")
    assert r.exit_code == 3 and "no billable usage" in r.output
    failing = {c.name for c in gate(ws).failing}
    assert {"probe items", "probe billable tokens", "billable tokens in last 100 scores", "probe passed"} <= failing
    rep = json.loads(ws.path("reports/scorer_probe.json").read_text())
    ws.path("reports/scorer_probe.json").write_text(json.dumps({**rep, "provider": "deepseek"}))
    assert "probe provider" in {c.name for c in gate(ws).failing}


def _training_rows(ws, run_id: str, n: int, provenance: str) -> None:
    """Ledger rows as the judge in the training loop writes them (rc1.judge.live, run id train-...)."""
    from rc1.judge.cache import JudgeStore, LedgerRow

    with JudgeStore(ws.path("reports/judge_cache.sqlite")) as store:
        for i in range(n):
            live = provenance == "live"
            store.record(LedgerRow(run_id, "openai", "fault-model", f"t{i}", 0, f"k{i}", provenance, "ok", 0.7,
                                   0.05 if live else None, 40 if live else 0, 1 if live else 0, int(live)))


def test_training_time_grades_all_from_cache_are_refused_whatever_the_probe_says(ws):
    # a live probe passes on its own window...
    assert rc1(ws, "reward", "probe", "--n", "2", "--seed", "5", "-c", "configs/run.yaml").exit_code == 0
    assert rc1(ws, "reward", "assert-live", "--cache-hit-lt", "0.10", "-c", "configs/run.yaml").exit_code == 0
    # ...then a training run (or a resume) whose grades were all replayed from the cache
    _training_rows(ws, "train-t-s0-r0-20260101T000000Z", 30, "cache")
    r = rc1(ws, "reward", "assert-live", "--cache-hit-lt", "0.10", "-c", "configs/run.yaml")
    assert r.exit_code == 3 and "training-time" in r.output and "cache hit rate 1.000" in r.output
    # a fresh probe afterwards cannot vouch for training: the training window is still what is read
    assert rc1(ws, "reward", "probe", "--n", "2", "--seed", "6", "-c", "configs/run.yaml").exit_code == 0
    assert rc1(ws, "reward", "assert-live", "--cache-hit-lt", "0.10", "-c", "configs/run.yaml").exit_code == 3
    failing = {c.name for c in gate(ws).checks if not c.passed}
    assert "cache hit rate, last training judge run" in failing
    # live training-time scoring passes
    _training_rows(ws, "train-t-s0-r0-20260101T010000Z", 100, "live")
    r = rc1(ws, "reward", "assert-live", "--cache-hit-lt", "0.10", "-c", "configs/run.yaml")
    assert r.exit_code == 0 and "training scoring" in r.output
