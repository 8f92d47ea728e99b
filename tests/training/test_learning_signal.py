"""The learning-signal gate: the base policy is rolled out on the training pool as training will roll it
out, and round 2 refuses a run that cannot learn (pass rate 0, answers cut off, no correctness signal),
naming the check and the fix; a report made for another config is refused too."""

from __future__ import annotations

import json

from rc1.config.load import load_gates_config, load_train_config
from rc1.gates import learning_signal as gate
from rc1.gates.base import GateContext
from rc1.runtime.fingerprint import register_artifact
from rc1.runtime.workspace import Workspace
from rc1.training.learning_signal import REPORT, measure, signal_identity
from tests.helpers.workspace import make_workspace


def _ctx(ws, conf):
    cfg = load_train_config(conf, ws)
    return GateContext(ws, load_gates_config(cfg.gates, ws), "round2", config=cfg, config_path=conf), cfg


def test_two_new_tokens_are_refused_before_training_naming_the_learning_signal(tmp_path, tiny_model_dir):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, extra={"model.max_new_tokens": 2})
    ctx, cfg = _ctx(ws, conf)
    rep = measure(ws, cfg, prompts=4)
    assert rep["truncation_rate"] == 1.0 and rep["pass_rate"] == 0.0 and rep["episodes"] == 4 * 3
    res = gate.evaluate(ctx)
    assert not res.passed and res.gate == "learning_signal"
    failing = {c.name: c for c in res.failing}
    assert {"base pass rate", "truncation rate"} <= set(failing)
    assert "raise model.max_new_tokens (now 2)" in failing["truncation rate"].detail
    assert "easier items" in failing["base pass rate"].detail


def _write(ws, cfg, **numbers):
    ident, settings = signal_identity(ws, cfg)
    doc = {"identity": ident, "settings": settings, "prompts": 32, "group_size": 4, "episodes": 128,
           "pass_rate": 0.2, "pass_at_k": 0.5, "truncation_rate": 0.1, "zero_variance_group_frac": 0.1,
           "no_success_signal_group_frac": 0.5, **numbers}
    ws.path(REPORT).parent.mkdir(parents=True, exist_ok=True)
    ws.path(REPORT).write_text(json.dumps(doc))
    register_artifact(ws, REPORT, "learning_signal")


def test_a_run_with_signal_passes_and_each_threshold_can_refuse(tmp_path, tiny_model_dir):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir)
    ctx, cfg = _ctx(ws, conf)
    _write(ws, cfg)
    assert gate.evaluate(ctx).passed
    for bad in ({"pass_rate": 0.0}, {"pass_at_k": 0.05}, {"truncation_rate": 0.9},
                {"no_success_signal_group_frac": 1.0}, {"prompts": 2}):
        _write(ws, cfg, **bad)
        assert not gate.evaluate(ctx).passed, bad


def test_a_report_for_another_config_or_edited_is_refused(tmp_path, tiny_model_dir):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir)
    ctx, cfg = _ctx(ws, conf)
    _write(ws, cfg)
    conf2 = make_workspace(tmp_path, tiny_model_dir, extra={"model.temperature": 0.5})
    ctx2, _ = _ctx(ws, conf2)
    res = gate.evaluate(ctx2)
    assert not res.passed and "temperature" in res.failing[0].detail
    doc = json.loads(ws.path(REPORT).read_text())
    doc["pass_rate"] = 0.9
    ws.path(REPORT).write_text(json.dumps(doc))  # edited after it was written
    assert not gate.evaluate(ctx).passed
    ws.path(REPORT).unlink()
    assert "rc1 learning-signal" in gate.evaluate(ctx).failing[0].detail


def test_a_run_with_too_few_informative_groups_over_its_life_is_refused(tmp_path, tiny_model_dir):
    """steps x prompts x the Wilson lower bound of the informative share: 2 informative groups of 32 measured,
    over a 4-step run of 2 prompts, expect well under one informative group; a 400-step run expects enough."""
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir)
    ctx, cfg = _ctx(ws, conf)
    _write(ws, cfg, no_success_signal_group_frac=30 / 32)
    check = next(c for c in gate.evaluate(ctx).checks if c.name == "expected informative groups over the run")
    assert not check.passed and check.measured < 1 and "2/32 measured groups informative" in check.detail
    conf = make_workspace(tmp_path, tiny_model_dir, max_steps=400)
    ctx, cfg = _ctx(ws, conf)
    _write(ws, cfg, no_success_signal_group_frac=30 / 32)
    check = next(c for c in gate.evaluate(ctx).checks if c.name == "expected informative groups over the run")
    assert check.passed and check.measured == round(800 * check_lower(2, 32), 1)


def check_lower(k, n):
    from rc1.training.fit import wilson

    return wilson(k, n)[0]


def test_a_sample_that_straddles_the_informative_threshold_is_measured_again_and_pooled(tmp_path, tiny_model_dir):
    """The random tiny model solves nothing: 0 of 4 groups informative, Wilson share [0, 0.49], x 8 planned groups
    = [0, 3.9]. Against a threshold of 1 that straddles: more prompts are measured, up to MAX_ROUNDS rounds, and
    the report pools them; against 100 it clearly fails after the first round (no sampling spent)."""
    from rc1.training.learning_signal import MAX_ROUNDS

    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir)
    ctx, cfg = _ctx(ws, conf)
    rep = measure(ws, cfg, prompts=4, informative_min=1)
    assert rep["rounds"] == MAX_ROUNDS and rep["prompts"] == 4 * MAX_ROUNDS and rep["episodes"] == 12 * 3
    check = next(c for c in gate.evaluate(ctx).checks if c.name == "expected informative groups over the run")
    assert f"0/{4 * MAX_ROUNDS} measured groups" in check.detail and f"{MAX_ROUNDS} rounds" in check.detail
    rep = measure(ws, cfg, prompts=4, informative_min=100)
    assert rep["rounds"] == 1 and rep["prompts"] == 4
