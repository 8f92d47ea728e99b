"""Fixtures for rc1.envs tests: the tiny random Qwen3 model and small pool items."""

from __future__ import annotations

import pytest


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


def make_item(**over) -> dict:
    item = {
        "id": "t-1", "task": "hotpotqa", "template": "hotpotqa/t01", "role": "student", "style": "plain",
        "messages": [{"role": "system", "content": "You are careful."},
                     {"role": "user", "content": "Which river flows through the capital of France?"}],
        "question": "Which river flows through the capital of France?", "answer": "Seine", "aliases": [],
        "supporting": ["Paris is the capital of France.", "The Seine flows through Paris."],
        "corpus": [{"title": "Paris", "text": "Paris is the capital and largest city of France.\n\n"
                                              "The Seine flows through Paris, dividing it into banks."},
                   {"title": "Berlin", "text": "Berlin is the capital of Germany. The Spree flows through it."}],
        "needs_clarification": False, "hidden_detail": None, "tools": ["wiki", "calc"], "max_turns": 4, "meta": {},
    }
    item.update(over)
    return item


@pytest.fixture
def item():
    """A factory of pool items (keyword overrides)."""
    return make_item
