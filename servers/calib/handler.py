"""One request ─► one answer on known deadlines, every write logged with its time.

    POST /v1/completions | /v1/chat/completions ─► Calibration.generate
        settings = DEFAULTS ◄ command line ◄ the body's ``calib`` object
        arrival_ns ─► role chunk (chat) at arrival + role_ms
                   ─► content chunk j at arrival + ttft_ms + j*itl_ms   (ABSOLUTE deadlines)
                      or, lockstep, on the global DecodeClock (lockstep.py)
                   ─► usage chunk ─► [DONE]
        calib answer tool_call | json: the content chunks are a streamed tool call or JSON text
        (answers.py), on the same deadlines
        each data event written ─► log entry's chunks [write_ns, n_tokens] (GET /calib/log)
    ttft_ms = itl_ms = 0 and no fault: the whole answer at once from cached bytes (capacity runs)
"""
from __future__ import annotations

import asyncio
import collections
import hashlib
import json
from typing import Any, Optional

from aiohttp import web

from servers.calib import answers, faults, solve
from servers.calib.chunks import DONE, MODEL, SSE_HEADERS, Builder, now_ns, prompt_tag_and_tokens
from servers.calib.lockstep import DecodeClock, Stream, sleep_until
from servers.calib.images import images_of

DEFAULTS: dict[str, Any] = dict(ttft_ms=0.0, itl_ms=0.0, role_ms=0.0, tokens=None, tokens_per_chunk=1,
                                usage=True, usage_tokens=None, role_first=True, reasoning_tokens=0, text=" tok",
                                fault=None, fault_at=2, stall_s=30.0, lockstep=False,
                                close_after=False, answer=None, json="{}", tool_name=None,
                                rate_limit_first=0, retry_after="1")
ATTEMPTS_MAX = 100_000      # rate_limit_first: bodies counted at once (~10 MB), oldest forgotten


class Calibration:
    """The server's state: defaults, the request log, the lockstep clocks, stale connections."""

    def __init__(self, defaults: dict, log: bool, log_max: int = 200_000,
                 models: Optional[list] = None):
        self.defaults = defaults
        self.models = list(models) if models else None   # --models: the ids served (else any name)
        self.log_on = log
        self.log: collections.deque = collections.deque(maxlen=log_max)
        self.seq = 0
        self._bodies: dict = {}
        self.clocks: dict[int, DecodeClock] = {}     # itl_ns -> the lockstep decode loop
        self.stale: set = set()                      # close_after "next": transports to drop at their next request
        self.attempts: collections.OrderedDict = collections.OrderedDict()   # body hash -> tries

    def _rate_limited(self, raw: bytes, c: dict) -> Optional[web.Response]:
        """``rate_limit_first: k``: the first k attempts of a request (the same body bytes)
        are answered 429 with ``Retry-After: <retry_after>``; the k+1-th is served and the count
        forgotten, so a rerun of the same bodies is limited again (``forget_attempts``: a run
        that gave up; at most ATTEMPTS_MAX bodies are counted, the oldest dropped)."""
        k = int(c["rate_limit_first"] or 0)
        if k <= 0:
            return None
        key = hashlib.sha1(raw).digest()
        n = self.attempts.pop(key, 0) + 1
        if n > k:
            return None                 # served: forgotten (the same body next time: 429 again)
        self.attempts[key] = n
        while len(self.attempts) > ATTEMPTS_MAX:
            self.attempts.popitem(last=False)
        return web.json_response({"error": {"message": f"calibration rate limit (attempt {n} of "
                                            f"{k} refused)", "code": 429}}, status=429,
                                 headers={"Retry-After": str(c["retry_after"])})

    def forget_attempts(self) -> int:
        """POST /calib/reset: forget every rate_limit_first count; how many there were."""
        n = len(self.attempts)
        self.attempts.clear()
        return n

    def _entry(self, request: web.Request, body: dict, chat: bool, c: dict, arrival: int,
               tag: str) -> dict:
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
                entry["images"] = images_of(body.get("messages"))   # image parts (images.py)
            self.log.append(entry)
        return entry

    async def generate(self, request: web.Request) -> web.StreamResponse:
        arrival = now_ns()
        if request.transport is not None and request.transport in self.stale:
            self.stale.discard(request.transport)    # close_after "next": unanswered, not logged
            request.transport.abort()
            return web.Response()
        chat = request.path.endswith("/chat/completions")
        try:
            raw = await request.read()
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("body is not an object")
        except ValueError as e:
            return web.json_response({"error": {"message": f"bad body: {e}", "code": 400}}, status=400)
        model = body.get("model") if isinstance(body.get("model"), str) and body.get("model") else MODEL
        if self.models is not None and model not in self.models:     # vLLM's answer to a name it lacks
            return web.json_response({"error": {"message": f"The model `{model}` does not exist.",
                                                "type": "NotFoundError", "param": "model", "code": 404}},
                                     status=404)
        c = dict(self.defaults)
        c.update(body.get("calib") or {})
        self.seq += 1
        tag, pt = prompt_tag_and_tokens(body, chat)
        entry = self._entry(request, body, chat, c, arrival, tag)
        limited = self._rate_limited(raw, c)
        if limited is not None:
            entry["status"] = 429
            return limited
        k = int(c["tokens_per_chunk"])
        n_tok = c["tokens"] if c["tokens"] is not None else int(body.get("max_tokens") or 16)
        n_chunks = max(1, -(-int(n_tok) // k))
        why = answers.check(c, chat)           # answer: tool_call | json (answers.py)
        if why:
            return web.json_response({"error": {"message": why, "code": 400}}, status=400)
        solving = c["answer"] in solve.SOLVE        # arithmetic, right or wrong (solve.py)
        pieces = None
        if c["answer"] and body.get("stream"):
            pieces = (solve.events(c, body, chat, n_tok) if solving
                      else answers.events(c, body, n_chunks, self.seq))
        if pieces is not None:
            n_chunks = len(pieces)
        opts = body.get("stream_options") or {}
        want_usage = bool(c["usage"]) and (not body.get("stream") or bool(opts.get("include_usage")))
        continuous = bool(c["usage"]) and bool(opts.get("continuous_usage_stats"))
        usage_tokens = c["usage_tokens"] if c["usage_tokens"] is not None else n_chunks * k
        fault = c["fault"]
        if fault in ("http500", "http429"):
            status = 500 if fault == "http500" else 429
            return web.json_response({"error": {"message": f"calibration {fault}", "code": status}},
                                     status=status, headers={"Retry-After": "1"} if status == 429 else None)
        b = Builder(chat, k, pt, str(c["text"]), model)          # the requested model, echoed
        ttft, itl = c["ttft_ms"] * 1e6, c["itl_ms"] * 1e6
        if not body.get("stream"):
            await sleep_until(arrival + int(ttft + (n_chunks - 1) * itl))
            entry["chunks"].append([now_ns(), n_chunks * k])
            full = b.full(n_chunks, "length", usage_tokens if c["usage"] else None)
            if solving:
                text, fr = solve.whole(c, body, chat, n_tok)
                key = "message" if chat else "text"
                full["choices"][0].update({key: {"role": "assistant", "content": text}
                                           if chat else text, "finish_reason": fr})
                if c["usage"]:
                    full["usage"]["completion_tokens"] = len(text) * k
                    full["usage"]["total_tokens"] = pt + len(text) * k
            elif c["answer"]:
                msg, fr = answers.message(c, body, self.seq)
                full["choices"][0].update(message=msg, finish_reason=fr)
            return web.json_response(full)
        if (ttft == 0 and itl == 0 and fault is None and not continuous and not c["reasoning_tokens"]
                and not c["close_after"] and pieces is None):
            return self._at_once(b, chat and c["role_first"], n_chunks, want_usage, usage_tokens, entry)
        return await self._stream(request, c, b, chat, arrival, n_chunks, continuous, want_usage,
                                  usage_tokens, entry, pieces)

    async def _stream(self, request, c: dict, b: Builder, chat: bool, arrival: int, n_chunks: int,
                      continuous: bool, want_usage: bool, usage_tokens: int,
                      entry: dict, pieces: Optional[list] = None) -> web.StreamResponse:
        """The streamed answer on its absolute deadlines (or the lockstep clock), faults injected;
        ``pieces``: a structured answer's events (answers.py) instead of content chunks."""
        fault, close_after, k = c["fault"], c["close_after"], b.k
        ttft, itl = c["ttft_ms"] * 1e6, c["itl_ms"] * 1e6
        resp = web.StreamResponse(headers={**SSE_HEADERS, "Keep-Alive": "timeout=5, max=100"}
                                  if close_after else SSE_HEADERS)
        await resp.prepare(request)
        log = entry["chunks"]
        stream: Optional[Stream] = None
        try:
            if chat and c["role_first"]:
                await sleep_until(arrival + int(c["role_ms"] * 1e6))
                data = b.role(0 if continuous else None)
                log.append([now_ns(), 0])
                await resp.write(data)
            if c["lockstep"] and fault is None and itl > 0 and pieces is None:
                clock = self.clocks.get(int(itl))
                if clock is None:
                    clock = self.clocks[int(itl)] = DecodeClock(int(itl))
                stream = Stream(resp, b, n_chunks, int(c["reasoning_tokens"]), continuous, log,
                                asyncio.get_running_loop().create_future())
                clock.join(stream, arrival + int(ttft))
                await stream.fut                 # the clock wrote every content chunk
                n_chunks = 0                     # nothing left for the per-request loop below
            fault_at = int(c["fault_at"])
            for j in range(n_chunks):
                if fault is not None and j == fault_at:
                    if await faults.inject(fault, c, request, resp, log):
                        return resp
                last = j == n_chunks - 1
                fr = "length" if last and fault != "no_done" else None
                data = pieces[j] if pieces is not None else b.content(
                    fr, j < c["reasoning_tokens"], (j + 1) * k if continuous else None)
                await sleep_until(arrival + int(ttft + j * itl))
                log.append([now_ns(), k])
                await resp.write(data)
            if fault == "no_done":
                await resp.write_eof()
                return resp
            if want_usage:
                log.append([now_ns(), 0])
                await resp.write(b.usage(usage_tokens))
            await resp.write(DONE)
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

    def _at_once(self, b: Builder, role: bool, n_chunks: int, want_usage: bool, usage_tokens: int,
                 entry: dict) -> web.Response:
        key = (b.chat, b.text, b.pt, role, n_chunks, want_usage, usage_tokens)
        body = self._bodies.get(key)
        if body is None:
            parts = [b.role()] if role else []
            parts += [b.content(None)] * (n_chunks - 1) + [b.content("length")]
            if want_usage:
                parts.append(b.usage(usage_tokens))
            parts.append(DONE)
            body = self._bodies[key] = b"".join(parts)
        if self.log_on:
            t = now_ns()
            entry["chunks"] = [[t, 0]] * role + [[t, b.k]] * n_chunks + [[t, 0]] * want_usage
        return web.Response(body=body, headers=SSE_HEADERS)
