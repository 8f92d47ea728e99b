"""Shared fixtures. Tests never touch the repo's own logs/ reports/ data/: each gets a workspace."""

from __future__ import annotations

import os
import shutil
import sys

import pytest

from tests.helpers.cli import REPO

# One intra-op thread in the test process and in every process it starts (set before torch is imported, and
# inherited): `make test` runs one pytest worker per core (pytest-xdist), and two threads of one process mostly
# wait for each other whenever the other core is busy (an eval test took 15 s at one thread, 22-41 s at two). A
# test whose config names run.threads still gets them for that test; `_one_torch_thread` puts one back after it.
TORCH_THREADS = 1
os.environ["OMP_NUM_THREADS"] = str(TORCH_THREADS)


@pytest.fixture
def ws(tmp_path):
    """An empty workspace with the repo's configs/ and templates/ copied in."""
    from rc1.runtime.workspace import Workspace

    root = tmp_path / "ws"
    root.mkdir()
    shutil.copytree(REPO / "configs", root / "configs")
    if (REPO / "templates").exists():
        shutil.copytree(REPO / "templates", root / "templates")
    return Workspace(root)


@pytest.fixture(autouse=True)
def _quiet_env(monkeypatch):
    # Tests must not depend on the caller's overrides.
    for var in ("RC1_WORKDIR", "BASE_MODEL", "SCORER_PROVIDER", "RUN_MODE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    yield


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """A test's run.threads (rc1 sets torch's thread count from it) must not carry over into the tests after it."""
    torch = sys.modules.get("torch")
    if torch is not None and torch.get_num_threads() != TORCH_THREADS:
        torch.set_num_threads(TORCH_THREADS)
    yield


@pytest.fixture(autouse=True)
def _auto_rollouts_from_the_policy(request, monkeypatch):
    """generation.rollout_dtype auto takes a bf16 sampling copy on CPUs with native bf16 (this machine's, not
    every machine's): the suite's exact-numerics tests read the policy's own rollouts, as auto does on a CPU
    without bf16. Tests marked `auto_rollout_dtype` see auto's real choice; bf16 tests ask for it by name."""
    if request.node.get_closest_marker("auto_rollout_dtype"):
        yield
        return
    import rc1.runtime.device as device

    real = device.rollouts_from_bf16_copy

    def policy_when_auto(cfg, device_type, autocast_bf16):
        if cfg.generation.rollout_dtype == "auto" and not autocast_bf16:
            return False
        return real(cfg, device_type, autocast_bf16)

    monkeypatch.setattr(device, "rollouts_from_bf16_copy", policy_when_auto)
    yield


@pytest.fixture(autouse=True)
def _rc1_logger_propagates():
    """An in-process `rc1 train/eval/pipeline` (CliRunner) calls setup_logging, which stops the 'rc1' logger
    propagating; put it back after each test so a later test's caplog still sees rc1's records."""
    import logging

    yield
    logging.getLogger("rc1").propagate = True


@pytest.fixture(scope="session")
def tiny_dir():
    """The random:qwen3-tiny model directory (built once into the model cache)."""
    from rc1.models.loader import resolve_base

    return resolve_base("random:qwen3-tiny")
