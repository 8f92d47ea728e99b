"""Shared fixtures: a tiny Qwen3 model dir built offline (helpers in tests/helpers/workspace.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

# re-exported for the tests that import them from here (new tests import tests.helpers directly)
from tests.helpers.items import arithmetic_items  # noqa: F401
from tests.helpers.workspace import WEIGHTS, build_tiny_model_dir, make_workspace  # noqa: F401


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("tiny_model")
    build_tiny_model_dir(out)
    return out
