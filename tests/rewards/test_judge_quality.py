"""Judge quality: the probe measures discrimination (AUC with a CI) on known-correct and known-wrong
answers; constant, random and inverted judges fail and are named; bad grades are clear per-sample errors
that are never cached."""

import json

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from rc1.cli.main import app
from rc1.config.load import load_train_config
from rc1.config.gates import GatesConfig, ScorerGate
from rc1.gates import scorer as scorer_gate
from rc1.gates.base import NOT_MEASURABLE, GateContext
from rc1.judge.client import JudgeClient
from rc1.judge.prompts import read_grade, read_match
from rc1.judge.probe import discrimination, probe_set
from rc1.runtime.workspace import Workspace
from tests.helpers import judges
from tests.helpers.configs import gates_yaml


@pytest.fixture
def ws(tmp_path, monkeypatch, fault_server):
    monkeypatch.setenv("RC1_TEST_FAULT_KEY", "sk-test-fault-0123456789abcdef")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "gates.yaml").write_text(gates_yaml({"scorer": {"auc_min": 0.8}}))
    write_config(tmp_path, fault_server)
    return Workspace(tmp_path)


def write_config(root, fault_server, **scorer):
    cfg = {"gates": "configs/gates.yaml",
           "scorer": {"provider": "openai", "samples": 1, "concurrency": 4, "max_retries": 1, "timeout_s": 5,
                      "providers": {"openai": {"base_url": fault_server.base_url, "model": "fault-model",
                                               "api_key_env": "RC1_TEST_FAULT_KEY"}}, **scorer}}
    (root / "configs" / "run.yaml").write_text(yaml.safe_dump(cfg))


def probe(ws, *args):
    return CliRunner().invoke(app, ["--workdir", str(ws.root), "reward", "probe", "-c", "configs/run.yaml", *args],
                              catch_exceptions=False)


def report(ws):
    return json.loads(ws.path("reports/scorer_probe.json").read_text())


def test_probe_set_has_correct_and_wrong_answers_for_every_task():
    ps = probe_set(4, seed=3)
    for task in ("hotpotqa", "strategyqa", "gsm8k"):
        kinds = [(p.kind, p.correct) for p in ps if p.item["task"] == task]
        assert kinds.count(("gold", True)) == 4 and kinds.count(("perturbed", False)) == 4
        assert kinds.count(("other_item", False)) == 4
    assert probe_set(4, seed=3)[5].response == ps[5].response  # deterministic per seed


def test_an_honest_judge_passes_with_its_auc_reported(ws, fault_server):
    fault_server.responder = judges.honest_judge
    r = probe(ws, "--n", "6", "--seed", "1")
    assert r.exit_code == 0, r.output
    d = report(ws)["discrimination"]
    assert d["auc"] == 1.0 and d["ci"][0] >= 0.8 and d["verdict"] == "ok" and d["n_correct"] == 18
    assert "discrimination: AUC 1.000" in r.output
    assert report(ws)["agreement"]["overall"] == 1.0 and report(ws)["method"] == "grade"
    res = scorer_gate.evaluate(GateContext(ws=ws, gates=GatesConfig(), round="round1",
                                           config=load_train_config("configs/run.yaml", ws)))
    check = next(c for c in res.checks if c.name.startswith("judge discrimination"))
    assert check.passed and check.measured == 1.0 and check.threshold == ">= 0.8 (95% CI)"


@pytest.mark.parametrize("judge,verdict,named", [
    (judges.constant_judge("7"), "constant", "constant judge"),
    (judges.random_judge(5), "chance", "better than chance"),
    (judges.inverted_judge, "inverted", "inverted judge"),
])
def test_constant_random_and_inverted_judges_fail_on_discrimination(ws, fault_server, judge, verdict, named):
    fault_server.responder = judge
    r = probe(ws, "--n", "8", "--seed", "2")
    assert r.exit_code == 3, r.output
    assert "judge discrimination" in r.output and named in r.output
    rep = report(ws)
    assert not rep["passed"] and rep["discrimination"]["verdict"] == verdict
    assert rep["live_samples"] == 72 and rep["error_samples"] == 0  # live and well-formed: only judging fails
    res = scorer_gate.evaluate(GateContext(ws=ws, gates=GatesConfig(), round="round1",
                                           config=load_train_config("configs/run.yaml", ws)))
    assert not res.passed
    assert "judge discrimination: AUC CI lower bound" in [c.name for c in res.failing]


@pytest.mark.parametrize("action,why", [
    (("ok", "42"), "grade 42 is out of range 0-10"),
    (("ok", "-3"), "grade -3 is out of range 0-10"),
    (("ok", "banana"), "holds no number"),
    (("ok", ""), "empty reply"),
    (("empty",), "empty response body"),
])
def test_bad_grades_are_clear_per_sample_errors_and_never_cached(ws, fault_server, action, why):
    item = {"id": "q1", "question": "What is 2 + 3?", "answer": "5", "aliases": []}
    cfg = load_train_config("configs/run.yaml", ws)
    fault_server.script = [action] * (2 if action == ("empty",) else 1)  # max_retries 1: an empty body twice
    with JudgeClient(ws, cfg.scorer, backoff_base=0.001) as c:
        s = c.score(item, "ANSWER: 5")
        assert c.store.cache_size() == 0
    assert s.median is None and s.weight == 0.0 and why in s.samples[0].error
    assert s.errors == [f"sample 0: {s.samples[0].error}"]
    # an empty body is a malformed response: retried (then an error); a reply without a grade is a failed sample
    assert (s.samples[0].status, len(fault_server.requests)) == (("error", 2) if action == ("empty",) else ("failed", 1))
    with JudgeClient(ws, cfg.scorer, backoff_base=0.001) as c:  # not cached: the next call asks again
        assert c.score(item, "ANSWER: 5").ok


def test_probe_names_bad_grades_per_sample(ws, fault_server):
    fault_server.responder = lambda body: "42" if "ANSWER: 1" in body["messages"][-1]["content"] else judges.honest_judge(body)
    r = probe(ws, "--n", "6", "--seed", "4")
    assert r.exit_code == 3
    rep = report(ws)
    assert rep["failed_samples"] >= 1 and any("grade 42 is out of range 0-10" in e for sc in rep["scores"]
                                                 for e in sc["errors"])
    assert "grade 42 is out of range 0-10" in r.output


@pytest.mark.parametrize("text,grade,why", [("7", 0.7, None), ("Grade: 10", 1.0, None), ("3/10", 0.3, None),
                                            ("11", None, "out of range"), ("seven", None, "no number"),
                                            ("  ", None, "empty reply"), (None, None, "empty reply")])
def test_read_grade(text, grade, why):
    g, w = read_grade(text)
    assert g == grade and (why is None and w is None or why in w)


def test_discrimination_verdicts_and_ci():
    rng = np.random.default_rng(0)
    y = np.array([True, False, False] * 20)
    items = np.repeat(np.arange(20), 3)
    good = discrimination(np.where(y, 0.8, 0.2) + rng.normal(0, 0.05, 60), y, items, auc_min=0.8)
    assert good["verdict"] == "ok" and good["auc"] == 1.0 and good["ci"][0] >= 0.8
    const = discrimination(np.full(60, 0.7), y, items, auc_min=0.8)
    assert const["verdict"] == "constant" and const["auc"] == 0.5 and not const["passed"]
    inv = discrimination(np.where(y, 0.2, 0.8) + rng.normal(0, 0.05, 60), y, items, auc_min=0.8)
    assert inv["verdict"] == "inverted" and inv["ci"][1] < 0.5
    rnd = discrimination(rng.random(60), y, items, auc_min=0.8)
    assert rnd["verdict"] in ("chance", "weak") and not rnd["passed"] and rnd["ci"][0] < 0.8
    ungraded = discrimination([None] * 59 + [0.5], y, items, auc_min=0.8)
    assert ungraded["verdict"] == "not measurable" and ungraded["ungraded"] == 59


def test_scorer_gate_reports_not_measurable_discrimination(ws, fault_server):
    fault_server.responder = judges.honest_judge
    assert probe(ws, "--n", "4", "--seed", "6").exit_code == 0
    rep = report(ws)
    rep["discrimination"].update(verdict="not measurable", why="only 1 correct and 0 wrong answers got a grade")
    ws.path("reports/scorer_probe.json").write_text(json.dumps(rep))
    gates = GatesConfig(not_measurable="warn")
    res = scorer_gate.evaluate(GateContext(ws=ws, gates=gates, round="round1",
                                           config=load_train_config("configs/run.yaml", ws)))
    check = next(c for c in res.checks if c.name.startswith("judge discrimination"))
    assert check.status == NOT_MEASURABLE and "only 1 correct" in check.detail
    # the gate judges the CI at the gates config's confidence; a probe measured at another one is refused
    other = GatesConfig(scorer=ScorerGate(auc_confidence=0.9))
    check = scorer_gate.discrimination_check(report(ws), other.scorer)
    assert not check.passed and "re-run the probe" in check.detail


def test_reference_match_grades_by_the_judges_logprobs(ws, fault_server):
    write_config(ws.root, fault_server, method="reference_match", samples=3)
    fault_server.responder = judges.logprob_judge
    r = probe(ws, "--n", "6", "--seed", "8")
    assert r.exit_code == 0, r.output
    rep = report(ws)
    assert rep["method"] == "reference_match" and rep["samples_per_item"] == 1  # deterministic: one request
    assert rep["samples"] == rep["responses"] == 54 and rep["discrimination"]["auc"] == 1.0
    body = fault_server.requests[0]
    assert body["logprobs"] is True and body["temperature"] == 0.0 and judges.forced_text(body).startswith(
        "The answer is ")
    # a grade is exp(mean logprob) of the answer's tokens (the prefix does not count)
    assert read_match({"text": "The answer is 5", "logprobs": [("The answer is ", -3.0), ("5", -0.2)]},
                      "The answer is 5") == (pytest.approx(np.exp(-0.2)), None)
    # an endpoint without logprobs, or one that ignores the grammar, gives a clear failed sample
    assert "has no logprobs" in read_match({"text": "7", "logprobs": None}, "The answer is 5")[1]
    assert "does not follow the grammar" in read_match({"text": "x", "logprobs": [("Seven", -1.0)]},
                                                       "The answer is 5")[1]
    # cached replies are re-read to the same grade
    n = len(fault_server.requests)
    cfg = load_train_config("configs/run.yaml", ws)
    item = {"id": "z", "question": "q?", "answer": "Kelvale", "aliases": []}
    with JudgeClient(ws, cfg.scorer) as c:
        a = c.score(item, "ANSWER: Kelvale")
        b = c.score(item, "ANSWER: Kelvale")
    assert a.median == b.median == pytest.approx(np.exp(-0.1)) and b.provenance == ["cache"]
    assert len(fault_server.requests) == n + 1
