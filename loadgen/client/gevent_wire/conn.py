"""GConn: one socket of a Locust user's client (gevent_wire/client.py): the gevent driver of the wire exchange.

    GConn.exchange(bytes, resp, rec, tally, stream, limits) (the user's greenlet): the
    process's reader pumped first (what is ready is read before this send), sent_at_ns
    immediately before the send, then the socket is handed to the reader (reader.py) and the
    greenlet waits on ``done`` ONCE, until the exchange is over:
      Reader ─► GConn.recv (recvmsg + the user time of it; the reader reads every ready socket
      before it processes any) then GConn.process: SCM_TIMESTAMPNS (REALTIME) − clock.offset_ns
      ─► t (kernel_stamps.ClockMap; no cmsg: the user time) ─► Exchange.feed(t, bytes) (every HTTP/1.1
      rule: loadgen.client.http1.exchange, the asyncio wire transport's too), a streamed 2xx fed
      to stream_step.StreamStep inline ─► over: the reader lets go, ``done`` set
    [DONE] with the message still open: the greenlet wakes and waits DONE_GRACE at most more;
    load.cancel (a timed hang-up): the greenlet's wait bounded by the policy's hangup_deadline (both
    deadlines returned by loadgen.client.http1.policy, armed here as gevent waits).
Without a reader (the tests' recorded streams: a socket that never blocks) ``exchange`` reads
it straight through itself. ``process_stamps()``: the worker process's kernel_stamps.Stamps.
No asyncio and no geventhttpclient: plain sockets, gevent waits and httptools only.
"""
from __future__ import annotations

import socket
from typing import Optional

from gevent.event import Event
from gevent.socket import wait_write

from loadgen.client.sse import StreamTally
from loadgen.client.stream_step import Limits, StreamStep
from loadgen.client import kernel_stamps
from loadgen.client.kernel_stamps import process_stamps  # noqa: F401 - the workers import it here
from loadgen.client.http1.exchange import GOING, Exchange
from loadgen.client.http1.policy import DONE_GRACE, ConnPolicy, hangup_deadline
from loadgen.client.http1.message import Ask, WireResponse
from loadgen.record import Record, now_ns

BUFSIZE = 65536
KEEPALIVE_NS = 4_000_000_000      # idle longer: reconnect (uvicorn drops idle sockets after 5 s)
read_time = kernel_stamps.read_time

class GConn:
    """One socket, one Exchange at a time (module doc). ``reader``: the process's reader, or
    None (a socket that never blocks: ``exchange`` reads it through itself)."""

    def __init__(self, sock, key: tuple, clock: Optional[kernel_stamps.ClockMap],
                 keepalive_ns: int = KEEPALIVE_NS, reader=None):
        self.sock, self.key, self.clock = sock, key, clock
        self.fd = sock.fileno()
        self.keepalive_ns = keepalive_ns
        self.reused = self.closed = self.active = False
        self.idle_since_ns = 0
        self.ex: Optional[Exchange] = None
        self.reader = reader
        self.done = Event() if reader is not None else None

    def exchange(self, data: bytes, resp: WireResponse, rec: Record, tally: StreamTally,
                 stream: bool, limits: Limits, hangup=None) -> None:
        """Send ``data``, then read the answer into ``resp`` (a streamed 2xx body straight into
        ``rec``, its step kept in ``resp.step``). Failures land on ``resp`` (never raises but
        gevent.Timeout / GreenletExit). ``hangup``: load.cancel's, or None."""
        resp.new_connection = not self.reused
        ask = Ask(stream, limits.max_header_bytes, limits.max_body_bytes, hangup=hangup)
        self.ex = Exchange(resp, self.reused, lambda r: StreamStep(
            rec, tally, limits, r.headers.get("content-encoding"), hangup), ask)
        self.active, self.grace = True, False
        if self.reader is not None:
            self.reader.pump()         # reads first: what is ready now is read before this send
        resp.sent_at_ns = now_ns()
        try:
            self._send(data)
        except OSError as e:
            return self.failed(resp, "connection", f"{type(e).__name__}: {e}", now_ns())
        reader = self.reader
        if reader is None:
            while self.active:
                self.on_readable()
            return
        self.done.clear()
        reader.watch(self)
        due = hangup_deadline(hangup, resp.sent_at_ns, now_ns())   # load.cancel
        try:
            self.done.wait(None if due is None else due.left_s)
            if self.active and due is not None and not self.grace:   # the hang-up is due
                self.failed(resp, due.kind, due.message, now_ns())
            elif self.active:          # woken by [DONE]: the message end, briefly awaited
                self.done.clear()
                self.done.wait(DONE_GRACE.left_s)
                if self.active:
                    self.ex.finish_after_done()
                    self.close()
        except BaseException:          # gevent.Timeout, GreenletExit: the caller records it
            self.close()
            raise
        reader.pump()                  # reads first: what is ready before this request's end work

    def _send(self, data: bytes) -> None:
        sock = self.sock
        if self.reader is None:
            sock.sendall(data)
            return
        view = memoryview(data)        # a non-blocking socket: wait for room cooperatively
        while view:
            try:
                n = sock.send(view)
            except (BlockingIOError, InterruptedError):
                wait_write(self.fd)
                continue
            view = view[n:]

    def on_readable(self) -> None:
        """ONE read (level-triggered readiness brings the reader back for more)."""
        got = self.recv()
        if got is not None:
            self.process(got)

    def recv(self) -> Optional[tuple]:
        """The read itself: ``(data, ancillary, user time)`` for ``process``, or None (nothing
        to read, or the read failed: the exchange is over)."""
        if not self.active:
            self._end()
            return None
        try:
            data, anc, _flags, _addr = self.sock.recvmsg(BUFSIZE, kernel_stamps.ANCBUFSIZE)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as e:
            self.failed(self.ex.resp, "connection", f"{type(e).__name__}: {e}", now_ns())
            return None
        return data, anc, now_ns()

    def process(self, got: tuple) -> None:
        """One read, in the order of the reads: its stamp, then the exchange."""
        if not self.active:                             # closed since the read (a failure)
            return
        data, anc, tu = got
        ex = self.ex
        if not data:
            ex.eof(tu)
            return self._over()
        clock = self.clock
        if ex.feed(read_time(anc, clock.offset_ns if clock is not None else None, tu, ex.resp),
                   data) != GOING:
            return self._over()
        if ex.step is not None and ex.step.done and not self.grace and self.done is not None:
            self.grace = True
            self.done.set()                             # [DONE]: wake the user, keep reading

    def _over(self) -> None:
        ex = self.ex
        resp = ex.resp
        if ex.keepalive_s is not None:                  # Keep-Alive: timeout=N
            self.keepalive_ns = int(ConnPolicy.window(self.keepalive_ns / 1e9, ex.keepalive_s) * 1e9)
        if resp.keep_alive and resp.complete:
            self._end()
        else:
            self.close()                                # failed, settled, not reusable

    def read_failed(self, e: BaseException) -> None:
        """The read itself raised (ours, not the server's): the record says so."""
        self.failed(self.ex.resp, "client", f"{type(e).__name__}: {e}", now_ns())

    def _end(self) -> None:
        """The exchange is over: the reader lets go of the socket, the user's greenlet wakes."""
        if self.active:
            self.active = False
            if self.reader is not None:
                self.reader.unwatch(self)               # before any close: fd reuse
                self.done.set()

    def failed(self, resp: WireResponse, kind: str, msg: str, t: int) -> None:
        if self.ex is not None and self.active:
            self.ex.fail(kind, msg, t)
        self.close()

    def peer_closed(self) -> bool:
        """An idle socket the server already closed (or wrote to): not to be reused."""
        try:
            self.sock.recv(1, socket.MSG_PEEK)          # non-blocking: b"": FIN; bytes: stray
            return True
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True

    def close(self) -> None:
        self._end()
        if not self.closed:
            self.closed = True
            try:
                self.sock.close()
            except OSError:
                pass
