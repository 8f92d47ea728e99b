"""Fixtures for rc1.models tests: the tiny random Qwen3 model (built once into the model cache)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_dir():
    from rc1.models.loader import resolve_base

    return resolve_base("random:qwen3-tiny")


def _tiny_config(**over):
    from rc1.config.schema import TrainConfig

    model = {"base": "random:qwen3-tiny", **over.pop("model", {})}
    return TrainConfig(model=model, **over)


@pytest.fixture
def tiny_cfg():
    """TrainConfig factory on random:qwen3-tiny (keyword overrides per section)."""
    return _tiny_config
