"""A calibration server: an OpenAI-compatible endpoint whose timing and faults are known.

    client ──POST /v1/completions | /v1/chat/completions──► handler
        handler: arrival_ns ─► role chunk (chat) at arrival + role_ms
                            ─► content chunk j at arrival + ttft_ms + j*itl_ms  (ABSOLUTE deadlines)
                            ─► usage chunk ─► [DONE]
                 every data event written is logged as [write_ns, n_tokens] (perf_counter_ns,
                 the client's clock on this host) ─► GET /calib/log (also: the request's X-*
                 headers; chat: each message's role and first 120 characters)

    lockstep (``--lockstep`` or calib ``lockstep: true``): a continuous-batching server's decode loop.
        one global DecodeClock per itl_ms, ticks on a fixed grid epoch + k*itl_ms ─► at each tick the
        next content chunk of EVERY running stream, written back to back in one pass
        a request's first content chunk: the first tick at or after arrival + ttft_ms; then one per tick
        a tick that wakes late runs at once and the grid skips the missed ticks (a slow step)
        every tick logged as [k, planned_ns, start_ns, end_ns, streams] ─► GET /calib/clock

Defaults come from the command line; a request overrides them with a ``calib`` object in its body
(``{"calib": {"ttft_ms": 50, "itl_ms": 10, "fault": "drop", "fault_at": 3}}``). Keys:
  ttft_ms, itl_ms, role_ms   timing (role_ms: when the chat role-only chunk goes out)
  tokens                     output length (default: max_tokens, else 16)
  tokens_per_chunk           words per chunk; usage counts every word as a token
  text                       the text of one token (default " tok"; e.g. non-ASCII " ü")
  usage                      false: never send usage, even when asked for
  usage_tokens               report this completion_tokens in usage instead of the truth
  role_first                 chat: send a role-only chunk first (default true)
  reasoning_tokens           chat: the first N chunks carry ``reasoning_content``
  fault                      http500 | http429 | drop | malformed | bad_json | stall | error_event | no_done
                             | noise (valid but unusual SSE: comment, id, retry, empty data, CRLF)
  fault_at                   content chunks written before the fault (default 2)
  stall_s                    how long ``stall`` stalls (default 30)
  close_after                streams answer ``Keep-Alive: timeout=5, max=100`` and then: true: close the
                             socket after the stream (llama.cpp's llama-server); "next": keep it open but
                             drop the next request on it unanswered (a stale keep-alive connection, every time)
  lockstep                   true: content chunks on the global decode clock (above); a request with a
                             fault keeps its own absolute deadlines
With ttft_ms = itl_ms = 0 and no fault the whole answer is written at once from cached bytes,
so the server is cheap enough for client capacity benchmarks.

Run: ``python -m tests.support.calibration_server --port 0 [--ttft-ms 50 --itl-ms 10 --lockstep --cpu 0]``
prints ``PORT <n>`` when listening. ``CalibrationServer`` runs that in a subprocess (its own
interpreter, so it never shares a GIL with the client being measured) as a context manager.
"""
from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import sys
import time
import urllib.request
from typing import Any, Optional

from aiohttp import web

from tests.support.procs import PortServer

now_ns = time.perf_counter_ns
MODEL = "calib-model"
DEFAULTS: dict[str, Any] = dict(ttft_ms=0.0, itl_ms=0.0, role_ms=0.0, tokens=None, tokens_per_chunk=1,
                                usage=True, usage_tokens=None, role_first=True, reasoning_tokens=0, text=" tok",
                                fault=None, fault_at=2, stall_s=30.0, lockstep=False,
                                close_after=False)
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode   # raw UTF-8, like vLLM


def _event(obj: dict) -> bytes:
    return b"data: " + _dumps(obj).encode() + b"\n\n"


class Builder:
    """Chunk bytes for one request shape; identical chunks are built once and cached."""

    _cache: dict = {}

    def __init__(self, chat: bool, k: int, prompt_tokens: int, text: str = " tok"):
        self.chat, self.k, self.pt = chat, k, prompt_tokens
        self.text = text * k

    def _base(self) -> dict:
        if self.chat:
            return {"id": "chatcmpl-calib", "object": "chat.completion.chunk", "created": 1700000000,
                    "model": MODEL, "choices": []}
        return {"id": "cmpl-calib", "object": "text_completion", "created": 1700000000,
                "model": MODEL, "choices": []}

    def _usage(self, completion: int) -> dict:
        return {"prompt_tokens": self.pt, "completion_tokens": completion,
                "total_tokens": self.pt + completion}

    def content(self, finish: Optional[str], reasoning: bool = False, cum: Optional[int] = None) -> bytes:
        key = (self.chat, self.text, finish, reasoning)
        if cum is None and key in self._cache:
            return self._cache[key]
        o = self._base()
        if self.chat:
            delta = {"reasoning_content": self.text} if reasoning else {"content": self.text}
            o["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        else:
            o["choices"] = [{"index": 0, "text": self.text, "logprobs": None, "finish_reason": finish,
                             "stop_reason": None}]
        if cum is not None:
            o["usage"] = self._usage(cum)
            return _event(o)
        b = self._cache[key] = _event(o)
        return b

    def role(self, cum: Optional[int] = None) -> bytes:
        o = self._base()
        o["choices"] = [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                         "finish_reason": None}]
        if cum is not None:
            o["usage"] = self._usage(cum)
        return _event(o)

    def usage(self, completion: int) -> bytes:
        o = self._base()
        o["usage"] = self._usage(completion)
        return _event(o)

    def full(self, n_chunks: int, finish: str, usage_tokens: Optional[int]) -> dict:
        o = self._base()
        o["object"] = "chat.completion" if self.chat else "text_completion"
        text = self.text * n_chunks
        if self.chat:
            o["choices"] = [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": finish}]
        else:
            o["choices"] = [{"index": 0, "text": text, "finish_reason": finish}]
        if usage_tokens is not None:
            o["usage"] = self._usage(usage_tokens)
        return o


def _prompt_tag_and_tokens(body: dict, chat: bool) -> tuple[str, int]:
    if chat:
        msgs = body.get("messages") or []
        text = " ".join(str(m.get("content", "")) for m in msgs if isinstance(m, dict))
        last = str(msgs[-1].get("content", "")) if msgs and isinstance(msgs[-1], dict) else ""
        return last[:120], len(text.split())
    p = body.get("prompt", "")
    if isinstance(p, list):
        return str(p[:16])[:120], len(p)
    return str(p)[:120], len(str(p).split())


async def _sleep_until(deadline_ns: int) -> None:
    d = deadline_ns - now_ns()
    if d > 0:
        await asyncio.sleep(d / 1e9)


class _Stream:
    """One lockstep response: what the clock writes for it, tick by tick."""

    __slots__ = ("resp", "b", "n_chunks", "k", "j", "start_k", "reasoning", "continuous", "log",
                 "fut", "dead")

    def __init__(self, resp, b: "Builder", n_chunks: int, reasoning: int, continuous: bool,
                 log: list, fut: asyncio.Future):
        self.resp, self.b, self.n_chunks, self.k = resp, b, n_chunks, b.k
        self.reasoning, self.continuous, self.log, self.fut = reasoning, continuous, log, fut
        self.j, self.start_k, self.dead = 0, 0, False


class DecodeClock:
    """A continuous-batching server's decode loop: one step every ``itl_ns`` on a fixed grid
    (epoch + k*itl_ns, epoch = the first join), each step writes the next content chunk of every
    running stream back to back. Runs only while streams wait or run; the grid stays."""

    def __init__(self, itl_ns: int, stats_max: int = 200_000):
        self.itl = int(itl_ns)
        self.epoch: Optional[int] = None
        self.k_next = 0                          # the next grid tick that may run
        self.pending: list[_Stream] = []         # joined, first tick not reached yet
        self.running: list[_Stream] = []
        self.task: Optional[asyncio.Task] = None
        self.ticks: collections.deque = collections.deque(maxlen=stats_max)

    def tick_at_or_after(self, t_ns: int) -> int:
        return max(0, -(-(t_ns - self.epoch) // self.itl))

    def join(self, s: _Stream, first_token_ns: int) -> None:
        if self.epoch is None:
            self.epoch = now_ns()
        s.start_k = self.tick_at_or_after(first_token_ns)
        self.pending.append(s)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self.pending or self.running:
            k = self.k_next
            if not self.running:                 # idle: sleep to the first waiting stream's tick
                k = max(k, min(s.start_k for s in self.pending))
            planned = self.epoch + k * self.itl
            await _sleep_until(planned)
            start = now_ns()
            if self.pending:
                still = []
                for s in self.pending:
                    (self.running if s.start_k <= k else still).append(s)
                self.pending = still
            n = 0
            for s in self.running:
                if s.dead:
                    continue
                n += 1
                await self._write(s)
            self.running = [s for s in self.running if not s.dead]
            end = now_ns()
            self.ticks.append([k, planned, start, end, n])
            self.k_next = max(k + 1, self.tick_at_or_after(end))   # late step: skip missed ticks

    @staticmethod
    async def _write(s: _Stream) -> None:
        j = s.j
        last = j == s.n_chunks - 1
        data = s.b.content("length" if last else None, j < s.reasoning,
                           (j + 1) * s.k if s.continuous else None)
        s.log.append([now_ns(), s.k])
        try:
            await s.resp.write(data)
        except (ConnectionError, RuntimeError) as e:
            s.dead = True
            if not s.fut.done():
                s.fut.set_exception(ConnectionResetError(str(e)))
            return
        s.j = j + 1
        if last:
            s.dead = True
            if not s.fut.done():
                s.fut.set_result(None)

    def describe(self, clear: bool = False) -> dict:
        out = {"itl_ns": self.itl, "epoch_ns": self.epoch, "running": len(self.running),
               "pending": len(self.pending), "ticks": list(self.ticks)}
        if clear:
            self.ticks.clear()
        return out


class Calibration:
    def __init__(self, defaults: dict, log: bool, log_max: int = 200_000):
        self.defaults = defaults
        self.log_on = log
        self.log: collections.deque = collections.deque(maxlen=log_max)
        self.seq = 0
        self._bodies: dict = {}
        self.clocks: dict[int, DecodeClock] = {}     # itl_ns -> the lockstep decode loop
        self.stale: set = set()                      # close_after "next": transports to drop at their next request

    async def generate(self, request: web.Request) -> web.StreamResponse:
        arrival = now_ns()
        if request.transport is not None and request.transport in self.stale:
            self.stale.discard(request.transport)    # close_after "next": unanswered, not logged
            request.transport.abort()
            return web.Response()
        chat = request.path.endswith("/chat/completions")
        try:
            body = json.loads(await request.read())
            if not isinstance(body, dict):
                raise ValueError("body is not an object")
        except ValueError as e:
            return web.json_response({"error": {"message": f"bad body: {e}", "code": 400}}, status=400)
        c = dict(self.defaults)
        c.update(body.get("calib") or {})
        self.seq += 1
        tag, pt = _prompt_tag_and_tokens(body, chat)
        k = int(c["tokens_per_chunk"])
        n_tok = c["tokens"] if c["tokens"] is not None else int(body.get("max_tokens") or 16)
        n_chunks = max(1, -(-int(n_tok) // k))
        opts = body.get("stream_options") or {}
        want_usage = bool(c["usage"]) and (not body.get("stream") or bool(opts.get("include_usage")))
        continuous = bool(c["usage"]) and bool(opts.get("continuous_usage_stats"))
        usage_tokens = c["usage_tokens"] if c["usage_tokens"] is not None else n_chunks * k
        peer = request.transport.get_extra_info("peername") if request.transport else None
        entry = {"seq": self.seq, "path": request.path, "prompt": tag, "arrival_ns": arrival,
                 "peer_port": peer[1] if peer else None,
                 "authorization": request.headers.get("Authorization"),
                 "chunks": [], "fault": c["fault"], "body": {kk: v for kk, v in body.items()
                                                             if kk not in ("prompt", "messages")}}
        if self.log_on:
            entry["x_headers"] = {kk: v for kk, v in request.headers.items()
                                  if kk.lower().startswith("x-")}
            if chat:             # the conversation as sent: each message's role, first 120 chars
                entry["messages"] = [{"role": m.get("role"), "content": str(m.get("content", ""))[:120]}
                                     for m in body.get("messages") or [] if isinstance(m, dict)]
            self.log.append(entry)
        fault = c["fault"]
        if fault in ("http500", "http429"):
            status = 500 if fault == "http500" else 429
            return web.json_response({"error": {"message": f"calibration {fault}", "code": status}},
                                     status=status, headers={"Retry-After": "1"} if status == 429 else None)
        b = Builder(chat, k, pt, str(c["text"]))
        ttft, itl = c["ttft_ms"] * 1e6, c["itl_ms"] * 1e6
        if not body.get("stream"):
            await _sleep_until(arrival + int(ttft + (n_chunks - 1) * itl))
            entry["chunks"].append([now_ns(), n_chunks * k])
            return web.json_response(b.full(n_chunks, "length", usage_tokens if c["usage"] else None))
        close_after = c["close_after"]
        if (ttft == 0 and itl == 0 and fault is None and not continuous and not c["reasoning_tokens"]
                and not close_after):
            return self._at_once(b, chat and c["role_first"], n_chunks, want_usage, usage_tokens, entry)
        resp = web.StreamResponse(headers={**SSE_HEADERS, "Keep-Alive": "timeout=5, max=100"}
                                  if close_after else SSE_HEADERS)
        await resp.prepare(request)
        log = entry["chunks"]
        stream: Optional[_Stream] = None
        try:
            if chat and c["role_first"]:
                await _sleep_until(arrival + int(c["role_ms"] * 1e6))
                data = b.role(0 if continuous else None)
                log.append([now_ns(), 0])
                await resp.write(data)
            if c["lockstep"] and fault is None and itl > 0:
                clock = self.clocks.get(int(itl))
                if clock is None:
                    clock = self.clocks[int(itl)] = DecodeClock(int(itl))
                stream = _Stream(resp, b, n_chunks, int(c["reasoning_tokens"]), continuous, log,
                                 asyncio.get_running_loop().create_future())
                clock.join(stream, arrival + int(ttft))
                await stream.fut                 # the clock wrote every content chunk
                n_chunks = 0                     # nothing left for the per-request loop below
            fault_at = int(c["fault_at"])
            for j in range(n_chunks):
                if fault is not None and j == fault_at:
                    if await self._fault(fault, c, request, resp, log):
                        return resp
                last = j == n_chunks - 1
                fr = "length" if last and fault != "no_done" else None
                data = b.content(fr, j < c["reasoning_tokens"], (j + 1) * k if continuous else None)
                await _sleep_until(arrival + int(ttft + j * itl))
                log.append([now_ns(), k])
                await resp.write(data)
            if fault == "no_done":
                await resp.write_eof()
                return resp
            if want_usage:
                log.append([now_ns(), 0])
                await resp.write(b.usage(usage_tokens))
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            if close_after and request.transport is not None:
                if close_after == "next":
                    self.stale.add(request.transport)
                else:
                    request.transport.close()    # after the buffered bytes: the client sees EOF
        except (ConnectionError, RuntimeError):
            entry["client_gone"] = True
        finally:
            if stream is not None:
                stream.dead = True               # cancelled or failed: the clock drops it
        return resp

    async def _fault(self, fault, c, request, resp, log) -> bool:
        """Inject a mid-stream fault; True when the response must end here."""
        if fault == "drop":
            request.transport.abort() if request.transport else None
            return True
        if fault == "malformed":
            log.append([now_ns(), 0])
            await resp.write(b"this line is not server-sent events\n\n")
        elif fault == "bad_json":
            log.append([now_ns(), 0])
            await resp.write(b'data: {"choices": [ not json\n\n')
        elif fault == "error_event":
            log.append([now_ns(), 0])
            await resp.write(_event({"error": {"object": "error", "message": "calibration error event",
                                               "type": "InternalServerError", "code": 500}}))
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
            return True
        elif fault == "noise":
            await resp.write(b": keep-alive\r\n\r\nid: 1\r\nretry: 50\r\ndata:\r\n\r\n")
        elif fault == "stall":
            await asyncio.sleep(float(c["stall_s"]))
        return False

    def _at_once(self, b: Builder, role: bool, n_chunks: int, want_usage: bool, usage_tokens: int,
                 entry: dict) -> web.Response:
        key = (b.chat, b.text, b.pt, role, n_chunks, want_usage, usage_tokens)
        body = self._bodies.get(key)
        if body is None:
            parts = [b.role()] if role else []
            parts += [b.content(None)] * (n_chunks - 1) + [b.content("length")]
            if want_usage:
                parts.append(b.usage(usage_tokens))
            parts.append(b"data: [DONE]\n\n")
            body = self._bodies[key] = b"".join(parts)
        if self.log_on:
            t = now_ns()
            entry["chunks"] = [[t, 0]] * role + [[t, b.k]] * n_chunks + [[t, 0]] * want_usage
        return web.Response(body=body, headers=SSE_HEADERS)

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [
            {"id": MODEL, "object": "model", "created": 1700000000, "owned_by": "calibration",
             "max_model_len": 4096}]}, headers={"Server": "calibration-server/1"})

    async def health(self, request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def get_clock(self, request: web.Request) -> web.Response:
        """The lockstep decode clocks' ticks: [k, planned_ns, start_ns, end_ns, streams] each."""
        clear = bool(request.query.get("clear"))
        return web.json_response([c.describe(clear) for c in self.clocks.values()])

    async def get_log(self, request: web.Request) -> web.Response:
        out = list(self.log)
        if request.query.get("clear"):
            self.log.clear()
        return web.json_response(out)


def make_app(defaults: Optional[dict] = None, log: bool = True) -> web.Application:
    cal = Calibration({**DEFAULTS, **(defaults or {})}, log)
    app = web.Application(client_max_size=64 * 2**20)
    app.router.add_post("/v1/completions", cal.generate)
    app.router.add_post("/v1/chat/completions", cal.generate)
    app.router.add_get("/v1/models", cal.models)
    app.router.add_get("/health", cal.health)
    app.router.add_get("/calib/log", cal.get_log)
    app.router.add_get("/calib/clock", cal.get_clock)
    resets = []                        # POST /reset_prefix_cache (vLLM dev mode): counted

    async def reset(request):
        resets.append(time.perf_counter_ns())
        return web.json_response({"ok": True})

    async def get_resets(request):
        return web.json_response(resets)
    app.router.add_post("/reset_prefix_cache", reset)
    app.router.add_get("/calib/resets", get_resets)
    app["calibration"] = cal
    return app


async def _serve(args: argparse.Namespace) -> None:
    defaults = {"ttft_ms": args.ttft_ms, "itl_ms": args.itl_ms, "tokens_per_chunk": args.tokens_per_chunk,
                "lockstep": args.lockstep}
    runner = web.AppRunner(make_app(defaults, log=not args.no_log), access_log=None,
                           handle_signals=True)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", args.port, backlog=4096)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    print(f"PORT {port}", flush=True)
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description="OpenAI-compatible calibration server (127.0.0.1 only)")
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--ttft-ms", type=float, default=0.0)
    ap.add_argument("--itl-ms", type=float, default=0.0)
    ap.add_argument("--tokens-per-chunk", type=int, default=1)
    ap.add_argument("--lockstep", action="store_true",
                    help="content chunks of all streams on one global decode clock (continuous batching)")
    ap.add_argument("--no-log", action="store_true", help="keep no per-request log (capacity runs)")
    ap.add_argument("--cpu", type=int, default=None, help="pin the server to this CPU")
    args = ap.parse_args(argv)
    if args.cpu is not None:
        os.sched_setaffinity(0, {args.cpu})
    try:
        asyncio.run(_serve(args))
    except KeyboardInterrupt:
        pass
    return 0


class CalibrationServer(PortServer):
    """``with CalibrationServer(ttft_ms=50) as s: s.url, s.log()`` — a subprocess on 127.0.0.1."""

    label = "calibration server"

    def __init__(self, ttft_ms: float = 0.0, itl_ms: float = 0.0, log: bool = True,
                 cpu: Optional[int] = None, startup_timeout_s: float = 20.0, lockstep: bool = False):
        argv = [sys.executable, "-m", "tests.support.calibration_server", "--port", "0",
                "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms)]
        if lockstep:
            argv.append("--lockstep")
        if not log:
            argv.append("--no-log")
        if cpu is not None:
            argv += ["--cpu", str(cpu)]
        super().__init__(argv, startup_timeout_s)

    def log(self, clear: bool = False) -> list[dict]:
        q = "?clear=1" if clear else ""
        with urllib.request.urlopen(f"{self.url}/calib/log{q}", timeout=30) as r:
            return json.loads(r.read())

    def clear(self) -> None:
        self.log(clear=True)

    def clock(self, clear: bool = False) -> list[dict]:
        """The lockstep decode clocks (GET /calib/clock): per tick [k, planned_ns, start_ns, end_ns, streams]."""
        q = "?clear=1" if clear else ""
        with urllib.request.urlopen(f"{self.url}/calib/clock{q}", timeout=30) as r:
            return json.loads(r.read())


if __name__ == "__main__":
    sys.exit(main())
