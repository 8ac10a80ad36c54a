"""The HTTP client: one request spec in, one filled ``Record`` out, never an exception.

    RequestSpec ─► body (model, prompt|messages, max_tokens, stream, stream_options, ignore_eos,
                         extra_body) ─► one pooled aiohttp session (limit = max_connections)
        sent_at_ns ─► response ─► each socket read stamped once (perf_counter_ns)
                   ─► SSEParser ─► JSON (every chunk) ─► StreamTally ─► Record.chunks [[t, n], ...]
        end ─► usage vs chunk counts, finish_reason, status / error_kind

The body, the headers and the record bookkeeping (``fail``, ``finish``, ...) are
``loadgen.client.request``'s, shared with the Locust engine; only the I/O is here.

Cancellation: ``execute(spec, rec)`` fills the caller's ``rec`` in place. When the task is
cancelled (run interrupted) the record gets ``status="cancelled"``, ``error_kind="cancelled"``,
``end_at_ns`` and everything measured so far, and the ``CancelledError`` is RE-RAISED (so
``asyncio`` timeouts and task groups keep working). The caller therefore creates the record first
(``rec = Client.new_record(spec)``), keeps it, and writes it whatever happens. ``execute`` writes
nothing itself.

Non-streaming requests have no chunks and no first-token time: only ``end_at_ns`` (E2E) and the
usage counts; a TTFT for them would be made up.

``sent_at_ns`` is stamped before aiohttp takes a pooled connection: size the pool to the in-flight
cap so no request waits for one. ``timeout_s`` is aiohttp's total timeout (send to last byte).
While any Client is open the cyclic GC runs rarely (``clientload.gc_hold``).

Stale keep-alive connections (llama.cpp's llama-server answers ``Keep-Alive: timeout=5`` and then
closes the socket after a streamed answer): a request that fails on a REUSED pooled connection
before any byte of the answer arrived (the write failed, or the peer closed before the status
line) never reached the server, so it is sent once more on a fresh connection. The record says
so: ``retries`` 1, ``first_sent_at_ns`` (the first attempt), ``retry_error``; ``sent_at_ns`` is
the attempt that reached the server and ``scheduled_at_ns`` is unchanged (TTFT from scheduled
carries the cost). Nothing else is retried. After the first such retry the client stops reusing
connections (``reuse_connections`` false: each request on its own connection, sent with
``Connection: close``): that server closes them anyway, and a connect is cheaper than a failed
write and a retry. A server that answers ``Connection: close`` is honoured by aiohttp itself.
Whether a connection was new is told by ``_Connector`` through a context variable of the
request's own task (no tracing hooks).
"""
from __future__ import annotations

import asyncio
import contextvars
import json
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import aiohttp
from yarl import URL

from loadgen.client.clientload import gc_hold, gc_release
from loadgen.record import Record, now_ns
from loadgen.client.request import (SNIPPET, apply_body, base_body, end_stream, endpoint_path, finish,
                             request_body, request_headers)
from loadgen.client.request import fail as _fail
from loadgen.client.sse import DONE, NamedEvent, SSEParser, StreamTally, _scan, error_message, loads as _loads

READ_BUFSIZE = 4 * 2**20      # aiohttp's default 64 KiB throttles long-context bodies (vllm #39963)
KEEPALIVE_S = 4.0             # below uvicorn's 5 s keep-alive: never reuse a socket the server closes
_json_loads = json.loads

# True once the current task's request opened a new connection (set by _Connector, read by
# Client.execute in the same task: coroutines awaited in one task share its context)
_new_connection: contextvars.ContextVar[bool] = contextvars.ContextVar("loadgen_new_connection",
                                                                       default=False)


class _Connector(aiohttp.TCPConnector):
    """aiohttp's TCPConnector, telling the request's task when its connection is a new one."""

    async def _create_connection(self, req, traces, timeout):  # type: ignore[override]
        proto = await super()._create_connection(req, traces, timeout)
        _new_connection.set(True)
        return proto


def stale_connection_error(e: BaseException) -> bool:
    """An error that, on a reused connection and before any response byte, means the server
    closed the socket before it saw the request: the write failed (``ClientOSError``: "Can not
    write request body", a reset, a broken pipe) or the peer closed before the status line
    (``ServerDisconnectedError`` with no partial response). A failed connect is not one."""
    if isinstance(e, aiohttp.ServerDisconnectedError):
        return isinstance(e.message, str)        # else a partial response message arrived
    if isinstance(e, aiohttp.ClientConnectorError):
        return False
    return isinstance(e, aiohttp.ClientOSError)


@dataclass
class RequestSpec:
    id: int
    phase: str                                  # "warmup" | "measured"
    prompt: Union[str, list]                    # text, token ids, or (chat) a list of messages
    prompt_tokens: Optional[int]                # the workload's own count
    max_tokens: int
    scheduled_at_ns: Optional[int] = None


@dataclass
class ClientConfig:
    base_url: str
    endpoint: str = "completions"               # "chat" | "completions"
    model: str = ""
    stream: bool = True
    ignore_eos: bool = True
    include_usage: bool = True
    continuous_usage: bool = False
    extra_body: dict = field(default_factory=dict)
    headers: dict = field(default_factory=dict)
    api_key: Optional[str] = None
    timeout_s: float = 600.0                    # per request, send to last byte
    connect_timeout_s: Optional[float] = 30.0
    drop_fields: tuple = ()                     # fields the server rejected (targets.probe)

    @classmethod
    def from_api(cls, api: Any, base_url: str, model: str, api_key: Optional[str],
                 drop_fields: tuple = ()) -> "ClientConfig":
        """From a ``loadgen.scenario.model.Api`` (the model name and key resolved by the caller)."""
        return cls(base_url=base_url, endpoint=api.endpoint, model=model, stream=api.stream,
                   ignore_eos=api.ignore_eos, include_usage=api.include_usage,
                   continuous_usage=api.continuous_usage, extra_body=dict(api.extra_body),
                   headers=dict(api.headers), api_key=api_key, timeout_s=api.timeout_s,
                   connect_timeout_s=api.connect_timeout_s, drop_fields=tuple(drop_fields))


def build_base_body(cfg: ClientConfig) -> dict:
    """Everything but the prompt and max_tokens (``loadgen.client.request.base_body``)."""
    return base_body(cfg, cfg.model, cfg.drop_fields)


class Client:
    """``async with Client(cfg, max_connections) as c: rec = await c.execute(spec, rec)``.

    ``max_connections`` bounds the pool (set it to the in-flight cap); 0 or None means unbounded.
    One session, keep-alive connections, no per-request connects once warm.
    """

    def __init__(self, cfg: ClientConfig, max_connections: Optional[int]):
        if cfg.endpoint not in ("chat", "completions"):
            raise ValueError(f"api.endpoint: expected 'chat' or 'completions', got {cfg.endpoint!r}")
        self.cfg = cfg
        self.max_connections = max_connections or 0
        self.url = cfg.base_url.rstrip("/") + endpoint_path(cfg.endpoint)
        self._url = URL(self.url)               # parsed once, not per request
        self._chat = cfg.endpoint == "chat"
        self._base = build_base_body(cfg)
        # continuous usage stats only where the body still asks for them
        opts = self._base.get("stream_options")
        self._continuous = isinstance(opts, dict) and bool(opts.get("continuous_usage_stats"))
        self._headers = request_headers(cfg, cfg.api_key)
        self._session: Optional[aiohttp.ClientSession] = None
        self._fresh: Optional[aiohttp.ClientSession] = None   # retries: never a pooled socket
        self.first_response_headers: Optional[dict] = None  # of the first answer (for sut.json)
        self.retries = 0                        # stale-connection retries so far
        self.reuse_connections = True           # False after the first (see module doc)

    def _new_session(self, connector: aiohttp.BaseConnector) -> aiohttp.ClientSession:
        timeout = aiohttp.ClientTimeout(total=self.cfg.timeout_s, connect=self.cfg.connect_timeout_s)
        return aiohttp.ClientSession(connector=connector, timeout=timeout,
                                     read_bufsize=READ_BUFSIZE, max_field_size=65536,
                                     trust_env=False, raise_for_status=False)

    async def __aenter__(self) -> "Client":
        self._session = self._new_session(_Connector(
            limit=self.max_connections, limit_per_host=0, keepalive_timeout=KEEPALIVE_S,
            ttl_dns_cache=None))
        gc_hold()
        return self

    async def __aexit__(self, *exc) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
            if self._fresh is not None:
                await self._fresh.close()
                self._fresh = None
            gc_release()

    def describe(self) -> dict:
        """What the client did beyond sending requests (for meta.json)."""
        return {"stale_connection_retries": self.retries,
                "reuse_connections": self.reuse_connections}

    async def _post(self, data: bytes, rec: Record) -> aiohttp.ClientResponse:
        """POST; on a stale pooled connection (see module doc) once more on a fresh one."""
        session = self._fresh or self._session
        _new_connection.set(False)
        rec.sent_at_ns = now_ns()
        try:
            return await session.post(self._url, data=data, headers=self._headers)
        except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as e:
            if _new_connection.get() or not stale_connection_error(e):
                raise
            err = f"{type(e).__name__}: {e}"
        rec.retries += 1
        rec.first_sent_at_ns, rec.retry_error = rec.sent_at_ns, err[:SNIPPET]
        self.retries += 1
        self.reuse_connections = False
        if self._fresh is None:   # from now on no pooling: each request on its own connection
            self._fresh = self._new_session(_Connector(force_close=True, limit=0,
                                                       ttl_dns_cache=None))
        _new_connection.set(False)
        rec.sent_at_ns = now_ns()
        return await self._fresh.post(self._url, data=data, headers=self._headers)

    @staticmethod
    def new_record(spec: RequestSpec) -> Record:
        return Record(id=spec.id, phase=spec.phase, scheduled_at_ns=spec.scheduled_at_ns,
                      requested_output_tokens=spec.max_tokens, workload_prompt_tokens=spec.prompt_tokens)

    def body(self, spec: RequestSpec) -> bytes:
        return request_body(self._base, self._chat, spec.prompt, spec.max_tokens)

    async def execute(self, spec: RequestSpec, rec: Optional[Record] = None) -> Record:
        """Send one request; fill and return ``rec`` (created if not given). See module doc."""
        if rec is None:
            rec = self.new_record(spec)
        tally = StreamTally(self._continuous)
        try:
            try:
                data = self.body(spec)
            except (TypeError, ValueError) as e:
                _fail(rec, "client", f"cannot build the request body: {e}")
                return rec
            if self._session is None:
                _fail(rec, "client", "Client used outside 'async with'")
                return rec
            async with await self._post(data, rec) as resp:
                if self.first_response_headers is None:
                    self.first_response_headers = dict(resp.headers)
                rec.http_status = resp.status
                if resp.status >= 300:
                    snippet = (await resp.content.read(SNIPPET)).decode("utf-8", "replace")
                    _fail(rec, "http", f"HTTP {resp.status}: {' '.join(snippet.split())}")
                elif self.cfg.stream and resp.content_type != "application/json":
                    await self._read_stream(resp, rec, tally)
                else:
                    await self._read_body(resp, rec, tally)
        except asyncio.CancelledError:
            if rec.status != "ok":              # complete before the interrupt: stays ok
                rec.status, rec.error_kind = "cancelled", "cancelled"
                rec.error = "the run was interrupted before the request ended"
            if rec.end_at_ns is None:
                rec.end_at_ns = now_ns()
            finish(rec, tally, spec.prompt_tokens)
            raise
        except asyncio.TimeoutError:
            if rec.status == "pending":
                _fail(rec, "timeout", f"no complete answer within {self.cfg.timeout_s:g} s")
        except (aiohttp.ClientConnectionError, aiohttp.ClientPayloadError, OSError) as e:
            if rec.status == "pending":
                _fail(rec, "connection", f"{type(e).__name__}: {e}")
        except Exception as e:  # a failed request is a record, whatever raised
            if rec.status == "pending":
                _fail(rec, "client", f"{type(e).__name__}: {e}")
        finish(rec, tally, spec.prompt_tokens)
        return rec

    async def _read_stream(self, resp: aiohttp.ClientResponse, rec: Record, tally: StreamTally) -> None:
        parser = SSEParser()
        feed = parser.feed
        add = tally.add
        append = rec.chunks.append
        readany = resp.content.readany
        clock = now_ns
        scan = _scan
        done = eof = False
        ev: Any = None
        try:
            while not eof:
                data = await readany()
                t = clock()                     # one stamp per socket read, shared by its events
                if data:
                    events = feed(data)
                else:
                    events = parser.finish()
                    eof = True
                for ev in events:
                    if ev.__class__ is bytes:
                        try:                    # sse.loads, inlined: the C scanner, else json.loads
                            s = ev.decode()
                            obj, end = scan(s, 0)
                            if end != len(s):
                                obj = _json_loads(ev)
                        except (StopIteration, ValueError):
                            if not ev:              # "data:" with nothing: not a chunk, skip it
                                continue
                            obj = _json_loads(ev)   # exact: raises ValueError if really bad
                        n = add(obj)
                        if n < 0:               # an error object inside the 200 stream
                            append([t, 0])
                            return _fail(rec, "server_error", error_message(tally.error), t)
                        append([t, n])
                    elif ev is DONE:
                        if not done:
                            done = True
                            rec.end_at_ns = t
                            rec.status = "ok"   # a later timeout or drop does not undo it
                    elif ev.__class__ is NamedEvent:
                        if ev.event == "error":
                            append([t, 0])
                            return _fail(rec, "server_error", ev.data.decode("utf-8", "replace"), t)
                        append([t, max(add(_loads(ev.data)), 0)])
                    else:
                        return _fail(rec, "malformed", f"not server-sent events: {ev.line!r}", t)
        except ValueError as e:  # json.loads / a chunk that is not an object
            what = ev[:120] if isinstance(ev, bytes) else ev
            return _fail(rec, "malformed", f"bad JSON in stream ({e}): {what!r}", clock())
        end_stream(rec, tally, done, t)

    async def _read_body(self, resp: aiohttp.ClientResponse, rec: Record, tally: StreamTally) -> None:
        raw = await resp.read()
        t = rec.end_at_ns = now_ns()
        apply_body(rec, tally, raw, t)
