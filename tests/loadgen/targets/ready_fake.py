"""A hand-written OpenAI-style server that is not ready at first (a thread, 127.0.0.1).

    GET /health          503 {"status": "starting"} for the first ``health_503`` asks, then 200;
                         404 when ``health`` is False (a server without the route)
    GET /v1/models       503 "Loading model" for the first ``models_503`` asks, then the list
                         (with ``max_model_len`` when given)
    POST /v1/completions, /v1/chat/completions
                         503 "warming up" (the JAX server's not_ready) for the first ``post_503``,
                         then ``max_tokens`` tokens (SSE with Content-Length, or one JSON body)
    GET /info            ``info`` as JSON when given, else 404

Counts by route are in ``counts``; request bodies that were answered 200 in ``bodies``.
Bounded: it answers whatever comes, each answer at once; ``with`` shuts it down.
"""
from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Optional

MODEL = "warm-model"


class WarmingServer:
    def __init__(self, health_503: int = 0, models_503: int = 0, post_503: int = 0,
                 health: bool = True, max_model_len: Optional[int] = None,
                 info: Optional[dict] = None):
        self.health_503, self.models_503, self.post_503 = health_503, models_503, post_503
        self.health, self.max_model_len, self.info = health, max_model_len, info
        self.counts = {"health": 0, "models": 0, "post": 0}
        self.bodies: list[dict] = []
        self.lock = threading.Lock()
        self.httpd: Optional[ThreadingHTTPServer] = None
        self.url = ""

    def _count(self, key: str) -> int:
        with self.lock:
            self.counts[key] += 1
            return self.counts[key]

    def _handler(self):
        fake = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _json(self, code: int, obj) -> None:
                self._send(code, json.dumps(obj).encode())

            def do_GET(self):
                if self.path == "/health" and fake.health:
                    if fake._count("health") <= fake.health_503:
                        return self._json(503, {"status": "starting"})
                    return self._json(200, {"status": "ok"})
                if self.path == "/v1/models":
                    if fake._count("models") <= fake.models_503:
                        return self._json(503, {"error": {"message": "Loading model"}})
                    card = {"id": MODEL, "object": "model"}
                    if fake.max_model_len is not None:
                        card["max_model_len"] = fake.max_model_len
                    return self._json(200, {"object": "list", "data": [card]})
                if self.path == "/info" and fake.info is not None:
                    return self._json(200, fake.info)
                return self._json(404, {"error": {"message": "Not Found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0))
                                  or b"{}")
                if not self.path.endswith("completions"):
                    return self._json(404, {"error": {"message": "Not Found"}})
                if fake._count("post") <= fake.post_503:
                    return self._json(503, {"error": {
                        "message": "the server is still warming up; retry when GET /health "
                                   "returns 200", "code": "not_ready"}})
                with fake.lock:
                    fake.bodies.append(body)
                n = int(body.get("max_tokens") or 1)
                chat = self.path.endswith("chat/completions")
                usage = {"prompt_tokens": 3, "completion_tokens": n, "total_tokens": 3 + n}
                if not body.get("stream"):
                    choice = ({"index": 0, "message": {"role": "assistant", "content": " tok" * n},
                               "finish_reason": "length"} if chat else
                              {"index": 0, "text": " tok" * n, "finish_reason": "length"})
                    return self._json(200, {"id": "c", "choices": [choice], "usage": usage})
                events = []
                for i in range(n):
                    fin = "length" if i == n - 1 else None
                    choice = ({"index": 0, "delta": {"content": " tok"}, "finish_reason": fin}
                              if chat else {"index": 0, "text": " tok", "finish_reason": fin})
                    events.append({"id": "c", "choices": [choice]})
                events.append({"id": "c", "choices": [], "usage": usage})
                sse = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
                self._send(200, sse + b"data: [DONE]\n\n", "text/event-stream")

            def log_message(self, *args):
                pass

        return H

    def __enter__(self) -> "WarmingServer":
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
