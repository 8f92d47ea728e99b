import json
import subprocess

from tests.helpers.cli import rc1_cmd


def run(ws, *args, env=None):
    return subprocess.run([*rc1_cmd(), "--workdir", str(ws.root), *args], capture_output=True, text=True, env=env)


def test_empty_workspace_advance_round1_exits_3_and_stays_idle(tmp_path):
    class W:  # a workspace with nothing in it at all
        root = tmp_path
    proc = run(W, "advance", "--to", "round1")
    assert proc.returncode == 3, proc.stderr
    assert "FAIL" in proc.stdout and "REFUSED" in proc.stderr
    assert "(threshold" in proc.stdout
    st = json.loads(run(W, "status", "--json").stdout)
    assert st["state"] == "idle"
    assert not (tmp_path / "reports" / "preflight").exists()


def test_advance_with_config_prints_measured_values(ws):
    proc = run(ws, "advance", "--to", "round2", "--config", "configs/ppo_scale.yaml")
    assert proc.returncode in (2, 3), proc.stderr  # 2 while a referenced file is missing, else 3
    if proc.returncode == 3:
        assert "steps: 50000 (threshold >= 50000)" in proc.stdout


def test_unknown_state_is_exit_2(ws):
    proc = run(ws, "advance", "--to", "nowhere")
    assert proc.returncode == 2 and "unknown state" in proc.stderr


def test_sync_export_reflects_real_state(ws):
    run(ws, "advance", "--to", "round1")
    proc = run(ws, "sync", "export")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads((ws.reports / "sync" / "SYNC_round1.json").read_text())
    assert doc["from"] == "rc1" and doc["round"] == 1
    assert set(doc) >= {"need_from_gemini", "artifacts_produced", "risks_blockers", "notes"}
    assert doc["risks_blockers"] != ["none"]
    assert all({"name", "path", "desc"} <= set(n) for n in doc["need_from_gemini"])


def test_reset_requires_confirmation(ws):
    assert run(ws, "reset").returncode == 2
    assert run(ws, "reset", "--yes").returncode == 0
