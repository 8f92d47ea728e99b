"""Fixtures for the benchmark tests: the tiny random Qwen3 model (built once into the model cache)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def tiny_dir():
    from rc1.models.loader import resolve_base

    return resolve_base("random:qwen3-tiny")
