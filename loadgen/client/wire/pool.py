"""The wire pool: keep-alive connections per (host, port), one exchange at a time on each, and
the one retry a stale pooled connection earns.

    request(method, url, headers, body, resp)
        in-flight slot (limit) ─► an idle connection (LIFO; ``policy.take``: within its
        keep-alive window), else connect ─► _exchange: sent_at_ns = perf_counter_ns()
        immediately before the send syscall, then wait for the headers (``on_headers(resp)``)
        and the end ─► ``policy.release``: PARK or CLOSE
        the stale resend and stop-reuse after it: ``policy.resend`` (loadgen.client.http1.policy,
        the pure rule: a REUSED connection that failed before any response byte, once more
        fresh; ``retries`` 1, ``first_sent_at_ns``, ``retry_error``; then ``Connection: close``)
        load.cancel (timed): ``policy.hangup_deadline`` armed as a loop timer from the send
    fill(resp, rec, tally, stream)  the record, through the pool's RecordFiller (sliced)

Timeouts: ``connect_timeout_s`` per connect, ``timeout_s`` from the call to the last byte (slot
wait and connect included, like aiohttp's total). Every ``SWEEP_S`` a stream in flight that read
nothing since the last sweep parses what it holds (``Conn.sweep``, reading not paused): a stream
that failed, or had its [DONE] (then the message end is awaited ``exchange.DONE_GRACE_S``), on a
socket the server leaves open frees its slot within two sweeps, not at ``timeout_s``; one that
keeps sending after its failure is parsed at ``hold_bytes`` (the spill). A fresh connection the peer closed before
the request went out fails as ``connection`` (never a send on a closed socket); out of file
descriptors on connect is ``client`` (``http1.connect_failure``). Cancellation closes the socket and re-raises;
the caller's ``WireResponse`` (pass one in) keeps what was read and says ``cancelled``.
``request`` never raises anything else: failures are ``error_kind`` / ``error`` on the response.
"""
from __future__ import annotations

import asyncio
import ipaddress
import socket
from typing import Callable, Optional

from loadgen.client.sse import StreamTally
from loadgen.client import kernel_stamps
from loadgen.client.http1.policy import (KEEPALIVE_S, ConnPolicy, Idle, PolicyCounts, Release,
                                         hangup_deadline)
from loadgen.client.wire.conn import Conn
from loadgen.client.wire.record_fill import RecordFiller
from loadgen.client.http1.message import (DEFAULT_ASK, Ask, Target, WireResponse, connect_failure,
                                          request_head)
from loadgen.client.wire.read_mux import ReadMux
from loadgen.record import Record, now_ns

CANCELLED = "the run was interrupted before the request ended"
SWEEP_S = 0.25                # streams in flight parsed this often (Conn.catch_up): see module doc


class WirePool(PolicyCounts):
    """``async with WirePool(limit=N) as pool: resp = await pool.request("POST", url, headers, body)``.

    ``limit``: most requests in flight at once (0: unbounded; size it to the in-flight cap).
    ``stamps``: ``"auto"`` (kernel receive stamps where the platform gives them) or ``"user"``.
    ``mux``: ``"epoll"`` (one loop reader for every socket) or ``"loop"`` (one each).
    """

    def __init__(self, limit: int = 0, timeout_s: float = 600.0, connect_timeout_s: Optional[float] = 30.0,
                 keepalive_s: float = KEEPALIVE_S, stamps: str = "auto",
                 stop_reuse_after_retry: bool = True, mux: str = "epoll"):
        self.stamps = kernel_stamps.Stamps(stamps)
        self.mux = ReadMux(mux)
        self.limit, self.timeout_s, self.connect_timeout_s = limit or 0, timeout_s, connect_timeout_s
        self.keepalive_s = keepalive_s
        self.policy = ConnPolicy(keepalive_s, stop_reuse_after_retry)
        self.filler = RecordFiller()                # fill(): records of finished streams, sliced
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._sem: Optional[asyncio.Semaphore] = None
        self._idle: dict = {}                       # key -> [Conn] (LIFO)
        self._conns: set = set()                    # every open Conn
        self._targets: dict = {}
        self.connections_opened = 0
        self.coalesced_reads = 0                    # over the records filled by fill()
        self._sweeper: Optional[asyncio.TimerHandle] = None

    async def __aenter__(self) -> "WirePool":
        self.open()
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()

    def open(self) -> None:
        """On the running loop: the mux, the slots, kernel stamping (probed, clock measured)."""
        self._loop = asyncio.get_running_loop()
        self.mux.open(self._loop)
        if self.limit:
            self._sem = asyncio.Semaphore(self.limit)
        self.stamps.open()
        if self._sweeper is None:
            self._sweeper = self._loop.call_later(SWEEP_S, self._sweep)

    def _sweep(self) -> None:
        """Every SWEEP_S: each stream in flight that read nothing since the last sweep parses
        what it holds (off the read path), so an error event or a [DONE] on a socket left open
        and quiet ends its exchange; streams still arriving are not parsed beside their reads."""
        for c in self._conns:
            if c.active:
                c.sweep()
        self._sweeper = self._loop.call_later(SWEEP_S, self._sweep)

    def close(self) -> None:
        """Close every connection (an exchange in flight ends as a ``connection`` error)."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for c in list(self._conns):
            c.failed("connection", "the client closed the connection (pool closed)", now_ns())
        self._idle.clear()
        self.mux.close()
        self.stamps.close()

    def describe(self) -> dict:
        """For meta.json / sut.json: the stamping method and what the transport did."""
        return {"transport": "wire", "mux": self.mux.kind, **self.stamps.describe(),
                "coalesced_reads": self.coalesced_reads, "connections_opened": self.connections_opened,
                "stale_connection_retries": self.retries, "reuse_connections": self.reuse_connections}

    async def fill(self, resp: WireResponse, rec: Record, tally: StreamTally, *, stream: bool) -> None:
        """``fill.fill_steps`` through the pool's RecordFiller (bounded slices; see there);
        ``request.finish`` is the caller's."""
        try:
            await self.filler.fill(resp, rec, tally, stream=stream)
        finally:
            self.coalesced_reads += resp.coalesced_reads or 0

    # ---------------------------------------------------------------- connections
    def _target(self, url: str) -> Target:
        t = self._targets.get(url)
        if t is None:
            t = self._targets[url] = Target(url)
        return t

    async def _addresses(self, tg: Target) -> list:
        if tg.addrs is None:
            try:
                ip = ipaddress.ip_address(tg.host)
                tg.addrs = [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, (tg.host, tg.port))]
            except ValueError:
                infos = await self._loop.getaddrinfo(tg.host, tg.port, type=socket.SOCK_STREAM)
                tg.addrs = [(fam, addr) for fam, _, _, _, addr in infos]
        return tg.addrs

    async def _connect(self, tg: Target) -> Conn:
        err: Optional[BaseException] = None
        clock = self.stamps.clock
        for fam, addr in list(await self._addresses(tg)):
            sock = socket.socket(fam, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if clock is not None:
                    kernel_stamps.enable_rx_timestamps(sock)
                await asyncio.wait_for(self._loop.sock_connect(sock, addr), self.connect_timeout_s)
            except BaseException as e:
                sock.close()
                if not isinstance(e, OSError) or isinstance(e, asyncio.TimeoutError):
                    raise
                err = e
                continue
            if tg.addrs[0][1] != addr:                       # remember the address that answered
                tg.addrs.remove((fam, addr))
                tg.addrs.insert(0, (fam, addr))
            self.connections_opened += 1
            return Conn(sock, tg.key, self._loop, self.mux, clock, self.keepalive_s, self._conns)
        raise err if err is not None else OSError(f"no address for {tg.host}")

    def _idle_conn(self, key: tuple, attempt: int) -> Optional[Conn]:
        if not self.policy.wants_idle(attempt):
            return None
        idle = self._idle.get(key)
        now = self._loop.time()
        take = self.policy.take
        while idle:
            c = idle.pop()
            if c.closed:
                continue
            if take(attempt, now - c.idle_since, c.keepalive_s) is Idle.DROP:
                c.close()
                continue
            c.reused = True
            return c
        return None

    def _release(self, conn: Conn, resp: WireResponse) -> None:
        if self.policy.release(resp, conn.keepalive_s, conn.closed) is Release.CLOSE:
            conn.close()
            return
        conn.idle(self._loop.time())
        self._idle.setdefault(conn.key, []).append(conn)

    # ---------------------------------------------------------------- requests
    async def request(self, method: str, url: str, headers: Optional[dict] = None, body: bytes = b"",
                      resp: Optional[WireResponse] = None,
                      on_headers: Optional[Callable[[WireResponse], None]] = None,
                      ask: Ask = DEFAULT_ASK, spill: Optional[Callable] = None,
                      make_step: Optional[Callable] = None) -> WireResponse:
        """One exchange, filled into ``resp`` (made if not given) and returned. Never raises but
        ``CancelledError`` (after closing the socket; ``resp`` then says ``cancelled``).
        ``ask``: its bounds and load.cancel's hang-up; ``spill`` / ``make_step``: Conn.begin."""
        if resp is None:
            resp = WireResponse()
        if self._loop is None:
            self.open()
        deadline = self._loop.time() + self.timeout_s
        try:
            tg = self._target(url)
        except ValueError as e:
            resp.error_kind, resp.error, resp.end_at_ns = "client", str(e), now_ns()
            return resp
        acquired = False
        try:
            if self._sem is not None:
                await asyncio.wait_for(self._sem.acquire(), self._left(deadline))
                acquired = True
            policy = self.policy
            for attempt in (0, 1):
                conn = self._idle_conn(tg.key, attempt)
                if conn is None:
                    conn = await asyncio.wait_for(self._connect(tg), self._left(deadline))
                data = request_head(method, tg, headers, body, close=policy.connection_close())
                await self._exchange(conn, data, resp, deadline, on_headers, ask, spill, make_step)
                if not policy.resend(resp, attempt):   # stale: never reached the server
                    break
        except asyncio.TimeoutError:                 # waiting for a slot or connecting
            resp.error_kind = "timeout"
            resp.error = f"no complete answer within {self.timeout_s:g} s (no connection)"
            resp.end_at_ns = now_ns()
        except OSError as e:                         # connect refused / unreachable / no address
            if resp.error_kind is None:
                (resp.error_kind, resp.error), resp.end_at_ns = connect_failure(e), now_ns()
        except asyncio.CancelledError:
            if resp.error_kind is None:
                resp.error_kind, resp.error, resp.end_at_ns = "cancelled", CANCELLED, now_ns()
            raise
        finally:
            self.stamps.fold(resp)
            if acquired:
                self._sem.release()
        return resp

    def _left(self, deadline: float) -> float:
        return max(deadline - self._loop.time(), 0)

    async def _exchange(self, conn: Conn, data: bytes, resp: WireResponse, deadline: float,
                        on_headers: Optional[Callable[[WireResponse], None]], ask: Ask = DEFAULT_ASK,
                        spill: Optional[Callable] = None, make_step: Optional[Callable] = None) -> None:
        conn.begin(resp, ask, spill, make_step)
        resp.new_connection = not conn.reused
        timer = self._loop.call_at(deadline, conn.timed_out, self.timeout_s)
        hang_timer = None
        try:
            if conn.closed:                          # the peer closed it before the request went out
                conn.ex.fail("connection", "ServerDisconnected: the server closed the connection "
                             "before the request was sent", now_ns())
                return
            resp.sent_at_ns = now_ns()
            try:
                n = conn.sock.send(data)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as e:
                conn.failed("connection", f"{type(e).__name__}: {e}", now_ns())
                return
            if n < len(data):
                try:
                    await conn.send(data[n:])
                except OSError as e:
                    conn.failed("connection", f"{type(e).__name__}: {e}", now_ns())
                    return
            due = hangup_deadline(ask.hangup, resp.sent_at_ns, now_ns())   # load.cancel
            if due is not None:
                hang_timer = self._loop.call_later(due.left_s, conn._abort, resp, due.kind,
                                                   due.message)
            await conn.headers_fut
            if resp.error_kind is None and resp.status is not None and on_headers is not None:
                on_headers(resp)
            await conn.done_fut
        except asyncio.CancelledError:
            if resp.error_kind is None:
                resp.error_kind, resp.error, resp.end_at_ns = "cancelled", CANCELLED, now_ns()
            conn.close()
            raise
        finally:
            timer.cancel()
            if hang_timer is not None:
                hang_timer.cancel()
            self._release(conn, resp)
