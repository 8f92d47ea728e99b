"""Judge client against a scripted local fault server: retries, fail-fast, cache, stats, keys."""

import json
import sqlite3

import pytest

from rc1.judge.cache import JudgeStore, cache_key
from rc1.judge.client import JudgeClient, JudgeRequestError
from rc1.judge.prompts import parse_grade
from rc1.runtime.errors import ConfigError
from rc1.runtime.workspace import Workspace

KEY = "sk-test-fault-0123456789abcdef"
ITEM = {"id": "q1", "question": "What is 2 + 3?", "answer": "5", "aliases": []}


@pytest.fixture
def ws(tmp_path, monkeypatch):
    monkeypatch.setenv("RC1_TEST_FAULT_KEY", KEY)
    return Workspace(tmp_path)


def client(ws, scorer, **kw):
    return JudgeClient(ws, scorer, backoff_base=0.01, **kw)


def test_missing_key_fails_before_any_call(ws, scorer_for, fault_server, monkeypatch):
    monkeypatch.delenv("RC1_TEST_FAULT_KEY")
    with pytest.raises(ConfigError, match="RC1_TEST_FAULT_KEY") as ei:
        JudgeClient(ws, scorer_for())
    assert ei.value.exit_code == 2
    assert fault_server.requests == []


def test_429_with_retry_after_is_honoured(ws, scorer_for, fault_server):
    fault_server.script = [("429", 1)]
    with client(ws, scorer_for()) as c:
        s = c.score(ITEM, "2 + 3 = 5\nANSWER: 5")
        st = c.stats()
    assert s.median == 0.7 and s.samples[0].attempts == 2 and s.samples[0].n429 == 1
    assert fault_server.times[1] - fault_server.times[0] >= 1.0  # waited Retry-After, not the 0.01 s backoff
    assert st["n429"] == 1 and st["rate_429"] == pytest.approx(0.5)


def test_503_hang_and_bad_json_are_retried_then_succeed(ws, scorer_for, fault_server):
    fault_server.script = [("503",), ("hang", 2.0), ("badjson",)]
    with client(ws, scorer_for(timeout_s=0.5)) as c:
        s = c.score(ITEM, "ANSWER: 5")
    assert s.ok and s.samples[0].attempts == 4 and s.samples[0].provenance == "live"
    assert len(fault_server.requests) == 4


def test_retries_are_bounded_and_errors_are_not_cached(ws, scorer_for, fault_server):
    fault_server.script = [("503",)] * 3
    with client(ws, scorer_for(max_retries=2)) as c:
        s = c.score(ITEM, "ANSWER: 5")
        assert not s.ok and s.median is None and s.weight == 0.0
        assert s.samples[0].status == "error" and s.samples[0].attempts == 3
        assert c.store.cache_size() == 0
        again = c.score(ITEM, "ANSWER: 5")  # the server recovered: asked again, live
    assert again.ok and again.samples[0].provenance == "live"
    assert len(fault_server.requests) == 4


@pytest.mark.parametrize("code", ["401", "400"])
def test_client_errors_fail_fast(ws, scorer_for, fault_server, code):
    fault_server.script = [(code,)]
    with client(ws, scorer_for()) as c, pytest.raises(JudgeRequestError, match=f"HTTP {code}"):
        c.score(ITEM, "ANSWER: 5")
    assert len(fault_server.requests) == 1


def test_unparseable_reply_is_a_counted_failed_sample(ws, scorer_for, fault_server):
    fault_server.script = [("ok", "What a lovely answer!")]
    with client(ws, scorer_for()) as c:
        s = c.score(ITEM, "ANSWER: 5")
        st = c.stats()
        assert c.store.cache_size() == 0
    assert s.median is None and s.samples[0].status == "failed"
    assert st["failed"] == 1 and st["billable_tokens"] == 41


def test_cache_serves_repeats_and_keys_on_rubric(ws, scorer_for, fault_server):
    with client(ws, scorer_for(samples=3)) as c:
        first = c.score(ITEM, "ANSWER: 5")
        second = c.score(ITEM, "ANSWER: 5")
        st = c.stats()
    assert first.provenance == ["live"] * 3 and second.provenance == ["cache"] * 3
    assert len(fault_server.requests) == 3 and st["cache_hit_rate"] == pytest.approx(0.5)
    assert second.samples[0].latency_s is None  # a cached sample claims no latency
    with client(ws, scorer_for(samples=3, rubric_version="v2")) as c:
        assert c.score(ITEM, "ANSWER: 5").provenance == ["live"] * 3


def test_cache_key_is_canonical_and_store_uses_wal(tmp_path):
    a = cache_key("http://x/v1/", "m", [{"role": "user", "content": "hi"}], {"temperature": 0.7, "max_tokens": 4}, "r1")
    b = cache_key("http://x/v1", "m", [{"content": "hi", "role": "user"}], {"max_tokens": 4, "temperature": 0.7}, "r1")
    c = cache_key("http://x/v1", "m", [{"content": "hi", "role": "user"}], {"max_tokens": 4, "temperature": 0.8}, "r1")
    assert a == b != c
    with JudgeStore(tmp_path / "c.sqlite") as store:
        assert store.journal_mode() == "wal"
        store.put(a, "7", {"prompt_tokens": 1})
        assert store.get(a) == ("7", {"prompt_tokens": 1}) and store.get(c) is None
    assert sqlite3.connect(tmp_path / "c.sqlite").execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_high_variance_is_recorded_and_downweighted(ws, scorer_for, fault_server):
    fault_server.script = [("ok", "0"), ("ok", "10"), ("ok", "5")]
    with client(ws, scorer_for(samples=3, concurrency=1)) as c:
        s = c.score(ITEM, "ANSWER: 5")
    assert s.unstable and s.variance > 0.08 and s.weight == 0.5 and s.median == 0.5
    line = json.loads(ws.path("reports/unstable_samples.jsonl").read_text().splitlines()[0])
    assert line["item_id"] == "q1" and line["variance"] == pytest.approx(s.variance)


def test_concurrency_is_limited(ws, scorer_for, fault_server):
    fault_server.delay = 0.15
    with client(ws, scorer_for(samples=3, concurrency=2)) as c:
        scores = c.score_many([({**ITEM, "id": f"q{i}"}, f"ANSWER: {i}") for i in range(4)])
    assert all(s.ok for s in scores) and len(fault_server.requests) == 12
    assert fault_server.max_inflight == 2


def test_stats_file_and_no_key_anywhere(ws, scorer_for, fault_server):
    fault_server.script = [("429", 0)]
    with client(ws, scorer_for(samples=2)) as c:
        c.score(ITEM, "ANSWER: 5")
    st = json.loads(ws.path("reports/judge_stats.json").read_text())
    for k in ("latency_p50_s", "latency_p95_s", "rate_429", "billable_tokens", "cache_hit_rate"):
        assert k in st
    assert st["latency_p50_s"] > 0 and st["billable_tokens"] == 82 and st["n429"] == 1
    for p in ws.root.rglob("*"):
        if p.is_file():
            assert KEY.encode() not in p.read_bytes(), p


@pytest.mark.parametrize("text,grade", [("7", 0.7), ("Grade: 10", 1.0), (" 3/10", 0.3), ("eleven", None), ("", None),
                                        ("42", None)])
def test_parse_grade(text, grade):
    assert parse_grade(text) == grade
