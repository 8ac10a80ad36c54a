"""One keep-alive socket of the wire pool: reads stamped, HTTP/1.1 framing by httptools, writes.

    mux says readable ─► Conn.on_readable (no coroutine per read), until the socket is drained:
        recvmsg(BUFSIZE, ANCBUFSIZE) ─► SCM_TIMESTAMPNS (REALTIME) − clock.offset_ns ─► t
                                        (no cmsg: t = the user-space time of the read)
        ─► httptools.HttpResponseParser.feed_data (C) ─► on_header / on_headers_complete /
           on_body (pieces joined once per read) ─► resp.reads.append((t, bytes)) / on_message_complete
    the awaiting coroutine (pool._exchange) wakes twice: ``headers_fut``, then ``done_fut``
    (message complete, EOF, error, timeout, close).

Framing: chunked, Content-Length, or read-until-close (no length, no chunking: EOF ends it);
``Connection: close`` / HTTP/1.0 come from ``should_keep_alive``; ``Keep-Alive: timeout=N``
shortens this connection's reuse window to N − 1 s. Endings: ``eof`` (an until-close body ends,
else a ``connection`` failure), ``failed`` (sets the response's error once; ``stale`` when a
REUSED connection failed before any byte of the answer: the pool may retry), ``close``.
"""
from __future__ import annotations

import asyncio
import socket
from typing import Optional

import httptools

from loadgen.client.wire import kstamp
from loadgen.client.wire.http1 import WireResponse
from loadgen.client.wire.mux import ReadMux
from loadgen.record import now_ns

BUFSIZE = 65536               # one recvmsg; level-triggered readiness brings the loop back for more
read_time = kstamp.read_time


def _wake(fut: Optional[asyncio.Future]) -> None:
    if fut is not None and not fut.done():
        fut.set_result(None)


class Conn:
    """One socket; the httptools parser's protocol for the exchange in flight. Watched by ``mux``
    from creation to ``close`` (an idle connection too: a server's FIN is seen before reuse);
    listed in ``conns`` (the pool's open connections) for as long."""

    def __init__(self, sock: socket.socket, key: tuple, loop: asyncio.AbstractEventLoop,
                 mux: ReadMux, clock: Optional[kstamp.ClockMap], keepalive_s: float, conns: set):
        self.sock, self.key, self.fd = sock, key, sock.fileno()
        self.loop, self.mux, self.clock, self.conns = loop, mux, clock, conns
        self.resp: Optional[WireResponse] = None
        self.active = False                 # an exchange is reading
        self.closed = False
        self.reused = False
        self.idle_since = 0.0
        self.keepalive_s = keepalive_s
        self.nbytes = 0
        self.t = 0
        self._hdrs: list = []
        self.parser: Optional[httptools.HttpResponseParser] = None
        self.until_close = False
        self.paused = False                 # not watched while a spill parses what is held
        self.headers_fut: Optional[asyncio.Future] = None
        self.done_fut: Optional[asyncio.Future] = None
        self.wfut: Optional[asyncio.Future] = None
        self._pieces: list = []             # body pieces of the read being parsed (one entry per read)
        self._piece = self._pieces.append
        conns.add(self)
        mux.watch(self.fd, self.on_readable)

    # ---------------------------------------------------------------- exchange
    def begin(self, resp: WireResponse) -> None:
        self.resp, self.active, self.nbytes, self._hdrs = resp, True, 0, []
        self.until_close = False
        self.paused = False
        resp.abort = self.abort
        self.parser = httptools.HttpResponseParser(self)
        self._pieces.clear()
        self.headers_fut = self.loop.create_future()
        self.done_fut = self.loop.create_future()

    def idle(self, now: float) -> None:
        """The exchange ended with the connection reusable: park it."""
        self.active, self.resp, self.parser = False, None, None
        self.headers_fut = self.done_fut = None
        self.idle_since = now

    def on_readable(self) -> None:
        recvmsg = self.sock.recvmsg
        offset = self.clock.offset_ns if self.clock is not None else None
        while True:
            try:
                data, anc, _flags, _addr = recvmsg(BUFSIZE, kstamp.ANCBUFSIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                return self.failed("connection", f"{type(e).__name__}: {e}", now_ns())
            tu = now_ns()
            if not self.active:                          # idle or finished: EOF or stray bytes
                return self.close()
            if not data:
                return self.eof(tu)
            resp = self.resp
            t = read_time(anc, offset, tu, resp)
            self.nbytes += len(data)
            resp.n_reads += 1
            self.t = t
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                self._flush(resp, t)
                return self.failed("protocol", "unexpected protocol upgrade", t)
            except httptools.HttpParserError as e:
                self._flush(resp, t)
                return self.failed("protocol", f"bad HTTP response: {e}", t)
            if self._pieces:                             # _flush, inlined: the hot path
                p = self._pieces
                body = p[0] if len(p) == 1 else b"".join(p)
                p.clear()
                resp.reads.append((t, body))
                resp.held += len(body)
            if not self.active:
                return
            if resp.headers_at_ns is None and self.nbytes > resp.max_header_bytes:
                # httptools has no header limit and builds a long value by concatenation
                return self.failed("too_large", f"response headers over {resp.max_header_bytes} "
                                   "bytes (api.limits.max_header_bytes)", t)
            if resp.held > resp.hold_bytes:
                return self._spill(resp, t)
            if len(data) < BUFSIZE:
                return

    def _spill(self, resp: WireResponse, t: int) -> None:
        """More body held than ``hold_bytes``: pause reading (TCP flow control throttles the
        server) while the transport parses what is held (``fill.catch_up_steps``), then resume.
        No spill hook (nothing to parse it into): the body is too large."""
        if resp.spilling:
            return
        if resp.on_spill is None:
            return self.failed("too_large", f"response body over {resp.hold_bytes} bytes held", t)
        resp.spilling = True
        self.paused = True
        self.mux.unwatch(self.fd, self.on_readable)
        resp.on_spill(resp, self.resume)

    def resume(self) -> None:
        """After a spill: read again (level-triggered: what waits in the socket comes at once)."""
        if self.resp is not None:
            self.resp.spilling = False
        if self.paused and not self.closed:
            self.paused = False
            self.mux.watch(self.fd, self.on_readable)

    def abort(self, kind: str, msg: str) -> None:
        """The record is decided (a limit, a protocol fault found by the stream step): stop."""
        if self.active and not self.closed:
            self.failed(kind, msg, now_ns())

    # ---------------------------------------------------------------- httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._hdrs.append((name, value))

    def on_headers_complete(self) -> None:
        resp = self.resp
        resp.status = status = self.parser.get_status_code()
        h: dict = {}
        raw = resp.raw_headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in self._hdrs]
        for n, v in raw:
            k = n.lower()
            h[k] = f"{h[k]}, {v}" if k in h else v
        resp.headers = h
        resp.headers_at_ns = self.t
        self.until_close = ("content-length" not in h and "chunked" not in h.get("transfer-encoding", "")
                            and status >= 200 and status not in (204, 304))
        ka = h.get("keep-alive")
        if ka:
            self._keep_alive_timeout(ka)
        _wake(self.headers_fut)

    def _keep_alive_timeout(self, value: str) -> None:
        for part in value.split(","):
            k, _, v = part.strip().partition("=")
            if k.lower() == "timeout":
                try:
                    self.keepalive_s = min(self.keepalive_s, max(float(v) - 1.0, 0.0))
                except ValueError:
                    pass

    def on_body(self, body: bytes) -> None:
        self._piece(body)          # joined once per read (chunked SSE: one call per event)

    def _flush(self, resp: WireResponse, t: int) -> None:
        """This read's body pieces as ONE stamped piece: every event of a read shares its stamp,
        and the stream step parses them in one pass (one split per read, not per event)."""
        p = self._pieces
        if p:
            body = p[0] if len(p) == 1 else b"".join(p)
            p.clear()
            resp.reads.append((t, body))
            resp.held += len(body)

    def on_message_complete(self) -> None:
        resp = self.resp
        resp.complete = True
        resp.end_at_ns = self.t
        resp.keep_alive = self.parser.should_keep_alive() and not self.until_close
        self.active = False
        _wake(self.headers_fut)
        _wake(self.done_fut)

    # ---------------------------------------------------------------- endings
    def eof(self, t: int) -> None:
        resp = self.resp
        if resp.status is not None and self.until_close and self.parser is not None:
            resp.complete, resp.end_at_ns = True, t           # read-until-close body: EOF ends it
            self.active = False
            self.close()
            return
        what = "before the response was complete" if self.nbytes else "before the status line"
        self.failed("connection", f"ServerDisconnected: the server closed the connection {what}", t)

    def failed(self, kind: str, msg: str, t: int) -> None:
        resp = self.resp
        if self.active and resp is not None and resp.error_kind is None:
            resp.error_kind, resp.error, resp.end_at_ns = kind, msg, t
            resp.stale = self.reused and self.nbytes == 0 and kind == "connection"
        self.active = False
        self.close()

    def timed_out(self, timeout_s: float) -> None:
        self.failed("timeout", f"no complete answer within {timeout_s:g} s", now_ns())

    def close(self) -> None:
        self.active = False
        if not self.closed:
            self.closed = True
            self.conns.discard(self)
            if not self.paused:
                self.mux.unwatch(self.fd, self.on_readable)
            self.loop.remove_writer(self.fd)
            self.sock.close()
        _wake(self.headers_fut)
        _wake(self.done_fut)
        if self.wfut is not None and not self.wfut.done():
            self.wfut.set_exception(ConnectionResetError("connection closed"))

    # ---------------------------------------------------------------- writing
    async def send(self, data: bytes) -> None:
        """Write all of ``data``; the first send syscall is the caller's (see WirePool._exchange)."""
        view = memoryview(data)
        fut = self.wfut = self.loop.create_future()

        def writable() -> None:
            nonlocal view
            try:
                n = self.sock.send(view)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                self.loop.remove_writer(self.fd)
                if not fut.done():
                    fut.set_exception(e)
                return
            view = view[n:]
            if not view:
                self.loop.remove_writer(self.fd)
                if not fut.done():
                    fut.set_result(None)

        self.loop.add_writer(self.fd, writable)
        try:
            await fut
        finally:
            self.wfut = None
