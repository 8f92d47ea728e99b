"""Fixtures for rc1.models tests: TrainConfigs on random:qwen3-tiny (its model directory is tests/conftest.py's `tiny_dir`)."""

from __future__ import annotations

import pytest


def _tiny_config(**over):
    from rc1.config.schema import TrainConfig

    model = {"base": "random:qwen3-tiny", **over.pop("model", {})}
    return TrainConfig(model=model, **over)


@pytest.fixture
def tiny_cfg():
    """TrainConfig factory on random:qwen3-tiny (keyword overrides per section)."""
    return _tiny_config
