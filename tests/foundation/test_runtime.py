import json
import subprocess
import sys
import tarfile

import pytest
import typer
from typer.testing import CliRunner

from rc1.cli.common import Rc1Group
from rc1.runtime.atomic import atomic_output, atomic_write_json
from rc1.runtime.failpack import make_failpack
from rc1.runtime.fingerprint import Evidence, register_artifact, verify_artifact
from rc1.runtime.logs import setup_logging
from rc1.runtime.metrics import MetricsTail, MetricsWriter, last_metrics
from rc1.runtime.secrets import redact
from tests.helpers.cli import rc1_cmd

SECRET = "sk-SECRETabcdef0123456789XYZ"


def test_failpack_redacts_keys_from_the_environment(ws, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("MY_SERVICE_TOKEN", "tok-not-shaped-like-a-key-123")
    (ws.logs).mkdir(parents=True, exist_ok=True)
    (ws.logs / "train.log").write_text(f"calling with key {SECRET} and tok-not-shaped-like-a-key-123\n")
    (ws.reports).mkdir(parents=True, exist_ok=True)
    atomic_write_json(ws.reports / "x.json", {"auth": f"Bearer {SECRET}"})
    out = make_failpack(ws)
    assert out.name.startswith("FAIL_") and out.suffix == ".tgz"
    with tarfile.open(out) as tar:
        names = tar.getnames()
        blob = b"".join(tar.extractfile(m).read() for m in tar.getmembers() if m.isfile())
    assert "logs/train.log" in names and "reports/x.json" in names and any(n.startswith("configs/") for n in names)
    assert SECRET.encode() not in blob
    assert b"tok-not-shaped-like-a-key-123" not in blob
    assert b"REDACTED" in blob


def test_failpack_cli_subprocess_never_contains_the_key(ws):
    env = {**__import__("os").environ, "OPENAI_API_KEY": SECRET}
    (ws.logs).mkdir(parents=True, exist_ok=True)
    (ws.logs / "train.log").write_text(f"leaked {SECRET}\n")
    proc = subprocess.run([*rc1_cmd(), "--workdir", str(ws.root), "failpack"], capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr
    packs = list(ws.reports.glob("FAIL_*.tgz"))
    assert len(packs) == 1
    import gzip
    assert SECRET.encode() not in gzip.decompress(packs[0].read_bytes())


def test_redact_patterns():
    assert SECRET not in redact(f"x {SECRET} y", environ={})
    assert "AIza" not in redact("key=AIzaSyA-1234567890abcdefghijklmnop", environ={})


def test_injected_exception_gives_fatal_and_error_json(ws, monkeypatch):
    app = typer.Typer(cls=Rc1Group)

    @app.command()
    def boom():
        raise RuntimeError("injected failure")

    @app.command()
    def other():
        pass

    monkeypatch.setenv("RC1_WORKDIR", str(ws.root))
    setup_logging(ws, console=False)
    import logging
    logging.getLogger("rc1.test").info("a line before the crash")
    res = CliRunner().invoke(app, ["boom"])
    assert res.exit_code == 1
    assert "FATAL: injected failure" in res.output
    reports = list(ws.reports.glob("ERROR_*.json"))
    assert len(reports) == 1
    doc = json.loads(reports[0].read_text())
    assert "RuntimeError: injected failure" in doc["traceback"]
    assert any("a line before the crash" in l for l in doc["log_tail"])


def test_atomic_output_leaves_the_old_file_on_failure(tmp_path):
    p = tmp_path / "pool.jsonl"
    p.write_text("old\n")
    with pytest.raises(RuntimeError):
        with atomic_output(p) as fh:
            fh.write("half of a new fi")
            raise RuntimeError("killed")
    assert p.read_text() == "old\n"
    assert list(tmp_path.iterdir()) == [p]


def test_artifact_fingerprints(ws):
    f = ws.data / "a.jsonl"
    f.parent.mkdir(parents=True)
    f.write_text("1\n")
    ev = register_artifact(ws, f, "test")
    assert ev.path == "data/a.jsonl" and verify_artifact(ws, f)
    assert (ws.data / "a.jsonl.sha256").read_text().split()[1] == "a.jsonl"
    f.write_text("2\n")
    assert not verify_artifact(ws, f)
    assert "changed" in Evidence("data/a.jsonl", ev.sha256).changed(ws)


def test_metrics_tail_skips_and_counts_corrupt_and_partial_lines(tmp_path):
    p = tmp_path / "metrics.jsonl"
    w = MetricsWriter(p)
    w.write({"step": 1, "loss": 1.0})
    with open(p, "a") as fh:
        fh.write("{not json}\n")
        fh.write('{"step": 2, "lo')  # partially written
    tail = MetricsTail(p)
    recs = tail.poll()
    assert [r["step"] for r in recs] == [1] and tail.bad_lines == 1
    with open(p, "a") as fh:
        fh.write('ss": 0.5}\n')
    assert [r["step"] for r in tail.poll()] == [2]
    assert [r["step"] for r in last_metrics(p, 5)] == [1, 2]


CORE = ["rc1.machine.service", "rc1.machine.status", "rc1.machine.sync", "rc1.gates.registry",
        "rc1.gates.run_config", "rc1.gates.resources", "rc1.gates.training_start", "rc1.runtime.failpack",
        "rc1.runtime.device", "rc1.runtime.metrics", "rc1.config.load"]
CORE_PACKAGES = ["machine", "state", "gates", "data", "rewards", "envs", "runtime", "models", "engines", "strategies",
                 "callbacks", "eval", "config"]


def _core_modules():
    import pkgutil
    from pathlib import Path
    import rc1
    root = Path(rc1.__file__).parent
    mods = set(CORE)
    for pkg in CORE_PACKAGES:
        for info in pkgutil.iter_modules([str(root / pkg)]):
            mods.add(f"rc1.{pkg}.{info.name}")
    return sorted(mods)


def test_core_imports_neither_textual_nor_typer():
    mods = _core_modules()
    code = ("import importlib, sys, json\n"
            f"mods = {mods!r}\n"
            "bad = {}\n"
            "for m in mods:\n"
            "    importlib.import_module(m)\n"
            "    hit = [x for x in ('textual', 'typer') if x in sys.modules]\n"
            "    if hit: bad[m] = hit; break\n"
            "print(json.dumps(bad))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {}
