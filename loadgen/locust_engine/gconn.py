"""gconn: one socket of a Locust user's client (gwire.py), every read stamped by the kernel.

    GConn.exchange(bytes, resp, rec, tally, stream, limits) (the user's greenlet): the
    process's reader pumped first (what is ready is read before this send), sent_at_ns
    immediately before the send, then the socket is handed to the reader (reader.py) and the
    greenlet waits on ``done`` ONCE, until the answer is complete, EOF or a failure:
      Reader ─► GConn.recv then GConn.process (inline, no greenlet switch per read; the
      reader reads every ready socket before it processes any read; on_readable does both):
        sock.recvmsg(BUFSIZE, ANCBUFSIZE) (a plain non-blocking socket), the user time of it
        ─► SCM_TIMESTAMPNS (REALTIME) − clock.offset_ns ─► t   (kstamp.ClockMap; no cmsg: the
           user-space time of the read) ─► WireResponse counters (kernel reads, read lag)
        ─► httptools.HttpResponseParser.feed_data (C) ─► status, headers, that read's body pieces
        ─► streamed 2xx: stream_step.StreamStep.feed(t, piece) at once (THE stream step; settled:
           stop, close); anything else held in ``resp.reads`` for gwire.fill (≤ max_body_bytes)
        ─► over: the reader lets go of the socket, ``done`` set (the user finishes its record)

What ``loadgen.client.wire.conn.Conn.on_readable`` does: the same header cap
(api.limits.max_header_bytes), the same EOF rule (a read-until-close body ends at EOF, anything
else is a ``connection`` failure), ``Keep-Alive: timeout=N`` (reuse within N − 1 s), ``stale``
(a REUSED socket that failed before any byte of the answer). Without a reader (the tests'
recorded streams: a socket that never blocks) ``exchange`` calls on_readable itself.
``process_stamps()``: the worker process's kstamp.Stamps (host-wide switch held on, clock offset
measured once and re-checked every 512 responses; what the reads showed, for meta.json).
No asyncio and no geventhttpclient: plain sockets, gevent waits and httptools only.
"""
from __future__ import annotations

import socket
from typing import Optional

import httptools
from gevent.event import Event
from gevent.socket import wait_write

from loadgen.client.sse import StreamTally
from loadgen.client.stream_step import Limits, StreamStep, body_too_large
from loadgen.client.wire import kstamp
from loadgen.client.wire.http1 import WireResponse
from loadgen.record import Record, now_ns

BUFSIZE = 65536
KEEPALIVE_NS = 4_000_000_000      # idle longer: reconnect (uvicorn drops idle sockets after 5 s)
read_time = kstamp.read_time

_STAMPS: Optional[kstamp.Stamps] = None


def process_stamps() -> kstamp.Stamps:
    """This process's stamping (opened on first use: <= 0.2 s probe, clock measured). Only an
    opened one is handed out: the probe yields to other greenlets, and one that connected
    meanwhile through a Stamps not yet open got no kernel stamps on that socket."""
    global _STAMPS
    if _STAMPS is None:
        st = kstamp.Stamps("auto")
        st.open()
        if _STAMPS is None:             # another greenlet's probe may have finished first
            _STAMPS = st
    return _STAMPS


class GConn:
    """One socket and the httptools parser of the exchange on it (the parser's protocol).
    ``reader`` (reader.Reader): the process's one reader reads it while an exchange is in
    flight, the user's greenlet waits on ``done`` once; None (a socket that never blocks, as
    the tests' recorded streams): ``exchange`` reads it straight through itself."""

    def __init__(self, sock, key: tuple, clock: Optional[kstamp.ClockMap],
                 keepalive_ns: int = KEEPALIVE_NS, reader=None):
        self.sock, self.key, self.clock = sock, key, clock
        self.fd = sock.fileno()
        self.keepalive_ns = keepalive_ns
        self.reused = self.closed = self.active = False
        self.idle_since_ns = 0
        self.resp: Optional[WireResponse] = None
        self.step: Optional[StreamStep] = None
        self.reader = reader
        self.done = Event() if reader is not None else None

    # ------------------------------------------------------------------ one exchange
    def exchange(self, data: bytes, resp: WireResponse, rec: Record, tally: StreamTally,
                 stream: bool, limits: Limits) -> None:
        """Send ``data``, then read the answer into ``resp`` (a streamed 2xx body straight into
        ``rec`` through a StreamStep, kept in ``resp.step``) until complete, EOF or a failure.
        Failures land on ``resp`` (never raises but gevent.Timeout / GreenletExit)."""
        resp.new_connection = not self.reused
        self.resp, self.rec, self.tally, self.stream, self.limits = resp, rec, tally, stream, limits
        self.step, self.nbytes, self.t, self.until_close = None, 0, 0, False
        self._hdrs: list = []
        self._pieces: list = []
        self.parser = httptools.HttpResponseParser(self)
        self.active = True
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
        try:
            self.done.wait()
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
        """ONE read (level-triggered readiness brings the reader back for more): stamp, frame,
        the stream step. Ends the exchange (``_end``) when the answer is complete or failed."""
        got = self.recv()
        if got is not None:
            self.process(got)

    def recv(self) -> Optional[tuple]:
        """The read itself (the reader's first pass over every ready socket): recvmsg and the
        user-space time right after it; ``(data, ancillary, tu)`` for ``process``, or None
        (nothing to read, or the read failed: the exchange is over)."""
        if not self.active:
            self._end()
            return None
        try:
            data, anc, _flags, _addr = self.sock.recvmsg(BUFSIZE, kstamp.ANCBUFSIZE)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError as e:
            self.failed(self.resp, "connection", f"{type(e).__name__}: {e}", now_ns())
            return None
        return data, anc, now_ns()

    def process(self, got: tuple) -> None:
        """What one read brought (``recv``'s tuple), in the order of the reads: its stamp
        (the kernel's, else the user time of the read), the framing, the stream step."""
        data, anc, tu = got
        resp = self.resp
        if not self.active:                             # closed since the read (a failure)
            return
        if not data:
            return self.eof(tu)
        clock = self.clock
        t = read_time(anc, clock.offset_ns if clock is not None else None, tu, resp)
        self.nbytes += len(data)
        resp.n_reads += 1
        self.t = t
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            return self.failed(resp, "protocol", "unexpected protocol upgrade", t)
        except httptools.HttpParserError as e:
            return self.failed(resp, "protocol", f"bad HTTP response: {e}", t)
        if resp.headers_at_ns is None and self.nbytes > resp.max_header_bytes:
            # httptools has no header limit and builds a long value by concatenation
            return self.failed(resp, "too_large", f"response headers over "
                               f"{resp.max_header_bytes} bytes (api.limits.max_header_bytes)", t)
        if self._pieces and self._take(t):
            return                                      # settled or over a limit: closed
        if resp.complete:
            self._end()

    def read_failed(self, e: BaseException) -> None:
        """The read itself raised (ours, not the server's): the record says so."""
        self.failed(self.resp, "client", f"{type(e).__name__}: {e}", now_ns())

    def _end(self) -> None:
        """The exchange is over: the reader lets go of the socket, the user's greenlet wakes."""
        if self.active:
            self.active = False
            if self.reader is not None:
                self.reader.unwatch(self)
                self.done.set()

    def _take(self, t: int) -> bool:
        """The body pieces of the read stamped ``t``; True when reading must stop."""
        pieces, self._pieces = self._pieces, []
        resp, step = self.resp, self.step
        if step is not None:
            for p in pieces:
                if step.feed(t, p):                     # settled: an error event, a limit, ...
                    resp.keep_alive = False
                    self.close()                        # mid-body: never reused
                    return True
            return False
        for p in pieces:
            resp.reads.append((t, p))
            resp.held += len(p)
        if resp.held > resp.hold_bytes and resp.held > self.limits.max_body_bytes:
            # the wire transport's rule (its catch-up at hold_bytes); below it, ``fill`` decides
            self.failed(resp, "too_large", body_too_large(resp.held, self.limits)
                        or "response too large", t)
            return True
        return False

    # ------------------------------------------------------------------ httptools callbacks
    def on_header(self, name: bytes, value: bytes) -> None:
        self._hdrs.append((name, value))

    def on_headers_complete(self) -> None:
        resp = self.resp
        if resp.complete:
            return
        resp.status = status = self.parser.get_status_code()
        h: dict = {}
        raw = resp.raw_headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in self._hdrs]
        for n, v in raw:
            k = n.lower()
            h[k] = f"{h[k]}, {v}" if k in h else v
        resp.headers = h
        resp.headers_at_ns = self.t
        self.until_close = ("content-length" not in h
                            and "chunked" not in h.get("transfer-encoding", "")
                            and status >= 200 and status not in (204, 304))
        ka = h.get("keep-alive")
        if ka:
            self._keep_alive_timeout(ka)
        if self.stream and 200 <= status < 300 and resp.content_type() != "application/json":
            self.step = resp.step = StreamStep(self.rec, self.tally, self.limits,
                                               h.get("content-encoding"))

    def _keep_alive_timeout(self, value: str) -> None:
        for part in value.split(","):
            k, _, v = part.strip().partition("=")
            if k.lower() == "timeout":
                try:
                    self.keepalive_ns = min(self.keepalive_ns, max(int((float(v) - 1.0) * 1e9), 0))
                except ValueError:
                    pass

    def on_body(self, body: bytes) -> None:
        if not self.resp.complete:
            self._pieces.append(body)

    def on_message_complete(self) -> None:
        resp = self.resp
        if resp.complete:
            return
        resp.complete = True
        resp.end_at_ns = self.t
        resp.keep_alive = self.parser.should_keep_alive() and not self.until_close

    # ------------------------------------------------------------------ endings
    def eof(self, t: int) -> None:
        resp = self.resp
        if resp.status is not None and self.until_close:
            resp.complete, resp.end_at_ns = True, t       # read-until-close body: EOF ends it
            resp.keep_alive = False
            self.close()
            return
        what = "before the response was complete" if self.nbytes else "before the status line"
        self.failed(resp, "connection",
                    f"ServerDisconnected: the server closed the connection {what}", t)

    def failed(self, resp: WireResponse, kind: str, msg: str, t: int) -> None:
        if resp.error_kind is None and not resp.complete:
            resp.error_kind, resp.error, resp.end_at_ns = kind, msg, t
            resp.stale = self.reused and self.nbytes == 0 and kind == "connection"
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
