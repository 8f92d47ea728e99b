"""Eval fixtures. The helpers themselves live in tests/helpers/eval.py."""

from __future__ import annotations

import pytest

from tests.helpers.eval import TINY_CONFIG, make_items, write_jsonl


@pytest.fixture
def tiny_ws(ws):
    """Workspace with a tiny-model config, a 9-item held-out set and a 3-item dev split (eval_min)."""
    (ws.root / "configs" / "tiny.yaml").write_text(TINY_CONFIG.format(metric="success"))
    write_jsonl(ws.path("data/shadow.jsonl"), make_items(9, seed=11))
    write_jsonl(ws.path("data/eval_min.jsonl"), make_items(3, seed=12))
    return ws
