"""The pipeline's stages forked from a warm host (rc1.runtime.stagefork, rc1.cli.stagehost) are the same processes
a cold `python -m` starts: same output files, exit codes, environment, working directory and Ctrl-C behaviour;
and a host that is off or dies costs only the warm start, never a stage."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from rc1.runtime.interrupt import stop_child
from rc1.runtime.stagefork import ENV_SWITCH, StageHost, StageProcess, fork_wanted, spawn_stage
from tests.helpers.cli import REPO

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the stage host forks on Linux only (cold elsewhere)")

PROBE = [sys.executable, "-m", "tests.helpers.stage_probe"]


@pytest.fixture(scope="module")
def host():
    h = StageHost()
    yield h
    h.close()


def _run(host, cmd, env=None, cwd=REPO):
    proc = host.spawn(cmd[2], cmd[3:], {**os.environ, **(env or {})}, str(cwd))
    out = proc.stdout.read()
    return proc.wait(30), out


def _sha(path):
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_forked_stage_writes_what_the_cold_command_writes(host, tmp_path):
    import shutil

    roots = []
    for name in ("cold", "forked"):
        root = tmp_path / name
        for sub in ("configs", "templates"):
            shutil.copytree(REPO / sub, root / sub)
        roots.append(root)
    cmd = [sys.executable, "-m", "rc1.cli.main", "--workdir"]
    argv = ["data", "make-min", "--config", "configs/local.yaml"]
    cold = subprocess.run([*cmd, str(roots[0]), *argv], cwd=REPO, capture_output=True, text=True)
    code, out = _run(host, [*cmd, str(roots[1]), *argv])
    assert cold.returncode == 0 and code == 0, out
    made = sorted(p.relative_to(roots[0]) for p in (roots[0] / "data").rglob("*") if p.is_file())
    assert made and made == sorted(p.relative_to(roots[1]) for p in (roots[1] / "data").rglob("*") if p.is_file())
    assert all(_sha(roots[0] / p) == _sha(roots[1] / p) for p in made)


def test_a_failing_command_exits_as_it_does_cold(host):
    cmd = [sys.executable, "-m", "rc1.cli.main", "no-such-command"]
    cold = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    code, out = _run(host, cmd)
    assert code == cold.returncode == 2
    assert "No such command 'no-such-command'" in out and "python -m rc1.cli.main" in out
    assert _run(host, [*PROBE, "exit", "3"])[0] == 3


def test_a_stage_runs_with_its_own_environment_cwd_and_argv(host, tmp_path):
    """The host started before the variable was set and in another directory: the stage still sees the
    request's environment, directory and argv, as `python -m` would give them."""
    code, out = _run(host, [*PROBE, "a", "b"], env={"RC1_PROBE": "set after the host started"})
    seen = json.loads(out.splitlines()[0])
    assert code == 0
    assert seen == {"probe": "set after the host started", "cwd": str(REPO), "argv": ["a", "b"],
                    "path0": str(REPO), "main": "__main__", "sigint_default": True}


def test_ctrl_c_stops_a_forked_stage_cleanly_through_stop_child(host):
    proc = host.spawn(PROBE[2], ["wait"], dict(os.environ), str(REPO))
    assert isinstance(proc, StageProcess)
    lines = [proc.stdout.readline() for _ in range(2)]
    assert lines[1].strip() == "ready"
    assert stop_child(proc, grace_s=20) == 0
    assert "stopped cleanly" in proc.stdout.read()


def test_an_unhandled_ctrl_c_ends_the_stage_by_the_signal_as_a_cold_process(host):
    proc = host.spawn(PROBE[2], ["raise"], dict(os.environ), str(REPO))
    while proc.stdout.readline().strip() != "ready":
        pass
    proc.send_signal(signal.SIGINT)
    assert proc.wait(20) == -signal.SIGINT
    assert _run(host, [*PROBE, "exit", "0"])[0] == 0  # the host serves the next stage after it


def test_a_dead_host_falls_back_to_a_cold_child():
    h = StageHost()
    stage = h.spawn(PROBE[2], ["wait"], dict(os.environ), str(REPO))
    assert stage.stdout.readline()
    h.proc.kill()
    h.proc.wait()
    assert stage.wait(10) == -signal.SIGKILL  # the stage's fate is unknown once its host is gone: reported as killed
    os.kill(stage.pid, signal.SIGKILL)  # the orphaned probe
    said: list[str] = []
    proc, kept = spawn_stage(h, [*PROBE, "exit", "4"], dict(os.environ), warn=said.append)
    assert kept is None and isinstance(proc, subprocess.Popen) and proc.wait(30) == 4
    assert len(said) == 1 and said[0].startswith("stage host: ") and "starting each stage as a new process" in said[0]


def test_the_host_is_for_runs_of_many_stages_and_the_switch_turns_it_off(monkeypatch, ws):
    from rc1.config.load import load_train_config
    from rc1.pipeline import Pipeline

    cfg = load_train_config("configs/local.yaml", ws)
    assert Pipeline(ws, "configs/local.yaml", cfg)._stage_host() is None  # one stage at a time: no warm process
    monkeypatch.setenv(ENV_SWITCH, "0")
    assert fork_wanted() == (False, f"{ENV_SWITCH}=0")
    assert Pipeline(ws, "configs/local.yaml", cfg, warm_stages=True)._stage_host() is None
    monkeypatch.delenv(ENV_SWITCH)
    assert fork_wanted() == (True, "")


def test_the_pipeline_forks_its_stages_from_one_host(ws):
    from rc1.config.load import load_train_config
    from rc1.pipeline import Pipeline, Stage

    pipe = Pipeline(ws, "configs/local.yaml", load_train_config("configs/local.yaml", ws), echo=lambda _: None,
                    warm_stages=True)
    stage = Stage("data: make-min", ["data", "make-min", "--config", "configs/local.yaml"])
    pipe.run_stage(stage)  # started cold: the host is still importing
    host = pipe._host
    assert host is not None and host.alive() and host.ready(wait=120)
    pipe.run_stage(stage)
    pipe.run_stage(stage)
    assert pipe._host is host
    log = (ws.logs / "pipeline.log").read_text()
    assert log.count("=== ") == 3 and log.count("wrote") >= 3, log[-2000:]
    assert log.count("forked from the stage host") == 2  # the later stages came from the one warm process
    pipe._host.close()
    assert host.proc.returncode is not None


def test_closing_a_host_that_is_still_importing_stops_it_at_once():
    """A run that ends (or a console action that ran one stage) before the host finished its imports does not
    wait for them."""
    h = StageHost()
    assert not h.ready()
    h.close()
    assert h.proc.returncode == -signal.SIGTERM
