"""Fixtures of the reward tests: the fault server (tests/helpers/fault_server.py) and a scorer pointing at it."""

from __future__ import annotations

import json

import pytest

from rc1.config.schema import ProviderSection, ScorerSection
from tests.helpers.items import mixed_task_items
from tests.helpers.fault_server import FaultServer


@pytest.fixture
def fault_server():
    srv = FaultServer()
    yield srv
    srv.close()


@pytest.fixture
def scorer_for(fault_server):
    """A ScorerSection whose provider 'openai' points at the fault server (key from env FAULT_KEY)."""

    def make(**kw):
        providers = {"openai": ProviderSection(base_url=fault_server.base_url, model="fault-model",
                                               api_key_env="RC1_TEST_FAULT_KEY"),
                     "local": ProviderSection(base_url="auto", model="smollm2-135m-instruct")}
        base = dict(provider="openai", providers=providers, samples=1, max_retries=3, timeout_s=5.0,
                    concurrency=1, cache_path="reports/judge_cache.sqlite")
        base.update(kw)
        return ScorerSection(**base)

    return make


# ----------------------------------------------------------------------------- shadow-set fixtures
def fake_episodes(items: list[dict], generations: int, seed: int) -> list[dict]:
    """Stand-in for base-model rollouts in unit tests (the real path is covered by a real_model test)."""
    import random

    rng = random.Random(seed)
    out = []
    for it in items:
        for _ in range(generations):
            good = rng.random() < 0.5
            clar = rng.choice([0, 0, 0, 1, 2])
            ans = it["answer"] if good else ("0" if it["task"] == "gsm8k" else "Berlin" if it["task"] == "hotpotqa"
                                             else ("no" if it["answer"] == "yes" else "yes"))
            reasoning = rng.choice(["", "Because the facts say so, then we conclude.",
                                    " ".join(it.get("supporting") or []) + " so the answer follows."])
            out.append({"item_id": it["id"], "task": it["task"], "final_answer": ans, "turns": 1 + clar,
                        "tool_hops": rng.randint(0, 2), "clarifications": clar, "truncated": rng.random() < 0.05,
                        "model_text": f"{reasoning}\nANSWER: {ans}", "transcript": []})
    return out


@pytest.fixture
def shadow_ws(tmp_path, monkeypatch):
    """A workspace with a 60-item shadow set, weights, and generation replaced by fake_episodes."""
    from rc1.rewards import responses
    from rc1.rewards.weights import write_weights
    from rc1.runtime.workspace import Workspace

    ws = Workspace(tmp_path)
    items = mixed_task_items(60)
    ws.path("data").mkdir(parents=True, exist_ok=True)
    ws.path("data/shadow_eval_245.jsonl").write_text("".join(json.dumps(it) + "\n" for it in items))
    write_weights(ws.path("configs/weights.json"),
                  {"correctness": 0.45, "reasoning": 0.12, "grounding": 0.12, "clarity": 0.07, "conciseness": 0.06,
                   "format": 0.08, "clarification": 0.10}, version="v1", note="test prior")
    calls = []

    def fake_generate(cfg, items, *, generations, seed, max_turns=None, batch_size=8):
        calls.append(len(items))
        return fake_episodes(items, generations, seed)

    monkeypatch.setattr(responses, "generate_responses", fake_generate)
    from types import SimpleNamespace

    return SimpleNamespace(ws=ws, generate_calls=calls)
