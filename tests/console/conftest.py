"""Console fixtures; the helpers they use live in tests/helpers/console.py."""

from __future__ import annotations

import pytest

from rc1.runtime.workspace import Workspace
from tests.helpers.console import build_workspace


@pytest.fixture
def console_ws(tmp_path, monkeypatch) -> Workspace:
    return build_workspace(tmp_path / "ws", monkeypatch)
