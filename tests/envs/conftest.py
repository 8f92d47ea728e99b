"""Fixtures for rc1.envs tests: the tiny random Qwen3 model and small pool items."""

from __future__ import annotations

import pytest

from tests.helpers.items import make_item


@pytest.fixture(scope="session")
def tiny_model():
    import torch

    from rc1.config.schema import TrainConfig
    from rc1.models.loader import load_model

    torch.set_num_threads(1)
    return load_model(TrainConfig(model={"base": "random:qwen3-tiny"}), device=torch.device("cpu"), for_training=False)


@pytest.fixture(scope="session")
def tiny_tokenizer(tiny_model):
    return tiny_model[1]


@pytest.fixture
def item():
    """A factory of pool items (keyword overrides)."""
    return make_item
