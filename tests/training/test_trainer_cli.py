"""The trainer as the operator runs it: machine-gated `rc1 train`, detached start, SIGTERM stop, resume."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from typer.testing import CliRunner

from rc1.callbacks.logging import REQUIRED_KEYS
from rc1.cli.main import app
from rc1.config.names import REWARD_DIMENSIONS
from rc1.gates.base import Check, GateContext, GateResult
from rc1.machine.service import current_state, open_machine
from rc1.runtime import trainer_proc
from rc1.runtime.checkpoint import read_latest, read_meta, verify_checkpoint
from rc1.runtime.workspace import Workspace
from tests.helpers.workspace import make_workspace

runner = CliRunner()


def passing(gate):
    return [GateResult(gate, [Check("t", 1, ">= 1", True)])]


def to_round2_pass(ws: Workspace, config) -> None:
    m = open_machine(ws, str(config), gate_runner=passing)
    assert m.fire("pass_round1") and m.fire("pass_round2")
    assert current_state(ws) == "round2_pass"


def cli(ws: Workspace, *args):
    return runner.invoke(app, ["--workdir", str(ws.root), *args])


def metrics(ws: Workspace) -> list[dict]:
    return [json.loads(l) for l in ws.metrics_path.read_text().splitlines() if l.strip()]


def test_train_refused_before_round2_pass(tmp_path, tiny_model_dir):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir)
    res = cli(ws, "train", "--config", str(conf))
    assert res.exit_code == 3, res.output
    assert "round2_pass" in res.output and "idle" in res.output
    assert not ws.metrics_path.exists()


def test_a_tampered_round2_ticket_is_refused_with_the_gates_checks(tmp_path, tiny_model_dir):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir)
    to_round2_pass(ws, conf)
    ticket = ws.preflight_dir / "round2_pass.json"
    ticket.write_text(ticket.read_text().replace('"round2_pass"', '"round2_pazz"', 1))
    res = cli(ws, "train", "--config", str(conf))
    assert res.exit_code == 3, res.output
    assert "[FAIL] training_start" in res.output and "round2_pass ticket" in res.output
    assert "error: the training_start gate refused" in res.output
    assert current_state(ws) == "round2_pass" and not ws.metrics_path.exists()


def test_a_launched_rank_runs_the_request_it_was_launched_with():
    from rc1.trainer import TrainRequest

    assert TrainRequest("c.yaml").worker_args() == ["train", "--config", "c.yaml", "--seed-index", "0"]
    assert TrainRequest("c.yaml", resume="latest", resume_fallback=True, max_steps=7, seed_index=2,
                        nproc=2).worker_args() == ["train", "--config", "c.yaml", "--seed-index", "2", "--resume",
                                                  "latest", "--resume-fallback", "--max-steps", "7"]


def test_trl_with_ppo_is_a_config_error(tmp_path, tiny_model_dir):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, engine="trl", strategy="ppo")
    for args in (["config", "verify", "--config", str(conf)], ["train", "--config", str(conf)]):
        res = cli(ws, *args)
        assert res.exit_code == 2, res.output
        assert "PPOTrainer" in res.output and "pure_pt" in res.output


def test_train_stop_resume_twice_end_to_end(tmp_path, tiny_model_dir):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, max_steps=200, save_steps=3)
    to_round2_pass(ws, conf)

    pid = trainer_proc.start_trainer(ws, str(conf))  # detached, like the console does
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if ws.metrics_path.exists() and len(metrics(ws)) >= 4:
            break
        assert trainer_proc.pid_alive(pid), ws.train_log.read_text()[-3000:]
        time.sleep(0.2)
    status = trainer_proc.trainer_status(ws)
    assert status.alive and status.pid == pid and status.step >= 4 and status.heartbeat_age_s < 30
    assert current_state(ws) == "training"
    res = cli(ws, "stop", "--timeout", "60")  # SIGTERM from "another shell"
    assert res.exit_code == 0 and "stopped" in res.output, res.output
    assert not trainer_proc.pid_alive(pid)
    assert not ws.path(trainer_proc.PID_FILE).exists()
    end = json.loads(ws.path("reports/state/training_end.json").read_text())
    assert end["reason"] == "operator"
    latest = read_latest(ws.path("checkpoints/t"))
    verify_checkpoint(latest)
    k = read_meta(latest)["step"]
    assert k == end["step"] == metrics(ws)[-1]["step"]

    # a fresh `rc1 train` now refuses (the run exists); `rc1 resume` continues it, twice
    res = cli(ws, "train", "--config", str(conf))
    assert res.exit_code == 2 and "rc1 resume" in res.output
    res = cli(ws, "resume", "--config", str(conf), "--max-steps", str(k + 2))
    assert res.exit_code == 0, res.output
    res = cli(ws, "resume", "--config", str(conf), "--max-steps", str(k + 4))
    assert res.exit_code == 0, res.output
    steps = [r["step"] for r in metrics(ws)]
    assert steps == list(range(1, k + 5)), steps  # strictly increasing across two resumes, no repeats
    for rec in metrics(ws):
        missing = [f for f in REQUIRED_KEYS + tuple(f"reward/{d}" for d in REWARD_DIMENSIONS) if f not in rec]
        assert not missing, missing
        assert rec["loss"] is not None and rec["lr"] >= 0 and rec["mem_used_mb"] > 0 and rec["sec_per_step"] > 0
    assert ws.path("reports/config_effective.yaml").exists()
    assert ws.path("reports/rc1/versions.json").exists()
    zero = json.loads(ws.path("reports/zero_signal.json").read_text())
    assert {"base_pass_rate", "truncation_rate", "zero_variance_group_frac"} <= set(zero)

    # training -> eval: the run reached the steps the config asks for now (k+4 after --max-steps)
    from rc1.gates.training_done import evaluate
    from rc1.config.load import load_train_config, load_gates_config

    cfg = load_train_config(conf, ws)
    cfg.run.max_steps = k + 4
    result = evaluate(GateContext(ws, load_gates_config(cfg.gates, ws), "training_done", config=cfg))
    drift = [c for c in result.checks if "drift vs bound" in c.name]
    assert [c.passed for c in drift] == [False] and "rc1 drift" in drift[0].detail  # not measured yet
    # the drift bound, measured on the latest checkpoint (8 dev + held-out prompts in this small workspace)
    from tests.helpers.items import arithmetic_items

    ws.path("data/shadow_eval_245.jsonl").write_text("".join(json.dumps(it) + "\n" for it in
                                                             arithmetic_items(8, start=200, prefix="h")))
    gates = load_gates_config(cfg.gates, ws).model_copy(deep=True)
    gates.training_done.drift_prompts, gates.training_done.drift_samples = 8, 2
    from rc1.eval.drift import measure_drift

    _, rep = measure_drift(ws, cfg, 0, n_prompts=8, samples=2, bound=1.5 * 0.03)
    assert rep["checkpoint"]["step"] == k + 4 and rep["tokens"] > 0
    gates.training_done.kl_tolerance = max(1.5, 2 * rep["per_token"]["ci"][1] / 0.03)  # lr 1e-3 on a random model
    result = evaluate(GateContext(ws, gates, "training_done", config=cfg))
    assert result.passed, result.to_dict()
    cfg.run.max_steps = k + 10
    assert not evaluate(GateContext(ws, gates, "training_done", config=cfg)).passed


def test_unhandled_error_is_fatal_with_error_report(tmp_path, tiny_model_dir):
    ws = Workspace(tmp_path)
    broken = tmp_path / "broken_model"
    broken.mkdir()
    (broken / "config.json").write_text('{"model_type": "qwen3", "hidden_size": ')  # truncated JSON
    conf = make_workspace(tmp_path, broken)
    to_round2_pass(ws, conf)
    proc = subprocess.run([sys.executable, "-m", "rc1.cli.main", "--workdir", str(ws.root), "train", "--config",
                           str(conf)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert "FATAL:" in proc.stderr
    reports = list(ws.reports.glob("ERROR_*.json"))
    assert len(reports) == 1 and "traceback" in json.loads(reports[0].read_text())
    assert not ws.path(trainer_proc.PID_FILE).exists()
