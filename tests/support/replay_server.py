"""A replay server: answers as a recorded real server did, byte for byte (tests/fixtures/servers/).

    tests/fixtures/servers/<server>/<case>.json  (recorded by bench/compat/record.py)
        ─► Transcripts(server): the cases, indexed by path and request features
    client ──GET /v1/models | /health | /version | /metrics──► the recorded answer (404 if none was)
    client ──POST /v1/completions | /v1/chat/completions | /v1/responses | /v1/embeddings──► pick(path, body):
        features = {stream, usage (stream_options.include_usage), continuous_usage, ignore_eos,
                    min_tokens, logit_bias | logit_bias_int, tools, tool_choice_<auto|required|none|named>,
                    json_schema | json_object (response_format), images | images_<n> (image_url parts),
                    batch (a list of embeddings inputs), unknown (any field outside the OpenAI/vLLM set)}
        0. a case recorded on this path with exactly these features ─► that case
        1. a feature the recorded server REJECTED (its case answered 4xx) ─► that error answer
        2. else the case on this path with the same ``stream`` whose features are the largest
           subset of the request's (exact match first)
    answer: recorded status, reason and headers (wire order; the framing headers are aiohttp's, the
            same framing as recorded: chunked or Content-Length), then every recorded chunk as one
            write — so one HTTP chunk per server write — optionally at its recorded offset × delay_scale
        ─► the recorded connection behaviour: a case whose server closed the socket after the answer
           (llama.cpp's llama-server after a streamed answer, despite ``Keep-Alive: timeout=5``)
           closes it here too, after the last byte; no ``Connection: close`` is added.

The body is the recorded one whatever the request asked: its max_tokens, ids and usage are the
recording's (max_tokens 8). Every request is logged (GET /replay/log: [case, path, features]).

Run: ``python -m tests.support.replay_server --server llama.cpp --port 0 [--delay-scale 1]`` prints
``PORT <n>`` when listening. ``ReplayServer`` runs that in a subprocess as a context manager.
"""
from __future__ import annotations

import argparse
import asyncio
import base64
import json
import sys
import time
import urllib.request
from pathlib import Path
from typing import Optional

from aiohttp import web

from servers.port_server import PortServer, serve_app

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "servers"
KNOWN = {"model", "prompt", "messages", "max_tokens", "stream", "stream_options", "temperature", "top_p",
         "seed", "n", "stop", "ignore_eos", "min_tokens", "max_completion_tokens", "logprobs", "user",
         "presence_penalty", "frequency_penalty", "logit_bias",
         "tools", "tool_choice", "response_format",                 # chat: tools, structured output
         "input", "max_output_tokens", "encoding_format", "dimensions"}   # responses, embeddings
FRAMING = {"transfer-encoding", "content-length"}   # aiohttp writes these itself
# vLLM starts whose cases answer what the default start also answers (GET /metrics, /v1/models, a
# plain stream): replayed only when asked for (--variant), then before the default start's cases
OWN_START = ("spec", "lora")


def servers() -> list[str]:
    """The servers that have recorded transcripts."""
    return sorted(p.parent.name for p in FIXTURES.glob("*/_server.json"))


def features(body: dict) -> frozenset:
    f = set()
    opts = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
    if body.get("stream"):
        f.add("stream")
        if opts.get("include_usage"):
            f.add("usage")
        if opts.get("continuous_usage_stats"):
            f.add("continuous_usage")
    if "ignore_eos" in body:
        f.add("ignore_eos")
    if "min_tokens" in body:
        f.add("min_tokens")
    if isinstance(body.get("logit_bias"), dict):      # int and float biases: answered differently
        ints = any(isinstance(v, int) and not isinstance(v, bool) for v in body["logit_bias"].values())
        f.add("logit_bias_int" if ints else "logit_bias")
    if body.get("tools"):
        f.add("tools")
    choice = body.get("tool_choice")
    if choice is not None:
        f.add(f"tool_choice_{choice}" if isinstance(choice, str) else "tool_choice_named")
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type"):
        f.add(str(rf["type"]))                          # json_schema | json_object
    n = image_count(body)
    if n:
        f.add("images" if n == 1 else f"images_{n}")
    if isinstance(body.get("input"), list) and len(body["input"]) > 1:
        f.add("batch")                                  # embeddings: a list of inputs
    if set(body) - KNOWN:
        f.add("unknown")
    return frozenset(f)


def image_count(body: dict) -> int:
    """image_url parts in a chat body's messages."""
    n = 0
    for m in body.get("messages") or ():
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            n += sum(1 for p in content if isinstance(p, dict) and p.get("type") == "image_url")
    return n


def chunk_bytes(c: dict) -> bytes:
    return c["text"].encode("utf-8") if "text" in c else base64.b64decode(c["b64"])


class Transcripts:
    def __init__(self, server: str, root: Path = FIXTURES, variant: Optional[str] = None):
        d = root / server
        if not (d / "_server.json").exists():
            raise FileNotFoundError(f"no transcripts for {server!r} in {root} (have: {servers()})")
        self.meta = json.loads((d / "_server.json").read_text())
        self.cases = {p.stem: json.loads(p.read_text()) for p in sorted(d.glob("*.json"))
                      if not p.stem.startswith("_")}
        self.cases = {k: c for k, c in self.cases.items()           # OWN_START: only when asked
                      if c.get("variant") not in OWN_START or c.get("variant") == variant}
        own = sorted(self.cases.values(), key=lambda c: c.get("variant") == variant and variant is not None)
        self.get = {c["request"]["path"]: c for c in own if c["request"]["method"] == "GET"}
        self.post = [(c["request"]["path"], features(c["request"]["body"]), c) for c in self.cases.values()
                     if c["request"]["method"] == "POST" and "exchanges" not in c]

    def rejected(self, path: str, feats: frozenset) -> Optional[dict]:
        """A case that shows the server rejecting one of ``feats`` (same path preferred)."""
        hits = [(p != path, c) for p, f, c in self.post if 400 <= c["response"]["status"] < 500
                and (f - {"stream", "usage"}) & feats]
        return min(hits, key=lambda h: (h[0], h[1]["case"]))[1] if hits else None

    def pick(self, path: str, body: dict) -> Optional[dict]:
        feats = features(body)
        named = [c for p, f, c in self.post if p == path and c.get("variant") in OWN_START
                 and c["request"]["body"].get("model") == body.get("model")]
        if named:                          # a model / adapter recorded by name (the lora start)
            return min(named, key=lambda c: (features(c["request"]["body"]) != feats, c["case"]))
        exact = [c for p, f, c in self.post if p == path and f == feats]
        if exact:
            return exact[0]
        bad = self.rejected(path, feats - {"stream", "usage"})
        if bad is not None:
            return bad
        ok = [(f, c) for p, f, c in self.post if p == path and ("stream" in f) == ("stream" in feats)
              and f <= feats and c["response"]["status"] < 400]
        if not ok:
            return None
        return max(ok, key=lambda fc: (fc[0] == feats, len(fc[0]), fc[1]["case"]))[1]


class Replay:
    def __init__(self, t: Transcripts, delay_scale: float = 0.0):
        self.t, self.delay_scale, self.log = t, delay_scale, []

    async def answer(self, request: web.Request, case: Optional[dict]) -> web.StreamResponse:
        if case is None:
            return web.json_response({"error": {"message": f"replay: no transcript of {self.t.meta['name']} "
                                                           f"for {request.method} {request.path}"}}, status=404)
        t0 = time.perf_counter()
        r = case["response"]
        resp = web.StreamResponse(status=r["status"], reason=r["reason"] or None)
        for k, v in r["headers"]:
            if k.lower() not in FRAMING:
                resp.headers.add(k, v)
        if r["framing"] == "chunked":
            resp.enable_chunked_encoding()
        elif r["framing"] == "content-length":
            resp.content_length = sum(len(chunk_bytes(c)) for c in r["chunks"])
        await resp.prepare(request)
        for c in r["chunks"]:
            if self.delay_scale > 0:
                wait = c["t_ms"] / 1000 * self.delay_scale - (time.perf_counter() - t0)
                if wait > 0:
                    await asyncio.sleep(wait)
            await resp.write(chunk_bytes(c))
        await resp.write_eof()
        if (case.get("connection") or {}).get("closed_by_server"):
            request.protocol.force_close()      # the FIN follows the last byte; headers said keep-alive
        return resp

    async def post(self, request: web.Request) -> web.StreamResponse:
        try:
            body = await request.json()
        except ValueError:
            body = {}
        case = self.t.pick(request.path, body if isinstance(body, dict) else {})
        self.log.append([case and case["case"], request.path, sorted(features(body))])
        return await self.answer(request, case)

    async def get(self, request: web.Request) -> web.StreamResponse:
        case = self.t.get.get(request.path)
        self.log.append([case and case["case"], request.path, []])
        return await self.answer(request, case)

    async def get_log(self, request: web.Request) -> web.Response:
        out = list(self.log)
        if request.query.get("clear"):
            self.log.clear()
        return web.json_response(out)


def make_app(server: str, delay_scale: float = 0.0, root: Path = FIXTURES,
             variant: Optional[str] = None) -> web.Application:
    rp = Replay(Transcripts(server, root, variant), delay_scale)
    app = web.Application()
    app.router.add_get("/replay/log", rp.get_log)
    app.router.add_post("/{tail:.*}", rp.post)
    app.router.add_get("/{tail:.*}", rp.get)
    app["replay"] = rp
    return app


async def _serve(args: argparse.Namespace) -> None:
    await serve_app(make_app(args.server, args.delay_scale, variant=args.variant), args.port,
                    handle_signals=True)

def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="replay a recorded real server's answers (127.0.0.1 only)")
    ap.add_argument("--server", required=True, help=f"one of: {', '.join(servers()) or '(none recorded)'}")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--delay-scale", type=float, default=0.0,
                    help="0: answer at once; 1: each chunk at its recorded offset; 0.1: ten times faster")
    ap.add_argument("--variant", default=None, help=f"also the cases of this start ({', '.join(OWN_START)})")
    args = ap.parse_args(argv)
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        pass
    return 0


class ReplayServer(PortServer):
    """``with ReplayServer("llama.cpp") as s: s.url, s.log()`` — a subprocess on 127.0.0.1."""

    label = "replay server"

    def __init__(self, server: str, delay_scale: float = 0.0, startup_timeout_s: float = 20.0,
                 variant: Optional[str] = None):
        self.server = server
        super().__init__([sys.executable, "-m", "tests.support.replay_server", "--server", server,
                          "--port", "0", "--delay-scale", str(delay_scale)]
                         + (["--variant", variant] if variant else []), startup_timeout_s)

    @property
    def meta(self) -> dict:
        return json.loads((FIXTURES / self.server / "_server.json").read_text())

    def log(self, clear: bool = False) -> list:
        q = "?clear=1" if clear else ""
        with urllib.request.urlopen(f"{self.url}/replay/log{q}", timeout=30) as r:
            return json.loads(r.read())


if __name__ == "__main__":
    sys.exit(main())
