"""Data-parallel training without starting ranks: the `distributed:` config section, what this machine can
run (refused at `config verify` / launch with one clear line, exit 2), the launch plan and its dry run, the
merge of the ranks' records and the root cause of a failed run. The runs themselves are in
test_distributed_runs.py."""

from __future__ import annotations

import socket

import pytest
import yaml
from typer.testing import CliRunner

from rc1.cli.main import app
from rc1.config.load import load_train_config
from rc1.runtime.errors import ConfigError
from rc1.runtime.workspace import Workspace
from rc1.runtime import distributed as D
from rc1.training import launcher
from rc1.training.sampler import PrioritySampler
from tests.helpers.workspace import arithmetic_items, make_workspace

runner = CliRunner()


def cli(ws: Workspace, *args):
    return runner.invoke(app, ["--workdir", str(ws.root), *map(str, args)])


def _cfg(tmp_path, tiny_model_dir, **extra):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, grad_accum=4, max_steps=8, extra=extra)
    return ws, conf, load_train_config(conf, ws)


@pytest.mark.parametrize("extra,expected", [
    ({"distributed.processes": 3}, "distributed.processes: 3 processes must divide run.gradient_accumulation (4)"),
    ({"distributed.processes": 2, "run.max_steps": 6},
     "run.max_steps (6) must be a multiple of run.gradient_accumulation (4)"),
    ({"distributed.mixed_precision": "bf16", "run.mixed_precision": "fp16"},
     "distributed.mixed_precision (bf16) disagrees with run.mixed_precision (fp16)"),
    ({"distributed.sharding": "fsdp2", "engine.name": "trl", "monitor.kl_control": "early_stop"},
     "distributed.sharding: fsdp2 is not wired to the trl engine"),
    ({"distributed.sharding": "zero3"}, "distributed.sharding: Input should be"),
    ({"distributed.backend": "mpi"}, "distributed.backend: Input should be"),
    ({"distributed.timeout_s": 0}, "distributed.timeout_s: Input should be greater than 0"),
])
def test_config_verify_reports_distributed_errors_by_dotted_path(tmp_path, tiny_model_dir, extra, expected):
    ws = Workspace(tmp_path)
    conf = make_workspace(tmp_path, tiny_model_dir, grad_accum=4, max_steps=8, extra=extra)
    res = cli(ws, "config", "verify", "--config", conf)
    assert res.exit_code == 2, res.output
    assert expected in res.output


def test_config_verify_refuses_deepspeed_where_it_is_not_installed(tmp_path, tiny_model_dir, monkeypatch):
    monkeypatch.setattr(D, "deepspeed_installed", lambda: False)
    ws = Workspace(tmp_path)
    # loss_type sequence: a token-mean loss over an accumulation window is refused under DeepSpeed for its own reason
    conf = make_workspace(tmp_path, tiny_model_dir, grad_accum=2, max_steps=8,
                          extra={"distributed.sharding": "deepspeed_zero3", "strategy.loss_type": "sequence"})
    res = cli(ws, "config", "verify", "--config", conf)
    assert res.exit_code == 2, res.output
    assert "distributed.sharding: deepspeed_zero3 needs DeepSpeed, which is not installed" in res.output
    res = cli(ws, "train", "--config", conf, "--nproc", "2", "--dry-run")  # and before any launch
    assert res.exit_code == 2 and "needs DeepSpeed" in res.output


def test_fsdp2_on_a_cpu_is_refused_not_silently_run_as_ddp(tmp_path, tiny_model_dir):
    ws, conf, cfg = _cfg(tmp_path, tiny_model_dir, **{"distributed.sharding": "fsdp2"})
    assert any("fsdp2 runs on CUDA only" in e and "fall back to DDP" in e for e in D.machine_errors(cfg, 2))
    assert cli(ws, "config", "verify", "--config", conf).exit_code == 2


def test_more_processes_than_cores_a_busy_port_or_nccl_without_gpus_is_one_line_and_exit_2(tmp_path, tiny_model_dir):
    ws, conf, cfg = _cfg(tmp_path, tiny_model_dir)
    too_many = 4 * D.usable_cpus()
    res = cli(ws, "train", "--config", conf, "--nproc", too_many)
    assert res.exit_code == 2
    assert f"--nproc: {too_many} processes exceed the {D.usable_cpus()} CPU cores" in res.output
    assert "Traceback" not in res.output

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        conf2 = make_workspace(tmp_path, tiny_model_dir, grad_accum=2, max_steps=8,
                               extra={"distributed.main_port": port})
        res = cli(ws, "train", "--config", conf2, "--nproc", "2")
    assert res.exit_code == 2 and f"port {port} is in use" in res.output

    conf3 = make_workspace(tmp_path, tiny_model_dir, grad_accum=2, max_steps=8, extra={"distributed.backend": "nccl"})
    res = cli(ws, "train", "--config", conf3, "--nproc", "2")
    assert res.exit_code == 2 and "distributed.backend: nccl is not available here" in res.output
    assert not ws.metrics_path.exists()  # nothing started


def test_a_multi_node_accelerate_config_is_checked_without_launching(tmp_path, tiny_model_dir):
    ws, conf, cfg = _cfg(tmp_path, tiny_model_dir)
    good = {"compute_environment": "LOCAL_MACHINE", "distributed_type": "MULTI_GPU", "num_machines": 2,
            "machine_rank": 1, "num_processes": 4, "main_process_ip": "127.0.0.1", "main_process_port": 29555,
            "mixed_precision": "no", "use_cpu": False, "rdzv_backend": "static", "same_network": True}
    (tmp_path / "configs/multinode.yaml").write_text(yaml.safe_dump(good))
    res = cli(ws, "train", "--config", conf, "--accelerate-config", "configs/multinode.yaml", "--dry-run")
    assert res.exit_code == 0, res.output
    assert "world size 4: 2 machine(s) x 2 process(es); this machine is machine_rank 1 (ranks 2..3)" in res.output
    assert "each rank accumulates 1 micro-step(s)" in res.output and "nothing started" in res.output

    bad = {**good, "machine_rank": 2, "main_process_ip": None, "distributed_type": "DEEPSPEED", "num_processes": 6}
    (tmp_path / "configs/bad.yaml").write_text(yaml.safe_dump(bad))
    res = cli(ws, "train", "--config", conf, "--accelerate-config", "configs/bad.yaml", "--dry-run")
    assert res.exit_code == 2
    for expected in ("machine_rank: 2 is not below num_machines (2)",
                     "main_process_ip: a multi-node run needs the address of machine_rank 0",
                     "distributed_type: DEEPSPEED in configs/bad.yaml disagrees with distributed.sharding none",
                     "num_processes: 6 processes must divide run.gradient_accumulation (4)"):
        assert expected in res.output, res.output
    assert not ws.metrics_path.exists()


def test_the_plan_for_nproc_two_on_this_cpu(tmp_path, tiny_model_dir):
    _, _, cfg = _cfg(tmp_path, tiny_model_dir)
    p = launcher.plan(cfg, processes=2)
    assert (p.world_size, p.processes, p.device, p.backend, p.accumulation) == (2, 2, "cpu", "gloo", 2)
    own = launcher.own_accelerate_config(p)
    assert own["num_processes"] == 2 and own["mixed_precision"] == "no"  # the engine does its own autocast
    with pytest.raises(ConfigError) as err:
        launcher.plan(cfg, processes=3)
    assert "--nproc: 3 processes must divide run.gradient_accumulation (4)" in err.value.lines[0]


def test_resume_on_a_world_size_that_would_change_the_optimizer_step_is_refused(tmp_path, tiny_model_dir):
    ws, conf, _ = _cfg(tmp_path, tiny_model_dir)
    res = cli(ws, "resume", "--config", conf, "--nproc", "3")
    assert res.exit_code == 2
    assert "--nproc: 3 processes must divide run.gradient_accumulation (4)" in res.output
    assert "would not train the same" in res.output


def test_merged_metrics_hold_global_figures():
    r0 = {"step": 4, "loss": 0.5, "reward": 0.2, "kl": None, "lr": 1e-3, "grad_norm": 0.7, "optimizer_updates": 2,
          "completion_tokens": 30.0, "sec_per_step": 1.0, "mem_used_mb": 100.0, "checkpoint": "checkpoints/t/step_00004"}
    r1 = {**r0, "loss": 0.25, "reward": 0.6, "kl": 0.01, "completion_tokens": 10.0, "sec_per_step": 2.0,
          "mem_used_mb": 90.0}
    m = D.merge_records([r0, r1])
    assert m["step"] == 4 and m["lr"] == 1e-3 and m["optimizer_updates"] == 2 and m["grad_norm"] == 0.7
    assert m["loss"] == 0.375 and m["reward"] == pytest.approx(0.4)
    assert m["kl"] == 0.01                      # only rank 1 measured one
    assert m["completion_tokens"] == 40.0       # counts add up
    assert m["sec_per_step"] == 2.0 and m["mem_used_mb"] == 100.0  # the slowest / largest rank
    assert m["checkpoint"] == "checkpoints/t/step_00004"
    assert D.merge_records([r0]) == r0


def test_the_root_cause_is_the_killed_rank_not_the_one_that_lost_it():
    lost = {"rank": 0, "signal": None, "time": 100, "exitcode": 1, "traceback": "...work.wait()\nRuntimeError: x",
            "message": "RuntimeError: [gloo/transport/tcp/pair.cc:537] Read error: Connection reset by peer"}
    killed = {"rank": 1, "signal": "SIGKILL", "time": 101, "exitcode": -9, "traceback": "", "message": "killed"}
    crashed = {"rank": 1, "signal": None, "time": 100, "exitcode": 1, "traceback": "File rollout.py\nTypeError: y",
               "message": "TypeError: y"}
    shut_down = {"rank": 0, "signal": "SIGTERM", "time": 99, "exitcode": -15, "traceback": "", "message": "killed"}
    assert launcher.root_cause([lost, killed])["rank"] == 1
    assert launcher.root_cause([shut_down, killed])["rank"] == 1  # the agent's SIGTERM is not the cause
    assert launcher.root_cause([lost, crashed])["message"] == "TypeError: y"
    assert launcher.root_cause([lost])["rank"] == 0
    # a refusal on both ranks: rank 0 was shut down while it exited (a crash's exit code, earlier timestamp),
    # rank 1 exited 2; the run is refused (exit 2), not a crash (seen once in CI: exit 1 and an error report)
    mid_exit = {"rank": 0, "signal": None, "time": 99, "exitcode": 1, "message": "CheckpointError: inside a window",
                "traceback": "File checkpoint.py\nCheckpointError: inside a window"}
    refused = {"rank": 1, "signal": None, "time": 100, "exitcode": 2, "message": "CheckpointError: inside a window",
               "traceback": "File checkpoint.py\nCheckpointError: inside a window"}
    assert launcher.root_cause([mid_exit, refused])["rank"] == 1
    assert launcher.root_cause([refused, killed])["signal"] == "SIGKILL"  # a kill from outside still comes first
    shut_mid_exit = {**mid_exit, "signal": "SIGTERM", "exitcode": -15}
    assert launcher.root_cause([shut_mid_exit, refused])["exitcode"] == 2


def test_a_seeded_redraw_does_not_move_the_samplers_stream():
    items = arithmetic_items(12)
    a, b = (PrioritySampler([], items, {"easy": 0.2, "medium": 0.4, "hard": 0.4}, 0.3, [(0, 0.5)], seed=3)
            for _ in range(2))
    a.next_batch(0, 2)
    b.next_batch(0, 2)
    redraw = b.next_batch(0, 1, seed=99)
    assert redraw == PrioritySampler([], items, {"easy": 0.2, "medium": 0.4, "hard": 0.4}, 0.3, [(0, 0.5)],
                                     seed=3).next_batch(0, 1, seed=99)  # a function of the seed alone
    assert a.state_dict() == b.state_dict()
    assert a.next_batch(1, 4) == b.next_batch(1, 4)


def test_trainer_status_and_the_console_show_every_rank(tmp_path):
    import json
    import os
    import time

    from rc1.console.screens.training import trainer_text
    from rc1.runtime import trainer_proc

    ws = Workspace(tmp_path)
    ws.path("reports/state").mkdir(parents=True)
    dead = 2**22 + 17  # no such process
    trainer_proc.write_pid_file(ws, config="configs/run.yaml", argv=[], run_dir="checkpoints/t", world_size=2,
                                ranks=[{"rank": 0, "pid": os.getpid(), "host": socket.gethostname()},
                                       {"rank": 1, "pid": dead, "host": socket.gethostname()}])
    now = time.time()
    ws.metrics_path.write_text(json.dumps({"step": 8, "heartbeat": now, "world_size": 2, "ranks": [
        {"rank": 0, "heartbeat": now - 1}, {"rank": 1, "heartbeat": now - 300}]}) + "\n")
    st = trainer_proc.trainer_status(ws)
    assert [(r.rank, r.alive) for r in st.ranks] == [(0, True), (1, False)]
    assert 0 < st.ranks[0].heartbeat_age_s < 60 and st.ranks[1].heartbeat_age_s >= 300

    class Msg:
        status, unavailable, error_report, max_steps = st, None, None, 16

    text = trainer_text(Msg(), None).plain
    assert "2 ranks:" in text and f"0 ● pid {os.getpid()}" in text and f"1 ✘ pid {dead}" in text and "5m" in text


def test_the_shipped_multi_node_example_is_a_two_machine_accelerate_config():
    from tests.helpers.configs import REPO

    acc, problems = launcher._read_accelerate_config(REPO / "configs/accelerate/multinode.yaml")
    assert not problems
    assert (acc.num_machines, acc.machine_rank, acc.num_processes % acc.num_machines) == (2, 0, 0)
    assert acc.main_process_ip and acc.main_process_port and str(acc.distributed_type).endswith("MULTI_GPU")
