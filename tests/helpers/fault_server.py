"""A scripted OpenAI-compatible fault server (stdlib http.server on 127.0.0.1, in a thread).

`script` is a list of actions served in order, one per request; after it runs out, every request
gets a good completion: `responder(body)` when set (a judge from tests/helpers/judges.py), else
`default_text`. Actions: ("ok", text) | ("ok", text, logprobs) | ("429", retry_after) | ("503",)
| ("hang", seconds) | ("badjson",) | ("empty",) (HTTP 200 with an empty body) | ("401",) | ("400",).
`down = True` answers every request with a dropped connection (a judge that went away).
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


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
        self.down = False           # every request: the connection drops without an answer
        self.down_after: int | None = None  # go down once this many requests were answered
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
                    if server.down_after is not None and len(server.requests) >= server.down_after:
                        server.down = True
                    down = server.down
                if down:
                    self.close_connection = True
                    return
                with server._lock:
                    server.requests.append(body)
                    server.times.append(time.monotonic())
                    action = server.script.pop(0) if server.script else None
                if action is None:
                    reply = server.responder(body) if server.responder else server.default_text
                    action = ("ok", *reply) if isinstance(reply, tuple) else ("ok", reply)
                # in flight: from arrival until the answer is about to be written (once written, the client may
                # send its next request before this thread gets the lock back: counting past the write raced)
                with server._lock:
                    server.inflight += 1
                    server.max_inflight = max(server.max_inflight, server.inflight)
                try:
                    if action[0] == "ok":
                        time.sleep(server.delay)
                finally:
                    with server._lock:
                        server.inflight -= 1
                self._act(action)

            def _act(self, action):
                kind = action[0]
                if kind == "ok":
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
        # shutdown() waits for the serve loop's next poll: 0.5 s by default, at every test's teardown
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
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


