"""One keep-alive socket of the wire pool: the asyncio driver of exchange.Exchange.

    mux says readable ─► Conn.on_readable (no coroutine per read), until the socket is drained:
        recvmsg(BUFSIZE, ANCBUFSIZE) ─► SCM_TIMESTAMPNS (REALTIME) − clock.offset_ns ─► t
                                        (no cmsg: t = the user-space time of the read)
        ─► Exchange.feed(t, bytes) (every HTTP/1.1 rule: exchange.py) ─► GOING | DONE | FAILED |
           SPILL (pause reading while fill.catch_up_steps parses what is held, then resume)
    the awaiting coroutine (pool._exchange) wakes twice: ``headers_fut``, then ``done_fut``
    (the exchange is over: complete, EOF, failure, timeout, close).

Close order: unwatch (mux) and remove the writer BEFORE the socket closes (descriptor numbers
are reused at once); a closed Conn's late callbacks (a read, a resume, an abort, a timer) never
touch the number again. A connection the peer closed before the request went out ends that
request as ``connection`` (``stale`` when it was a reused one: the pool may retry).
"""
from __future__ import annotations

import asyncio
import socket
from functools import partial
from typing import Optional

from loadgen.client import kernel_stamps
from loadgen.client.http1.exchange import GOING, SPILL, Exchange
from loadgen.client.http1.policy import DONE_GRACE, ConnPolicy
from loadgen.client.http1.message import DEFAULT_ASK, Ask, WireResponse
from loadgen.client.wire.read_mux import ReadMux
from loadgen.record import now_ns

BUFSIZE = 65536               # one recvmsg; level-triggered readiness brings the loop back for more
read_time = kernel_stamps.read_time


def _wake(fut: Optional[asyncio.Future]) -> None:
    if fut is not None and not fut.done():
        fut.set_result(None)


class Conn:
    """One socket, one Exchange at a time. Watched by ``mux`` from creation to ``close`` (an
    idle connection too: a server's FIN is seen before reuse); in ``conns`` for as long."""

    def __init__(self, sock: socket.socket, key: tuple, loop: asyncio.AbstractEventLoop,
                 mux: ReadMux, clock: Optional[kernel_stamps.ClockMap], keepalive_s: float, conns: set):
        self.sock, self.key, self.fd = sock, key, sock.fileno()
        self.loop, self.mux, self.clock, self.conns = loop, mux, clock, conns
        self.resp: Optional[WireResponse] = None
        self.ask: Ask = DEFAULT_ASK
        self.spill = None                    # the transport's: parse what is held (module doc)
        self.ex: Optional[Exchange] = None
        self.active = self.closed = self.reused = self.paused = False
        self.idle_since = 0.0
        self.keepalive_s = keepalive_s
        self.headers_fut: Optional[asyncio.Future] = None
        self.done_fut: Optional[asyncio.Future] = None
        self.wfut: Optional[asyncio.Future] = None
        self._grace: Optional[asyncio.TimerHandle] = None
        self._hdr_wait = False
        self._swept = -1                     # the response's read count at the last sweep
        conns.add(self)
        mux.watch(self.fd, self.on_readable)

    # ---------------------------------------------------------------- exchange
    def begin(self, resp: WireResponse, ask: Ask = DEFAULT_ASK, spill=None,
              make_step=None) -> None:
        """One exchange into ``resp``, bounded as ``ask`` says. ``spill(resp, resume, abort,
        finish)``: the transport parses what is held (``abort(kind, msg)`` stops the exchange,
        ``finish()`` says [DONE] was seen; both no-ops once it is over); ``make_step``: the
        stream parsed inline (load.cancel's token count), or None."""
        self.resp, self.active, self.paused = resp, True, False
        self.ask, self.spill = ask, spill
        self.ex = Exchange(resp, self.reused, make_step, ask)
        self.headers_fut = self.loop.create_future()
        self.done_fut = self.loop.create_future()
        self._hdr_wait = True
        self._swept = -1

    def idle(self, now: float) -> None:
        """The exchange ended with the connection reusable: park it."""
        self.active, self.resp, self.ex, self.spill = False, None, None, None
        self.headers_fut = self.done_fut = None
        self.idle_since = now

    def on_readable(self) -> None:
        if self.closed:
            return
        recvmsg = self.sock.recvmsg
        offset = self.clock.offset_ns if self.clock is not None else None
        ex, resp = self.ex, self.resp
        while True:
            try:
                data, anc, _flags, _addr = recvmsg(BUFSIZE, kernel_stamps.ANCBUFSIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                return self.failed("connection", f"{type(e).__name__}: {e}", now_ns())
            tu = now_ns()
            if not self.active:                          # idle or finished: EOF or stray bytes
                return self.close()
            if not data:
                ex.eof(tu)
                return self._over()
            r = ex.feed(read_time(anc, offset, tu, resp), data)
            if self._hdr_wait and resp.headers_at_ns is not None:
                self._hdr_wait = False
                _wake(self.headers_fut)
            if r != GOING:
                if r == SPILL:
                    return self._spill()
                return self._over()
            if ex.step is not None and ex.step.done:     # inline step (load.cancel): [DONE]
                self._done_seen(resp)
            if len(data) < BUFSIZE:
                return

    def _over(self) -> None:
        """The exchange is over (complete, failed): stop reading it; reuse is the pool's call."""
        self.active = False
        if self._grace is not None:
            self._grace.cancel()
            self._grace = None
        self.keepalive_s = ConnPolicy.window(self.keepalive_s, self.ex.keepalive_s)
        if not self.resp.keep_alive or not self.resp.complete:
            return self.close()
        _wake(self.headers_fut)
        _wake(self.done_fut)

    def _spill(self) -> None:
        """More body held than ``hold_bytes``: pause reading (TCP flow control throttles the
        server) while the transport parses what is held (``fill.catch_up_steps``), then resume.
        No spill hook (nothing to parse it into): the body is too large."""
        resp = self.resp
        if self.spill is None:
            self.ex.fail("too_large", f"response body over {self.ask.hold_bytes} bytes held",
                         now_ns())
            return self._over()
        if not self.paused:                  # also while a sweep's catch-up runs: it resumes
            self.paused = True
            self.mux.unwatch(self.fd, self.on_readable)
        if not resp.spilling:
            self._hand_over(resp)

    def _hand_over(self, resp: WireResponse) -> None:
        """What ``resp`` holds to the transport's parser; it resumes reading when done."""
        resp.spilling = True
        self.spill(resp, partial(self.resume, resp), partial(self._abort, resp),
                   partial(self._done_seen, resp))

    def resume(self, resp: Optional[WireResponse] = None) -> None:
        """After a spill or a catch-up of ``resp``: read again (level-triggered: what waits in
        the socket comes at once); a late call for an earlier exchange changes nothing."""
        resp = resp or self.resp
        if resp is not None:
            resp.spilling = False
        if self.paused and not self.closed and resp is self.resp:
            self.paused = False
            self.mux.watch(self.fd, self.on_readable)

    def sweep(self) -> None:
        """The pool's sweep: a stream that read nothing since the last sweep parses what it
        holds (a stream still arriving is left to its end: no parsing beside its reads)."""
        n = self.resp.n_reads
        if n == self._swept:
            self.catch_up()
        self._swept = n

    def catch_up(self) -> None:
        """Parse what is held so far without pausing: a stream that settled or had its [DONE]
        while the socket stays open (and quiet) ends within a sweep or two, not at the timeout."""
        resp = self.resp
        if (self.active and self.ask.stream and self.spill is not None and not resp.spilling
                and resp.reads):
            self._hand_over(resp)

    def _abort(self, resp: WireResponse, kind: str, msg: str) -> None:
        """The record is decided (a limit, a protocol fault found by the stream step): stop."""
        if self.resp is resp and self.active and not self.closed:
            self.failed(kind, msg, now_ns())

    def _done_seen(self, resp: WireResponse) -> None:
        """The stream had its [DONE]: the message end is awaited ``DONE_GRACE`` at most (the
        policy's deadline, armed here)."""
        if self.resp is resp and self.active and not self.closed and self._grace is None:
            self._grace = self.loop.call_later(DONE_GRACE.left_s, self._grace_over, self.ex)

    def _grace_over(self, ex: Exchange) -> None:
        self._grace = None
        if self.active and self.ex is ex:
            ex.finish_after_done()
            self._over()

    # ---------------------------------------------------------------- endings
    def failed(self, kind: str, msg: str, t: int) -> None:
        if self.active and self.ex is not None:
            self.ex.fail(kind, msg, t)
        self.close()

    def timed_out(self, timeout_s: float) -> None:
        self.failed("timeout", f"no complete answer within {timeout_s:g} s", now_ns())

    def close(self) -> None:
        self.active = False
        self.spill = None
        if not self.closed:
            self.closed = True
            self.conns.discard(self)
            if not self.paused:
                self.mux.unwatch(self.fd, self.on_readable)      # before the close: fd reuse
            self.loop.remove_writer(self.fd)
            if self._grace is not None:
                self._grace.cancel()
                self._grace = None
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
            if self.closed:
                return
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
