"""Shared fixtures. Tests never touch the repo's own logs/ reports/ data/: each gets a workspace."""

from __future__ import annotations

import shutil

import pytest

from tests.helpers.cli import REPO


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
