"""Checkpoint integrity: atomic writes, SIGKILL mid-write, corrupt/mismatched refusal, fallback, listing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rc1.runtime import checkpoint as ckpt
from rc1.runtime.workspace import Workspace


def _save(ws, step, payload=b"x" * 100, config_hash="h1", config=None):
    def write(p: Path):
        p.write_bytes(payload)
    return ckpt.write_checkpoint(ws, "checkpoints/r", step, {"blob.bin": write},
                                 {ckpt.META_CONFIG_HASH: config_hash, ckpt.META_CONFIG: config or {"a": 1}},
                                 keep_last=3)


def test_write_verify_latest_manifest_and_prune(tmp_path):
    ws = Workspace(tmp_path)
    for s in (1, 2, 3, 4):
        path = _save(ws, s)
    root = ws.path("checkpoints/r")
    assert ckpt.read_latest(root) == path and path.name == "step_00004"
    assert (root / "latest").is_symlink()
    man = ckpt.verify_checkpoint(path)
    assert set(man["files"]) == {"blob.bin", "meta.json"}
    assert [s for s, _ in ckpt.step_dirs(root)] == [2, 3, 4]  # keep_last=3
    log = [json.loads(l) for l in ws.path(ckpt.CKPT_MANIFEST_LOG).read_text().splitlines()]
    assert [e["step"] for e in log] == [1, 2, 3, 4] and all(len(e["manifest_sha256"]) == 64 for e in log)
    (root / "best").mkdir()
    _save(ws, 5)
    assert (root / "best").is_dir()  # pruning never touches best/
    infos = ckpt.list_checkpoints(ws, "checkpoints/r")
    assert [(i.step, i.is_latest, i.is_best) for i in infos if not i.is_best] == [(3, False, False), (4, False, False),
                                                                                   (5, True, False)]
    assert all(i.verified for i in infos if not i.is_best)
    # best/ holds append-only step copies (and an index), listed one by one and verified
    import shutil

    shutil.copytree(root / "step_00004", root / "best" / "step_00004")
    (root / "best" / "index.jsonl").write_text("{}\n")
    best = [i for i in ckpt.list_checkpoints(ws, "checkpoints/r") if i.is_best]
    assert [(i.path, i.step, i.verified, i.is_latest) for i in best] == [("checkpoints/r/best/step_00004", 4, True, False)]


def test_flipped_byte_is_refused_and_fallback_only_when_told(tmp_path):
    ws = Workspace(tmp_path)
    _save(ws, 1)
    good_hash = "h1"
    bad = _save(ws, 2)
    blob = bad / "blob.bin"
    data = bytearray(blob.read_bytes())
    data[10] ^= 0x01
    blob.write_bytes(bytes(data))
    with pytest.raises(ckpt.CheckpointError, match="blob.bin is corrupt"):
        ckpt.resolve_resume(ws, "checkpoints/r", "latest", config_hash=good_hash, config_dump={"a": 1})
    chosen = ckpt.resolve_resume(ws, "checkpoints/r", "latest", config_hash=good_hash, config_dump={"a": 1},
                                 fallback=True)
    assert chosen.name == "step_00001"
    infos = {i.step: i for i in ckpt.list_checkpoints(ws, "checkpoints/r")}
    assert infos[2].verified is False and "corrupt" in infos[2].problem and infos[1].verified


def test_config_mismatch_names_the_difference(tmp_path):
    ws = Workspace(tmp_path)
    _save(ws, 1, config_hash="old", config={"engine": {"lr": 0.001}, "run": {"seed": 1}})
    with pytest.raises(ckpt.CheckpointError) as err:
        ckpt.resolve_resume(ws, "checkpoints/r", "latest", config_hash="new",
                            config_dump={"engine": {"lr": 0.002}, "run": {"seed": 1}})
    assert "engine.lr: 0.001 -> 0.002" in err.value.message


def test_stale_temp_dirs_are_cleaned(tmp_path):
    ws = Workspace(tmp_path)
    _save(ws, 1)
    root = ws.path("checkpoints/r")
    (root / ".tmp-step_00002-999").mkdir()
    (root / ".tmp-step_00002-999" / "blob.bin").write_text("half")
    assert ckpt.clean_stale_temps(root) == [".tmp-step_00002-999"]
    assert [p.name for p in root.iterdir() if p.name.startswith(".tmp")] == []


WRITER = """
import sys, os
from pathlib import Path
from rc1.runtime import checkpoint as ckpt
from rc1.runtime.workspace import Workspace
ws = Workspace(Path(sys.argv[1]))
big = os.urandom(1 << 20)
def write(p):
    with open(p, "wb") as fh:
        for _ in range(400):   # 400 MiB written in 1 MiB chunks: slow enough to be killed mid-write
            fh.write(big)
ckpt.write_checkpoint(ws, "checkpoints/r", 1, {"blob.bin": lambda p: p.write_bytes(b"small")},
                      {ckpt.META_CONFIG_HASH: "h"})
print("first", flush=True)
ckpt.write_checkpoint(ws, "checkpoints/r", 2, {"blob.bin": write}, {ckpt.META_CONFIG_HASH: "h"})
print("second", flush=True)
"""


def test_sigkill_during_checkpoint_write_keeps_latest_valid(tmp_path):
    ws = Workspace(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                            cwd=str(Path(__file__).resolve().parents[2]))
    assert proc.stdout.readline().strip() == "first"
    root = ws.path("checkpoints/r")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # wait until the second write is under way
        tmp = [p for p in root.iterdir() if p.name.startswith(".tmp-step_00002")]
        if tmp and (tmp[0] / "blob.bin").exists() and (tmp[0] / "blob.bin").stat().st_size > (8 << 20):
            break
        time.sleep(0.01)
    else:
        proc.kill()
        pytest.fail("the second checkpoint write never started")
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL
    latest = ckpt.read_latest(root)
    assert latest.name == "step_00001"
    ckpt.verify_checkpoint(latest)
    assert not (root / "step_00002").exists()
    assert ckpt.resolve_resume(ws, "checkpoints/r", "latest", config_hash="h", config_dump={}).name == "step_00001"
    assert ckpt.clean_stale_temps(root)  # the killed write's temp dir is removed at the next start
