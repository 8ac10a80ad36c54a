"""Small hand-written OpenAI-style servers for the real servers' quirks (a thread, 127.0.0.1).

``FakeOpenAI`` answers what a test tells it to, in its own process (as the calibration server:
sync tests, async tests and a CLI subprocess can all reach it, and a gevent-patched test process
cannot turn its threads into greenlets):

    stream       the byte pieces of every streamed answer, each one write (chunked encoding);
                 default: a plain OpenAI stream of ``tokens`` content chunks, usage, [DONE]
    reject       field names: a body holding any of them gets transformers serve's 400
                 ``Unexpected fields in the request: {...}``
    api_key      required ``Authorization: Bearer <key>`` (401 otherwise) on every path
    models       the ids /v1/models lists; ``models_status`` its HTTP status (503: still loading)

Every request body the generators received is kept: ``bodies`` (GET /fake/bodies).
Run: ``python -m tests.loadgen.client.fakes CONFIG_JSON`` prints ``PORT <n>``.
"""
from __future__ import annotations

import asyncio
import json
import sys
import urllib.request
from typing import Optional

from aiohttp import web

from servers.port_server import PortServer, serve_app


def sse(*objs, done: bool = True, sep: bytes = b"\n\n") -> list[bytes]:
    """One piece per event: ``data: <json>`` + sep; ``data: [DONE]`` last when ``done``."""
    out = [b"data: " + json.dumps(o).encode() + sep for o in objs]
    return out + ([b"data: [DONE]" + sep] if done else [])


def _chunk(obj: str, choice: dict, usage: Optional[dict]) -> dict:
    o = {"id": "c", "object": obj, "model": "fake-model", "choices": [{"index": 0, **choice}]}
    if usage is not None:
        o["usage"] = usage
    return o


def chat_chunk(delta: dict, finish: Optional[str] = None, usage: Optional[dict] = None) -> dict:
    return _chunk("chat.completion.chunk", {"delta": delta, "finish_reason": finish}, usage)


def cmpl_chunk(text: str, finish: Optional[str] = None, usage: Optional[dict] = None) -> dict:
    return _chunk("text_completion", {"text": text, "finish_reason": finish}, usage)


def usage(completion: int, prompt: int = 3) -> dict:
    return {"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt + completion}


class FakeApp:
    """The server side (in the child process)."""

    def __init__(self, stream: Optional[list[bytes]] = None, reject: tuple = (),
                 api_key: Optional[str] = None, models: tuple = ("fake-model",),
                 models_status: int = 200, tokens: int = 4):
        self.stream, self.reject, self.api_key = stream, tuple(reject), api_key
        self.models, self.models_status, self.tokens = list(models), models_status, tokens
        self.bodies: list[dict] = []

    def _denied(self, request: web.Request) -> Optional[web.Response]:
        if self.api_key and request.headers.get("Authorization") != f"Bearer {self.api_key}":
            return web.json_response({"error": {"message": "Invalid API key", "code": 401}},
                                     status=401)
        return None

    async def _models(self, request: web.Request) -> web.Response:
        denied = self._denied(request)
        if denied is not None:
            return denied
        if self.models_status != 200:
            return web.json_response({"error": {"message": "Loading model", "code":
                                                 self.models_status}}, status=self.models_status)
        return web.json_response({"object": "list", "data": [
            {"id": m, "object": "model", "owned_by": "fake"} for m in self.models]})

    async def _bodies(self, request: web.Request) -> web.Response:
        return web.json_response(self.bodies)

    def _default_stream(self, chat: bool, n: int) -> list[bytes]:
        if chat:
            objs = [chat_chunk({"role": "assistant", "content": ""})]
            objs += [chat_chunk({"content": " tok"}, "length" if i == n - 1 else None)
                     for i in range(n)]
            objs.append({"id": "c", "object": "chat.completion.chunk", "choices": [],
                         "usage": usage(n)})
        else:
            objs = [cmpl_chunk(" tok", "length" if i == n - 1 else None) for i in range(n)]
            objs.append({"id": "c", "object": "text_completion", "choices": [],
                         "usage": usage(n)})
        return sse(*objs)

    async def _generate(self, request: web.Request) -> web.StreamResponse:
        denied = self._denied(request)
        if denied is not None:
            return denied
        body = await request.json()
        self.bodies.append(body)
        bad = [f for f in self.reject if f in body]
        if bad:
            names = "{" + ", ".join(repr(f) for f in bad) + "}"
            return web.json_response({"error": {"message": f"Unexpected fields in the request: "
                                                f"{names}", "type": "invalid_request_error"}},
                                     status=400)
        chat = request.path.endswith("/chat/completions")
        n = int(body.get("max_tokens") or self.tokens)
        if not body.get("stream"):
            text = " tok" * n
            choice = ({"index": 0, "message": {"role": "assistant", "content": text},
                       "finish_reason": "length"} if chat else
                      {"index": 0, "text": text, "finish_reason": "length"})
            return web.json_response({"id": "c", "choices": [choice], "usage": usage(n)})
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for piece in self.stream if self.stream is not None else self._default_stream(chat, n):
            await resp.write(piece)
        await resp.write_eof()
        return resp

    async def serve(self) -> None:
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/completions", self._generate)
        app.router.add_post("/v1/chat/completions", self._generate)
        app.router.add_get("/fake/bodies", self._bodies)
        await serve_app(app)


class FakeOpenAI(PortServer):
    """``with FakeOpenAI(reject=("ignore_eos",)) as s: s.url, s.bodies`` — a subprocess."""

    label = "fake server"

    def __init__(self, stream: Optional[list[bytes]] = None, reject: tuple = (),
                 api_key: Optional[str] = None, models: tuple = ("fake-model",),
                 models_status: int = 200, tokens: int = 4):
        self.config = {"stream": None if stream is None else [b.decode("latin-1") for b in stream],
                       "reject": list(reject), "api_key": api_key, "models": list(models),
                       "models_status": models_status, "tokens": tokens}
        super().__init__([sys.executable, "-m", "tests.loadgen.client.fakes",
                          json.dumps(self.config)])

    @property
    def bodies(self) -> list[dict]:
        with urllib.request.urlopen(f"{self.url}/fake/bodies", timeout=30) as r:
            return json.loads(r.read())


def main(argv: list[str]) -> int:
    cfg = json.loads(argv[0])
    if cfg.get("stream") is not None:
        cfg["stream"] = [piece.encode("latin-1") for piece in cfg["stream"]]
    try:
        asyncio.run(FakeApp(**cfg).serve())
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
