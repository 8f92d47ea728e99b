"""Shared fixtures: a tiny Qwen3 model dir built offline (helpers in tests/helpers/workspace.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.workspace import build_tiny_model_dir


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny_model")
    build_tiny_model_dir(out)
    return out
