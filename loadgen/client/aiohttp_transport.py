"""``client.Client``'s transport for ``https://`` targets (and ``LOADGEN_HTTP=aiohttp``): aiohttp.

    send(data, headers, rec, tally)
        sent_at_ns ─► one pooled aiohttp session (limit = max_connections) ─► response
        ─► each socket read stamped once (perf_counter_ns, user space, when the loop got to it)
        ─► stream_step.StreamStep (the one stream step: SSE, JSON, tally, limits) ─► Record.chunks

``sent_at_ns`` is stamped before aiohttp takes a pooled connection: size the pool to the in-flight
cap so no request waits for one. ``timeout_s`` is aiohttp's total timeout (send to last byte).

Stale keep-alive connections (llama.cpp's llama-server answers ``Keep-Alive: timeout=5`` and then
closes the socket after a streamed answer): a request that fails on a REUSED pooled connection
before any byte of the answer arrived (the write failed, or the peer closed before the status
line) never reached the server, so it is sent once more on a fresh connection. The record says
so: ``retries`` 1, ``first_sent_at_ns`` (the first attempt), ``retry_error``; ``sent_at_ns`` is
the attempt that reached the server and ``scheduled_at_ns`` is unchanged (TTFT from scheduled
carries the cost). Nothing else is retried. After the first such retry the transport stops
reusing connections (``reuse_connections`` false: each request on its own connection, sent with
``Connection: close``): that server closes them anyway, and a connect is cheaper than a failed
write and a retry. A server that answers ``Connection: close`` is honoured by aiohttp itself.
Whether a connection was new is told by ``_Connector`` through a context variable of the
request's own task (no tracing hooks). Shared with the wire drivers (loadgen.client.http1): the
redirect hops (``redirects.route``), the stale count and stop-reuse (``ConnPolicy.stale``), load.cancel's
hang-up deadline (``hangup_deadline``, armed as ``asyncio.timeout``) and the [DONE] grace.
"""
from __future__ import annotations

import asyncio
import contextvars
from typing import Optional

import aiohttp
from yarl import URL

from loadgen.client.hangup import abort
from loadgen.client.http1.policy import (DONE_GRACE, KEEPALIVE_S, ConnPolicy, PolicyCounts,
                                         hangup_deadline)
from loadgen.client.http1 import redirects
from loadgen.client.request import SNIPPET
from loadgen.client.request import fail as _fail
from loadgen.client.sse import StreamTally
from loadgen.client.stream_step import DEFAULT_LIMITS, Limits, StreamStep, body_too_large
from loadgen.client import settle
from loadgen.client.http1.message import WireResponse, connect_failure
from loadgen.record import Record, now_ns

READ_BUFSIZE = 4 * 2**20      # aiohttp's default 64 KiB throttles long-context bodies (vllm #39963)

# True once the current task's request opened a new connection (set by _Connector, read by
# AiohttpTransport._post in the same task: coroutines awaited in one task share its context)
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


class _Response(aiohttp.ClientResponse):
    """aiohttp's response, with interim 1xx answers (which aiohttp skips without bound) counted
    against ``max_header_bytes`` as the wire exchange counts them: a 1xx storm is ``too_large``."""

    max_header_bytes = 64 * 2**10

    async def start(self, connection):  # type: ignore[override]
        proto = connection.protocol
        read, seen, cap, info = proto.read, 0, self.max_header_bytes, self.request_info

        async def counted():
            nonlocal seen
            message, payload = await read()
            if 100 <= message.code < 200 and message.code != 101:
                seen += 16 + sum(len(k) + len(v) + 4 for k, v in message.raw_headers)
                if seen > cap:
                    raise aiohttp.ClientResponseError(info, (), message=(
                        f"interim 1xx answers over {cap} bytes: too long"))
            return message, payload

        proto.read = counted
        try:
            return await super().start(connection)
        finally:
            del proto.read


class AiohttpTransport(PolicyCounts):
    name = "aiohttp"

    def __init__(self, url: str, max_connections: int, timeout_s: float,
                 connect_timeout_s: Optional[float], stream: bool, limits: Limits = DEFAULT_LIMITS,
                 follow_redirects: str = "never"):
        self._url = URL(url)                     # parsed once, not per request
        self.limits, self.follow_redirects = limits, follow_redirects
        self.max_connections, self.stream = max_connections, stream
        self.timeout_s, self.connect_timeout_s = timeout_s, connect_timeout_s
        self._session: Optional[aiohttp.ClientSession] = None
        self._fresh: Optional[aiohttp.ClientSession] = None   # retries: never a pooled socket
        self.first_response_headers: Optional[dict] = None    # of the first answer (sut.json)
        self.policy = ConnPolicy(KEEPALIVE_S)    # the stale count; reuse False after the first
        self._response_class = type("Response", (_Response,),
                                    {"max_header_bytes": limits.max_header_bytes})

    def _new_session(self, connector: aiohttp.BaseConnector) -> aiohttp.ClientSession:
        timeout = aiohttp.ClientTimeout(total=self.timeout_s, connect=self.connect_timeout_s)
        return aiohttp.ClientSession(connector=connector, timeout=timeout,
                                     read_bufsize=READ_BUFSIZE,
                                     max_field_size=self.limits.max_header_bytes,
                                     max_line_size=self.limits.max_header_bytes,
                                     trust_env=False, raise_for_status=False,
                                     response_class=self._response_class)

    async def open(self) -> None:
        self._session = self._new_session(_Connector(
            limit=self.max_connections, limit_per_host=0, keepalive_timeout=KEEPALIVE_S,
            ttl_dns_cache=None))

    async def close(self) -> None:
        for s in (self._session, self._fresh):
            if s is not None:
                await s.close()
        self._session = self._fresh = None

    def describe(self) -> dict:
        return {"transport": "aiohttp", "stamp_source": "user",
                "clock": {"method": "perf_counter_ns when the event loop got each read"},
                "coalesced_reads": None, "stale_connection_retries": self.retries,
                "reuse_connections": self.reuse_connections}

    async def _post(self, data: bytes, headers: dict, rec: Record, url: URL) -> aiohttp.ClientResponse:
        """POST; on a stale pooled connection (see module doc) once more on a fresh one."""
        session = self._fresh or self._session
        _new_connection.set(False)
        rec.sent_at_ns = now_ns()
        try:
            return await session.post(url, data=data, headers=headers, allow_redirects=False)
        except (aiohttp.ClientOSError, aiohttp.ServerDisconnectedError) as e:
            if _new_connection.get() or not stale_connection_error(e):
                raise
            err = f"{type(e).__name__}: {e}"
        rec.retries += 1
        rec.first_sent_at_ns, rec.retry_error = rec.sent_at_ns, err[:SNIPPET]
        self.policy.stale()
        if self._fresh is None:   # from now on no pooling: each request on its own connection
            self._fresh = self._new_session(_Connector(force_close=True, limit=0,
                                                       ttl_dns_cache=None))
        _new_connection.set(False)
        rec.sent_at_ns = now_ns()
        return await self._fresh.post(url, data=data, headers=headers, allow_redirects=False)

    async def send(self, data: bytes, headers: dict, rec: Record, tally: StreamTally,
                   hangup=None) -> None:
        """One POST into ``rec`` (all but ``request.finish``); raises only CancelledError and
        what no rule here names (the Client makes that a ``client`` error). Redirects are
        never followed by aiohttp: ``redirects.route`` decides (see there).
        ``hangup`` (load.cancel): a token hang-up counted by the stream step (settled: the
        response closed); a timed hang-up: ``asyncio.timeout`` from the send, then ``aborted``."""
        t = now_ns()
        due = hangup_deadline(hangup, t, t)  # from this send, or the first one (api.retry)
        if due is None:
            return await self._send(data, headers, rec, tally, hangup)
        try:
            async with asyncio.timeout(due.left_s) as cm:
                await self._send(data, headers, rec, tally, hangup)
        except TimeoutError:
            if not cm.expired():
                raise
            if rec.status == "pending":
                abort(rec, due.message, now_ns())

    async def _send(self, data: bytes, headers: dict, rec: Record, tally: StreamTally,
                    hangup) -> None:
        hops = redirects.route(str(self._url), self.follow_redirects)
        try:
            for n, url in enumerate(hops):
                async with await self._post(data, headers, rec,
                                            URL(url) if n else self._url) as resp:
                    if self.first_response_headers is None:
                        self.first_response_headers = dict(resp.headers)
                    if not hops.answered(resp.status, resp.headers.get("Location")):
                        await self._answer(resp, rec, tally, hangup)
        except asyncio.TimeoutError:
            if rec.status == "pending":
                _fail(rec, "timeout", f"no complete answer within {self.timeout_s:g} s")
        except (aiohttp.ClientResponseError, aiohttp.ClientPayloadError) as e:
            if rec.status == "pending":
                _fail(rec, *protocol_failure(e))
        except (aiohttp.ClientConnectionError, OSError) as e:
            if rec.status == "pending":
                _fail(rec, *connect_failure(e))

    async def _answer(self, resp: aiohttp.ClientResponse, rec: Record, tally: StreamTally,
                      hangup=None) -> None:
        """The wire exchange's settlement rules (``client.settle``: status, redirect, whole body)
        over what aiohttp read; a stream goes to the one stream step as it comes."""
        status = resp.status
        wr = WireResponse(status=status, headers={k.lower(): v for k, v in resp.headers.items()
                                                  if k.lower() != "content-encoding"})
        if settle.error_body(status):
            wr.reads.append((now_ns(), await resp.content.read(SNIPPET)))     # the snippet
        if settle.status_failure(wr, rec):
            return
        if self.stream and wr.sse_body():
            return await read_stream(resp, rec, tally, self.limits, hangup)
        cap = self.limits.max_body_bytes
        if resp.content_length is not None and resp.content_length > cap:   # at once, as wire
            resp.close()
            return _fail(rec, "too_large", f"{body_too_large(cap + 1, self.limits)}: "
                         f"Content-Length {resp.content_length}")
        read, raw = resp.content.read, b""
        while len(raw) <= cap:                          # to EOF, never past cap + 1 bytes
            piece = await read(cap + 1 - len(raw))
            if not piece:
                break
            raw += piece
        wr.reads.append((now_ns(), raw))                # aiohttp decoded any Content-Encoding
        wr.complete, wr.end_at_ns = True, wr.reads[-1][0]
        settle.whole_body(wr, rec, tally, self.limits)


def protocol_failure(e: BaseException) -> tuple:
    """(kind, message) for aiohttp's parse errors, the wire transport's taxonomy: a header over
    the limit is ``too_large``; a body that ended short of its Content-Length is ``connection``
    (the peer closed early, as the wire transport sees it); anything else malformed from the
    server is ``protocol``."""
    text = f"{type(e).__name__}: {e}"
    cause = e.__cause__ or e.__context__
    name = type(cause).__name__ if cause is not None else ""
    low = text.lower()
    if "LineTooLong" in name or "got more than" in low or "too long" in low or "too many headers" in low:
        return "too_large", f"response headers over the limit (api.limits.max_header_bytes): {text}"
    if "ContentLengthError" in name or "ContentLengthError" in text or "Not enough data" in text:
        return "connection", f"ServerDisconnected: the server closed the connection before the " \
                             f"response was complete ({text})"
    return "protocol", f"bad HTTP response: {text}"


async def read_stream(resp: aiohttp.ClientResponse, rec: Record, tally: StreamTally,
                      limits: Limits = DEFAULT_LIMITS, hangup=None) -> None:
    """Every read stamped as the loop gets it and fed to the one stream step at once (aiohttp
    has already decoded any Content-Encoding)."""
    step = StreamStep(rec, tally, limits, None, hangup)
    readany = resp.content.readany
    clock = now_ns
    feed = step.feed
    t = clock()
    while True:
        data = await readany()
        t = clock()                         # one stamp per socket read, shared by its events
        if not data:
            break
        if feed(t, data):                   # settled: failed (error event, protocol, limit)
            resp.close()                    # stop reading an endless or broken stream
            return
        if step.done:                       # [DONE] ends the record: the message end, briefly
            if not resp.content.at_eof():
                try:
                    await asyncio.wait_for(_drain(readany), DONE_GRACE.left_s)
                except asyncio.TimeoutError:
                    resp.close()            # the body stays open: not reused
            break
    step.end(t)


async def _drain(readany) -> None:
    while await readany():
        pass
