"""A scripted OpenAI-compatible fault server (stdlib http.server on 127.0.0.1, in a thread).

`script` is a list of actions served in order, one per request; after it runs out, every request
gets a good completion. Actions: ("ok", text) | ("429", retry_after) | ("503",) | ("hang", seconds)
| ("badjson",) | ("401",) | ("400",).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from rc1.config.schema import ProviderSection, ScorerSection


class FaultServer:
    def __init__(self):
        self.script: list[tuple] = []
        self.requests: list[dict] = []
        self.times: list[float] = []
        self.default_text = "7"
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
                    action = server.script.pop(0) if server.script else ("ok", server.default_text)
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
                    self._send(200, _completion(action[1]))
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


def _completion(text):
    return {"id": "cmpl-1", "object": "chat.completion", "created": int(time.time()), "model": "fault-model",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 1, "total_tokens": 41}}


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
