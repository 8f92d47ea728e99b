"""The drift bound: exact KL of the trained policy to its reference on fixed prompts, its CI, and the
training_done check that judges it (every branch: under, warning, over, missing, stale, edited, too small)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from tests.helpers.eval import TINY_CONFIG, make_items, write_end_record, write_jsonl, write_trainer_checkpoint


# ----------------------------------------------------------------------------- the statistics
def test_the_per_token_kl_is_tokens_weighted_and_its_ci_is_over_prompts():
    from rc1.eval.drift import bootstrap_ci

    # prompt 0: 10 tokens summing to 1.0; prompt 1: 30 tokens summing to 0.6 -> 1.6 / 40 = 0.04 per token
    # (a mean of the prompts' own per-token means would say (0.1 + 0.02) / 2 = 0.06)
    out = bootstrap_ci([1.0, 0.6], [10, 30], [0.5, 0.3])
    assert out["per_token"]["mean"] == pytest.approx(0.04)
    assert out["per_sequence"]["mean"] == pytest.approx(0.4)
    # identical prompts: no spread, a CI of one point
    same = bootstrap_ci([0.5] * 8, [10] * 8, [0.25] * 8)
    assert same["per_token"]["ci"] == [pytest.approx(0.05), pytest.approx(0.05)]
    # noisy prompts: the CI brackets the point estimate and narrows with more prompts
    import numpy as np

    rng = np.random.default_rng(0)
    kl16, kl256 = rng.lognormal(0, 1, 16), rng.lognormal(0, 1, 256)
    small = bootstrap_ci(kl16, [20] * 16, kl16 / 4)["per_token"]
    large = bootstrap_ci(kl256, [20] * 256, kl256 / 4)["per_token"]
    assert small["ci"][0] < small["mean"] < small["ci"][1]
    assert large["ci"][1] - large["ci"][0] < small["ci"][1] - small["ci"][0]


def test_exact_kl_is_the_categorical_kl_of_the_tempered_distributions(tiny_ws):
    """Checked against torch.distributions' KL of the two models' softmax(logits / T) at each generated
    position, each sequence read whole; answers that share a prompt (one prefill, their KV cache repeated),
    prompts of different lengths in one batch (left-padded) and answers of different lengths included; the
    same in batches of one prompt; 0 for a model against itself."""
    import torch

    from rc1.config.load import load_train_config
    from rc1.eval.drift import exact_kl
    from rc1.eval.loading import load_base, load_checkpoint_model

    ws = tiny_ws
    cfg = load_train_config("configs/tiny.yaml", ws)
    ck = write_trainer_checkpoint(ws, cfg, 3, scale=1.3)
    cpu = torch.device("cpu")
    policy, _ = load_checkpoint_model(cfg, ck, cpu, torch.float32)
    ref, _ = load_base(cfg, cpu, torch.float32)
    samples = [([5, 9, 11, 40, 41, 42], [0, 0, 0, 1, 1, 1]), ([7, 8, 30, 31], [0, 0, 1, 1]),
               ([5, 9, 11, 30, 31], [0, 0, 0, 1, 1]), ([5, 9, 11, 33, 34, 35, 36], [0, 0, 0, 1, 1, 1, 0])]
    got = exact_kl(policy, ref, samples, temperature=0.7, device=cpu)
    assert [len(r) for r in got] == [3, 2, 2, 3]
    for (ids, mask), row in zip(samples, got):
        x = torch.tensor([ids])
        with torch.no_grad():
            lp, lq = (m(input_ids=x).logits[0, :-1].float() / 0.7 for m in (policy, ref))
        want = torch.distributions.kl_divergence(torch.distributions.Categorical(logits=lp),
                                                 torch.distributions.Categorical(logits=lq))
        keep = torch.tensor(mask[1:], dtype=torch.bool)
        assert row == pytest.approx(want[keep].tolist(), rel=1e-4, abs=1e-6)
        assert min(row) > 0
    with pytest.raises(ValueError, match="sample 0: no prompt token"):
        exact_kl(policy, ref, [([5, 40], [0, 1])], temperature=0.7, device=cpu)
    small = exact_kl(policy, ref, samples, temperature=0.7, device=cpu, batch_size=1)
    assert [r == pytest.approx(g, rel=1e-4, abs=1e-6) for r, g in zip(small, got)] == [True] * 4
    # every answer length its own forward from copies of the batch's prompt cache: the same KL
    parted = exact_kl(policy, ref, samples, temperature=0.7, device=cpu, part_overhead=0)
    assert [r == pytest.approx(g, rel=1e-4, abs=1e-6) for r, g in zip(parted, got)] == [True] * 4
    assert exact_kl(ref, ref, samples, temperature=0.7, device=cpu) == [[0.0] * 3, [0.0] * 2, [0.0] * 2, [0.0] * 3]


def test_length_parts_cut_where_padding_costs_more_than_a_forward():
    from rc1.eval.drift import length_parts

    # a make run batch: most answers stop after a few tokens, some are cut at 48
    lengths = [4, 5, 5, 6, 7, 9, 48, 48]
    assert length_parts(lengths, overhead=16) == [(0, 6), (6, 8)]  # 6 x 9 + 2 x 48 + 32 = 182 positions, not 384
    assert length_parts(lengths, overhead=1000) == [(0, 8)]  # a forward dearer than any padding: one part
    assert length_parts([7, 7, 7], overhead=0) == [(0, 3)]
    assert length_parts([], overhead=16) == []


# ----------------------------------------------------------------------------- measured end to end
def _drift_ws(ws, *, prompts: int = 8, samples: int = 2, target_kl: float = 0.05):
    gates = (ws.root / "configs/gates_local.yaml").read_text()
    gates = gates.replace("drift_prompts: 64", f"drift_prompts: {prompts}").replace(
        "drift_samples: 4", f"drift_samples: {samples}")
    (ws.root / "configs/gates_local.yaml").write_text(gates)
    (ws.root / "configs/tiny.yaml").write_text(TINY_CONFIG.format(metric="success") + f"target_kl: {target_kl}\n")
    write_jsonl(ws.path("data/shadow.jsonl"), make_items(9, seed=11))
    write_jsonl(ws.path("data/eval_min.jsonl"), make_items(3, seed=12))
    return ws


def _gate(ws, cfg):
    from rc1.config.load import load_run_gates
    from rc1.gates.base import GateContext
    from rc1.gates.training_done import evaluate

    return evaluate(GateContext(ws, load_run_gates(cfg, ws), "training_done", config=cfg,
                                config_path=ws.path("configs/tiny.yaml")))


def _drift_checks(result):
    return [c for c in result.checks if "drift vs bound" in c.name]


def test_rc1_drift_measures_the_latest_checkpoint_and_the_gate_judges_it(ws):
    """The same weights as the base drift by exactly 0 and pass; weights scaled far from the base drift far
    beyond the bound (its CI's lower bound too) and are refused; a new checkpoint makes the report stale."""
    from rc1.config.load import load_train_config
    from tests.helpers.cli import run_cli as cli

    ws = _drift_ws(ws)
    cfg = load_train_config("configs/tiny.yaml", ws)
    ck = write_trainer_checkpoint(ws, cfg, 10, scale=1.0)
    write_end_record(ws, "reports/state/training_end.json", ck)
    res = cli(ws, "drift", "--config", "configs/tiny.yaml")
    assert res.exit_code == 0, res.output
    rep = json.loads(ws.path("reports/drift/seed_0.json").read_text())
    assert rep["prompts"]["n"] == 8 and rep["samples_per_prompt"] == 2 and rep["tokens"] > 0
    assert rep["per_token"]["mean"] == 0.0 and rep["per_token"]["ci"] == [0.0, 0.0]
    assert "within the bound" in res.output
    (check,) = _drift_checks(_gate(ws, cfg))
    assert check.passed and check.measured == 0.0

    ck = write_trainer_checkpoint(ws, cfg, 20, scale=4.0)  # a new latest: the report above measured step 10
    write_end_record(ws, "reports/state/training_end.json", ck, step=20, max_steps=20)
    (check,) = _drift_checks(_gate(ws, cfg))
    assert not check.passed and "not the current latest" in check.detail and "rc1 drift" in check.detail
    res = cli(ws, "drift", "--config", "configs/tiny.yaml")
    assert res.exit_code == 0 and "ABOVE the bound" in res.output, res.output
    rep = json.loads(ws.path("reports/drift/seed_0.json").read_text())
    assert rep["per_token"]["ci"][0] > 0.075 and rep["checkpoint"]["step"] == 20
    (check,) = _drift_checks(_gate(ws, cfg))
    assert not check.passed and check.measured > 0.075 and "drifted beyond the bound" in check.detail


def test_too_few_drift_prompts_is_a_clear_config_error(ws):
    from rc1.config.load import load_train_config
    from tests.helpers.cli import run_cli as cli

    ws = _drift_ws(ws, prompts=64)
    cfg = load_train_config("configs/tiny.yaml", ws)
    write_trainer_checkpoint(ws, cfg, 10)
    res = cli(ws, "drift", "--config", "configs/tiny.yaml")
    assert res.exit_code == 2 and "drift_prompts 64" in res.output and "12 distinct prompts" in res.output


# ----------------------------------------------------------------------------- the check's branches
def _report(ws, latest, *, mean: float, ci, n: int = 64, k: int = 4, sidecar: bool = True):
    from rc1.runtime.atomic import atomic_write_json
    from rc1.runtime.fingerprint import register_artifact, sha256_file

    rep = {"checkpoint": {"path": ws.rel(latest), "step": 100, "manifest_sha256": sha256_file(latest / "manifest.json")},
           "prompts": {"n": n}, "samples_per_prompt": k, "temperature": 0.7, "tokens": 2000,
           "per_token": {"mean": mean, "ci": ci, "confidence": 0.95, "ci_method": "bootstrap"},
           "per_sequence": {"mean": mean * 20}}
    path = ws.path("reports/drift/seed_0.json")
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, rep)
    if sidecar:
        register_artifact(ws, path, "drift")
    return path


def _check(ws, latest, target=0.05):
    from rc1.config.gates import GatesConfig
    from rc1.gates.base import GateResult
    from rc1.gates.training_done import _drift_check

    res = GateResult("training_done")
    cfg = SimpleNamespace(effective_target_kl=target)
    end = {"kl": {"last_window": 8, "last_window_mean": 0.09, "mean": 0.07, "control": "adaptive"}}
    return _drift_check("seed 0 (1)", ws, cfg, GatesConfig(), 0, latest, end, res, "configs/run.yaml"), res


@pytest.fixture
def latest(ws):
    d = ws.path("checkpoints/t/step_00100")
    d.mkdir(parents=True)
    (d / "manifest.json").write_text('{"files": {}}')
    return d


def test_drift_under_the_bound_passes(ws, latest):
    _report(ws, latest, mean=0.070, ci=[0.055, 0.0749])  # bound 1.5 x 0.05 = 0.075: just under
    check, res = _check(ws, latest)
    assert check.passed and check.measured == 0.055 and "WARNING" not in check.detail
    assert "training stream (k3, not judged)" in check.detail and not res.notes


def test_drift_point_above_the_bound_with_the_ci_under_it_warns_and_passes(ws, latest):
    _report(ws, latest, mean=0.0760, ci=[0.0740, 0.079])
    check, res = _check(ws, latest)
    assert check.passed and check.detail.startswith("WARNING") and "WARNING" in res.notes[0]


def test_drift_whose_ci_lower_bound_is_above_the_bound_is_refused(ws, latest):
    _report(ws, latest, mean=0.080, ci=[0.0751, 0.085])  # just over
    check, _ = _check(ws, latest)
    assert not check.passed and check.status == "fail" and check.measured == 0.0751


def test_a_missing_edited_or_too_small_drift_report_is_refused(ws, latest):
    check, _ = _check(ws, latest)
    assert not check.passed and "no drift measurement" in check.detail and "rc1 drift --config configs/run.yaml" in check.detail
    path = _report(ws, latest, mean=0.01, ci=[0.0, 0.02])
    path.write_text(path.read_text().replace('"mean": 0.01', '"mean": 0.001'))  # edited after it was written
    check, _ = _check(ws, latest)
    assert not check.passed and "sidecar" in check.detail
    _report(ws, latest, mean=0.01, ci=[0.0, 0.02], sidecar=False)
    (path.parent / (path.name + ".sha256")).unlink()
    check, _ = _check(ws, latest)
    assert not check.passed and "sidecar" in check.detail
    _report(ws, latest, mean=0.01, ci=[0.0, 0.02], n=16)
    check, _ = _check(ws, latest)
    assert not check.passed and "16 prompts" in check.detail and "asks for 64" in check.detail


def test_drift_without_a_ci_is_not_measurable_and_without_target_not_applicable(ws, latest):
    _report(ws, latest, mean=0.01, ci=None)
    check, _ = _check(ws, latest)
    assert check.status == "not measurable" and not check.passed
    check, _ = _check(ws, latest, target=None)
    assert check.status == "not applicable" and check.passed


# ----------------------------------------------------------------------------- divergence alerts
def test_a_divergence_alert_refuses_unless_the_operator_accepts_this_run(ws):
    from rc1.config.load import load_train_config
    from rc1.gates.training_done import _divergence_check
    from rc1.runtime.atomic import atomic_write_json
    from tests.helpers.cli import run_cli as cli

    ws = _drift_ws(ws)
    cfg = load_train_config("configs/tiny.yaml", ws)
    sr = cfg.seed_run(0)
    alert = {"step": 40, "kind": "reward_success_divergence", "message": "reward rose 0.3 -> 0.5 while success did not"}
    end = {"reason": "completed", "step": 50, "alerts": [alert]}
    atomic_write_json(ws.path(sr.end_file), end)
    check = _divergence_check("seed 0 (1)", ws, sr, end)
    assert not check.passed and check.measured == 1 and "--accept-divergence" in check.detail
    # a KL alert is logged, not a hacking signal: it does not refuse
    ok = _divergence_check("seed 0 (1)", ws, sr, {"alerts": [{"kind": "kl_above_bound", "step": 3}]})
    assert ok.passed and ok.measured == 0

    atomic_write_json(ws.path(sr.end_file), {**end, "alerts": [{"kind": "kl_above_bound", "step": 3}]})
    res = cli(ws, "advance", "--to", "eval", "--config", "configs/tiny.yaml", "--accept-divergence", "checked")
    assert res.exit_code == 2 and "nothing to accept" in res.output  # a KL alert is not one to accept
    atomic_write_json(ws.path(sr.end_file), end)
    res = cli(ws, "advance", "--to", "round1", "--config", "configs/tiny.yaml", "--accept-divergence", "checked")
    assert res.exit_code == 2 and "training_done gate" in res.output
    res = cli(ws, "advance", "--to", "eval", "--config", "configs/tiny.yaml", "--accept-divergence", "  ")
    assert res.exit_code == 2 and "needs a reason" in res.output
    res = cli(ws, "advance", "--to", "eval", "--config", "configs/tiny.yaml", "--accept-divergence",
              "success rose on the dev eval; the alert window saw only shaping")
    assert "accepted 1 divergence alert(s)" in res.output, res.output
    check = _divergence_check("seed 0 (1)", ws, sr, end)
    assert check.passed and "accepted by" in check.detail
    # a later run writes a new end record: the acceptance does not carry over
    atomic_write_json(ws.path(sr.end_file), {**end, "step": 60})
    assert not _divergence_check("seed 0 (1)", ws, sr, {**end, "step": 60}).passed


def test_the_report_shows_the_drift_of_the_checkpoint_it_evaluated_only(ws, latest):
    from rc1.report.build import _drift_lines
    from rc1.runtime.fingerprint import sha256_file

    _report(ws, latest, mean=0.049, ci=[0.041, 0.061])
    run = {"seed_index": 0, "checkpoint": {"manifest_sha256": sha256_file(latest / "manifest.json")}}
    (line, _) = _drift_lines(ws, [run])
    assert "per-token KL 0.0490 nats, 95% CI [0.0410, 0.0610]" in line and "64 prompts x 4 answers" in line
    assert _drift_lines(ws, [{**run, "checkpoint": {"manifest_sha256": "another"}}]) == []


def test_each_seed_run_of_a_multi_seed_config_is_measured_on_the_same_prompts(ws):
    """A config with several seeds: seed i's latest checkpoint, sampled with seed i, on the prompts every seed
    gets (the config as written: its run.seed is seeds[0])."""
    from rc1.config.load import load_train_config
    from rc1.eval.drift import measure_drift

    ws = _drift_ws(ws)
    conf = ws.root / "configs/tiny.yaml"
    conf.write_text(conf.read_text() + "seeds: [1, 11]\n")
    cfg = load_train_config("configs/tiny.yaml", ws)
    for i in (0, 1):
        write_trainer_checkpoint(ws, cfg, 4, scale=1.0 + i, run_dir=cfg.seed_run(i).checkpoint_dir)
    reps = [measure_drift(ws, cfg, i, n_prompts=8, samples=1, bound=0.15)[1] for i in (0, 1)]
    assert [r["seed"] for r in reps] == [1, 11] and reps[0]["prompts"]["ids_sha256"] == reps[1]["prompts"]["ids_sha256"]
    assert reps[0]["per_token"]["mean"] == 0.0 < reps[1]["per_token"]["mean"]
    assert reps[1]["checkpoint"]["path"].startswith(cfg.seed_run(1).checkpoint_dir)
