"""A scripted OpenAI-compatible fault server (stdlib http.server on 127.0.0.1, in a thread).

`script` is a list of actions served in order, one per request; after it runs out, every request
gets a good completion: `responder(body)` when set (a judge from tests/helpers/judges.py), else
`default_text`. Actions: ("ok", text) | ("ok", text, logprobs) | ("429", retry_after) | ("503",)
| ("hang", seconds) | ("badjson",) | ("empty",) (HTTP 200 with an empty body) | ("401",) | ("400",).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rc1.config.schema import ProviderSection, ScorerSection
from tests.helpers.items import mixed_task_items


class FaultServer:
    def __init__(self):
        self.script: list[tuple] = []
        self.requests: list[dict] = []
        self.times: list[float] = []
        self.default_text = "7"
        self.responder = None  # body -> reply text, or (text, [(token, logprob), ...])
        self.usage = USAGE  # None: the server reports no usage
        self.inflight = 0
        self.delay = 0.0  # seconds before each good answer (to observe concurrency)
        self.max_inflight = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                self._send(200, {"object": "list", "data": [{"id": "fault-model", "object": "model"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
                with server._lock:
                    server.requests.append(body)
                    server.times.append(time.monotonic())
                    action = server.script.pop(0) if server.script else None
                if action is None:
                    reply = server.responder(body) if server.responder else server.default_text
                    action = ("ok", *reply) if isinstance(reply, tuple) else ("ok", reply)
                with server._lock:
                    server.inflight += 1
                    server.max_inflight = max(server.max_inflight, server.inflight)
                try:
                    self._act(action)
                finally:
                    with server._lock:
                        server.inflight -= 1

            def _act(self, action):
                kind = action[0]
                if kind == "ok":
                    time.sleep(server.delay)
                    self._send(200, _completion(*action[1:], usage=server.usage))
                elif kind == "429":
                    self._send(429, {"error": {"message": "slow down", "type": "rate_limit"}},
                               {"Retry-After": str(action[1])})
                elif kind in ("503", "401", "400"):
                    self._send(int(kind), {"error": {"message": f"scripted {kind}"}})
                elif kind == "hang":
                    time.sleep(action[1])
                    try:
                        self._send(200, _completion("5"))
                    except OSError:
                        pass
                elif kind == "empty":
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", "0")
                    self.end_headers()
                elif kind == "badjson":
                    raw = b'{"id": "x", "choices": [ {"message": '
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(raw)))
                    self.end_headers()
                    self.wfile.write(raw)

            def _send(self, code, obj, headers=None):
                raw = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(raw)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


USAGE = {"prompt_tokens": 40, "completion_tokens": 1, "total_tokens": 41}


def _completion(text, logprobs=None, usage=USAGE):
    choice = {"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}
    if logprobs is not None:
        choice["logprobs"] = {"content": [{"token": t, "logprob": lp, "bytes": None, "top_logprobs": []}
                                          for t, lp in logprobs]}
    return {"id": "cmpl-1", "object": "chat.completion", "created": int(time.time()), "model": "fault-model",
            "choices": [choice], "usage": usage}


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
