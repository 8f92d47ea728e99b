"""Shared fixtures: a tiny Qwen3 model dir built offline. The workspace helpers live in
tests/helpers/workspace.py (re-exported here for the tests that import them from this module)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.workspace import WEIGHTS, arithmetic_items, build_tiny, make_workspace  # noqa: F401


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny_model")
    build_tiny(out)
    return out


