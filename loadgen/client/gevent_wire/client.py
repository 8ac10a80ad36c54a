"""GWire: the Locust user's HTTP/1.1 keep-alive client, every read stamped by the kernel.

    GWire.post(headers, body, rec, tally, stream)        one per Locust user: ONE connection
      gevent.Timeout(timeout_s) around everything (connect, send, every read)
      ─► GConn: the idle kept-alive socket (its keep-alive window, no FIN seen) or a connect
           (gevent socket, TCP_NODELAY, SO_TIMESTAMPNS: kernel_stamps.enable_rx_timestamps; once
           connected, detached into a plain non-blocking socket)
      ─► request_head (loadgen.client.http1.message, the wire transport's framing); sent_at_ns
         immediately before the send
      ─► the process's ONE reader (reader.py) reads it, GConn.on_readable (gevent_wire/conn.py):
         sock.recvmsg(BUFSIZE, ANCBUFSIZE), each read stamped
         SCM_TIMESTAMPNS − clock.offset_ns (kernel_stamps.ClockMap; user time when no cmsg came)
           ─► httptools (C) framing ─► body pieces of that read, one stamp
           ─► streamed 2xx: stream_step.StreamStep.feed(t, piece) at once (THE stream step);
              anything else held (≤ api.limits.max_body_bytes) for ``fill``
      ─► fill: the wire transport's rules, the same code (loadgen.client.settle: pure, no
         asyncio): http_status, ``redirect`` (never followed unless api.follow_redirects
         same-host: loadgen.client.http1.redirects), ``http``, the stream's end, the whole JSON body
         (gzip/deflate), then the exchange's own failure
      reuse, the keep-alive window, the stale resend and stop-reuse after it, redirect hops:
      loadgen.client.http1 (ConnPolicy, redirects.route), the wire pool's rules: a REUSED connection that
      failed before any byte of the answer is sent once more on a fresh one (``retries``,
      ``first_sent_at_ns``, ``retry_error``); this user then stops reusing (``Connection: close``)
    execute(wire, headers, body, stream, rec, tally)   what a Locust user calls: ``post``, then
      the native client's record rules (request.fail for what raised, request.finish): a failed
      request is a record, GreenletExit (the run's stop) passes

The read step (gevent_wire/conn.py) feeds the one exchange (``loadgen.client.http1.exchange``), as the
asyncio wire transport's Conn does, and ``fill`` is ``settle``, as in ``fill.fill_steps``, so one stamped byte stream gives the same Record on either
engine (tests/loadgen/client/gevent_wire/test_gevent_client.py checks it on the recorded real servers).
No asyncio, no aiohttp, no geventhttpclient: sockets, gevent waits and httptools only.
"""
from __future__ import annotations

import socket
from typing import Optional

import gevent
from gevent import monkey
from gevent import socket as gsocket

from loadgen.client.http1.policy import ConnPolicy, Idle, PolicyCounts, Release
from loadgen.client.http1 import redirects
from loadgen.client.request import fail, finish
from loadgen.client.sse import StreamTally
from loadgen.client.stream_step import DEFAULT_LIMITS, Limits, StreamStep
from loadgen.client import kernel_stamps
from loadgen.client.http1.message import Target, WireResponse, connect_failure, request_head
from loadgen.client.settle import CANCELLED, settle
from loadgen.client.gevent_wire.conn import GConn
from loadgen.client.gevent_wire.reader import Reader, process_reader
from loadgen.record import Record, now_ns

RawSocket = monkey.get_original("socket", "socket")      # the standard library's class


def fill(resp: WireResponse, rec: Record, tally: StreamTally, step: Optional[StreamStep],
         limits: Limits = DEFAULT_LIMITS) -> None:
    """``rec`` from one read exchange (all but ``request.finish``): the wire transport's rules
    (``loadgen.client.settle``), the stream already fed as it was read."""
    settle(resp, rec, tally, step, limits)


class GWire(PolicyCounts):
    """One Locust user's client: at most one connection, one exchange at a time (module doc).
    ``post`` fills ``rec`` (all but ``request.finish``) and raises only GreenletExit."""

    def __init__(self, url: str, timeout_s: float = 600.0,
                 connect_timeout_s: Optional[float] = 30.0, limits: Limits = DEFAULT_LIMITS,
                 follow_redirects: str = "never", stamps: Optional[kernel_stamps.Stamps] = None,
                 reader: Optional[Reader] = None):
        self.url, self.timeout_s, self.connect_timeout_s = url, timeout_s, connect_timeout_s
        self.reader = reader or process_reader()
        self.limits, self.follow_redirects = limits, follow_redirects
        self.stamps = stamps
        self.conn: Optional[GConn] = None
        self.policy = ConnPolicy(stop_reuse_after_retry=True)   # keep-alive: the GConn's window
        self.connections_opened = 0
        self._targets: dict = {}

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def _target(self, url: str) -> Target:
        tg = self._targets.get(url)
        if tg is None:
            tg = self._targets[url] = Target(url)
        return tg

    def _connect(self, tg: Target) -> GConn:
        if tg.addrs is None:
            tg.addrs = [(fam, addr) for fam, _, _, _, addr in
                        gsocket.getaddrinfo(tg.host, tg.port, type=socket.SOCK_STREAM)]
        clock = self.stamps.clock if self.stamps is not None else None
        err: Optional[OSError] = None
        for fam, addr in list(tg.addrs):
            sock = gsocket.socket(fam, socket.SOCK_STREAM)
            try:
                sock.settimeout(self.connect_timeout_s)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if clock is not None:
                    kernel_stamps.enable_rx_timestamps(sock)
                sock.connect(addr)
            except OSError as e:
                sock.close()
                if isinstance(e, socket.timeout):
                    raise
                err = e
                continue
            self.connections_opened += 1
            # from here on a plain non-blocking socket: the process's reader reads it (no
            # gevent wrapper per read); gevent.Timeout bounds the exchange
            raw = RawSocket(fileno=sock.detach())
            raw.setblocking(False)
            return GConn(raw, tg.key, clock, reader=self.reader)
        raise err if err is not None else OSError(f"no address for {tg.host}")

    def _idle_conn(self, key: tuple, attempt: int) -> Optional[GConn]:
        if attempt:                        # a resend: fresh (the idle socket already went)
            return None
        c, self.conn = self.conn, None
        if c is None or c.closed:
            return None
        if (c.key != key or self.policy.take(attempt, (now_ns() - c.idle_since_ns) / 1e9,
                                             c.keepalive_ns / 1e9) is Idle.DROP
                or c.peer_closed()):
            c.close()
            return None
        c.reused = True
        return c

    def _release(self, conn: GConn, resp: WireResponse) -> None:
        if self.policy.release(resp, conn.keepalive_ns, conn.closed) is Release.CLOSE:
            conn.close()
            return
        conn.idle_since_ns = now_ns()
        self.conn = conn

    def post(self, headers: dict, data: bytes, rec: Record, tally: StreamTally,
             stream: bool, hangup=None) -> None:
        hops = redirects.route(self.url, self.follow_redirects)
        resp = WireResponse()
        try:
            for url in hops:
                self._request(url, headers, data, rec, tally, stream, resp, hangup)
                if hops.answered(resp.status, resp.headers.get("location")):
                    resp = WireResponse()       # the next hop's answer
        except gevent.GreenletExit:
            resp.error_kind = resp.error_kind or "cancelled"
            resp.error = resp.error or CANCELLED
            resp.end_at_ns = resp.end_at_ns or now_ns()
            fill(resp, rec, tally, resp.step, self.limits)
            raise
        fill(resp, rec, tally, resp.step, self.limits)

    def _request(self, url: str, headers: dict, data: bytes, rec: Record, tally: StreamTally,
                 stream: bool, resp: WireResponse, hangup=None) -> None:
        """One exchange into ``resp`` (the stale-connection retry included)."""
        conn: Optional[GConn] = None
        timer = gevent.Timeout(self.timeout_s)
        timer.start()
        try:
            tg = self._target(url)
            policy = self.policy
            for attempt in (0, 1):
                conn = self._idle_conn(tg.key, attempt)
                if conn is None:
                    conn = self._connect(tg)
                head = request_head("POST", tg, headers, data, close=policy.connection_close())
                conn.exchange(head, resp, rec, tally, stream, self.limits, hangup)
                if not policy.resend(resp, attempt):   # stale: never reached the server
                    break
                conn.close()
        except gevent.Timeout as e:
            if e is not timer:
                raise
            if resp.error_kind is None:
                what = "" if conn is not None else " (no connection)"
                resp.error_kind = "timeout"
                resp.error = f"no complete answer within {self.timeout_s:g} s{what}"
                resp.end_at_ns = now_ns()
        except socket.timeout:                     # connecting
            resp.error_kind = "timeout"
            resp.error = f"no connection within {self.connect_timeout_s:g} s"
            resp.end_at_ns = now_ns()
        except ValueError as e:                    # not an http:// URL
            resp.error_kind, resp.error, resp.end_at_ns = "client", str(e), now_ns()
        except OSError as e:                       # connect refused / unreachable / no address
            (resp.error_kind, resp.error), resp.end_at_ns = connect_failure(e), now_ns()
        except gevent.GreenletExit:
            if conn is not None:
                conn.close()
            raise
        finally:
            timer.close()
            if conn is not None:
                self._release(conn, resp)
            if self.stamps is not None:
                self.stamps.fold(resp)


def execute(wire: GWire, headers: dict, data: bytes, stream: bool, rec: Record,
            tally: StreamTally, hangup=None) -> None:
    """POST ``data`` through ``wire``; fill ``rec``. Never raises for a failed request
    (GreenletExit passes, the record filled as ``cancelled`` first). ``hangup``: load.cancel's
    (loadgen.client.hangup) for this request, or None."""
    try:
        wire.post(headers, data, rec, tally, stream, hangup)
    except gevent.GreenletExit:
        raise
    except Exception as e:           # a failed request is a record, whatever raised: our fault
        if rec.status == "pending":
            fail(rec, "client", f"{type(e).__name__}: {e}")
    finally:
        finish(rec, tally, rec.workload_prompt_tokens)
