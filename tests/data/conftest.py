"""Shared fixtures: one small generated workspace (pool, v1 pool, shadow set) reused by the data tests."""

from __future__ import annotations

import pytest

from tests.helpers.cli import new_ws

@pytest.fixture(scope="session")
def small_ws(tmp_path_factory):
    """1500-item pool + v1 pool + 245-item shadow set, built once per session."""
    from rc1.data.pipeline import build_pool_file, make_shadow_set
    from rc1.data.pool import BuildParams

    ws = new_ws(tmp_path_factory.mktemp("data_ws"))
    build_pool_file(ws, BuildParams(n=1500, templates_dir=ws.path("templates/pack_v2"), seed=11),
                    "data/rollouts/rc1_seed.jsonl")
    build_pool_file(ws, BuildParams(n=1500, seed=1), "data/rollouts/rc1_v1.jsonl", version="v1")
    make_shadow_set(ws, templates_dir="templates/pack_v2")
    return ws


@pytest.fixture
def ws(tmp_path):
    return new_ws(tmp_path)
