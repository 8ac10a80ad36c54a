"""A minimal HTTP/1.1 client for plain ``http://`` targets: every read stamped by the kernel.

    WirePool.request(method, url, headers, body)
        pool per (host, port): an idle keep-alive connection (LIFO), else connect
        sent_at_ns = perf_counter_ns() ─► sock.send(request bytes)      (immediately before the syscall)
        the pool's own epoll (one loop.add_reader for all sockets; mux="loop": one per socket)
          ─► _Conn.on_readable (no coroutine per read):
            recvmsg(BUFSIZE, ANCBUFSIZE) ─► SCM_TIMESTAMPNS (REALTIME) ─► kstamp.ClockMap ─► t (perf_counter ns)
            ─► httptools.HttpResponseParser.feed_data (C): status, headers, chunked / length / until-close
            ─► on_body: reads.append((t, body bytes))
        the awaiting coroutine wakes twice: headers complete, then message complete / EOF / error / timeout
    fill_record(WireResponse, Record)  after the fact: sse.SSEParser over the stamped pieces, the same
        event rules as client.Client._read_stream, request.finish ─► the same Record fields
    WirePool.fill / RecordFiller       the same, on one task in slices of <= 250 µs between loop turns

No JSON, no SSE and no task switch per read: the event loop's only per-read work is one recvmsg, one
clock read (user time, kept to measure how late the loop got to the read) and one parser feed. A
read that coalesced several TCP segments carries the LAST segment's kernel stamp; ``fill_record``
counts reads that carried more than one token chunk (``coalesced_reads``: those chunks' stamps may
be late by the gap). That is why the records are filled in bounded slices (``RecordFiller``): 256
lockstep streams ending in the same step are ~200 ms of JSON, which, done in one go, would hold
every socket's next read up for 20 decode steps. A read without the cmsg (timestamping refused, or a packet that reached the
socket before the host turned stamping on) is stamped in user space; ``stamp_source`` says
``kernel``, ``user`` or ``mixed`` per response and per pool.

Connections: keep-alive reuse per (host, port); an idle connection stays watched, so a server
that closes it is noticed before it is reused; ``Connection: close`` (or HTTP/1.0) is honoured,
and ``Keep-Alive: timeout=N`` shortens the reuse window to N − 1 s. A request that fails on a REUSED
connection before any response byte arrived (send error, reset, EOF before the status line) is
sent once more on a fresh connection (``retries`` 1, ``first_sent_at_ns``, ``retry_error``), like
``client.Client``; after the first such retry the pool stops reusing connections (requests then
say ``Connection: close``). A failure on a fresh connection is never retried.

Timeouts: ``connect_timeout_s`` per connect, ``timeout_s`` from the call to the last byte (pool
wait and connect included, like aiohttp's total). Cancellation closes the socket, removes the
reader and re-raises; the caller's ``WireResponse`` (pass one in) keeps what was read so far.
``request`` never raises anything else: failures are ``error_kind`` / ``error`` on the response.
"""
from __future__ import annotations

import asyncio
import collections
import ipaddress
import select
import socket
import struct
from dataclasses import dataclass, field
from typing import Callable, Optional
from urllib.parse import urlsplit

import httptools

from loadgen.client import kstamp
from loadgen.client.request import SNIPPET, apply_body, end_stream, fail, finish
from loadgen.client.sse import DONE, NamedEvent, SSEParser, StreamTally, error_message, loads
from loadgen.record import Record, now_ns

BUFSIZE = 65536               # one recvmsg; level-triggered readiness brings the loop back for more
KEEPALIVE_S = 4.0             # below uvicorn's 5 s keep-alive (client.KEEPALIVE_S)
FUTURE_SLACK_NS = 2_000_000   # a kernel stamp later than the read's user time by more: a clock step
CLOCK_CHECK_EVERY = 512       # responses between two re-measurements of the REALTIME offset
CLOCK_STEP_NS = 500_000       # an offset that moved by more was stepped: adopted, counted
USER_AGENT = "loadgen-wire/1"
_SCM_TS, _SOL_SOCKET = kstamp.SCM_TIMESTAMPNS, kstamp.SOL_SOCKET
_unpack_ts = struct.Struct("qq").unpack_from


@dataclass
class WireResponse:
    """One exchange as it happened; times are perf_counter_ns."""

    status: Optional[int] = None
    headers: dict = field(default_factory=dict)      # lower-case name -> value (repeats joined ", ")
    raw_headers: list = field(default_factory=list)  # [(name as sent, value)] (sut.json: dict(raw_headers))
    reads: list = field(default_factory=list)        # body pieces [(stamp_ns, bytes)], one read's share one stamp
    sent_at_ns: Optional[int] = None                 # immediately before the send syscall (last attempt)
    first_sent_at_ns: Optional[int] = None           # the failed first attempt, when retried
    retries: int = 0
    retry_error: Optional[str] = None
    headers_at_ns: Optional[int] = None              # stamp of the read that completed the headers
    end_at_ns: Optional[int] = None                  # stamp of the last read, or the failure
    complete: bool = False                           # message complete (or EOF ending an until-close body)
    error_kind: Optional[str] = None                 # record.ERROR_KINDS: timeout | connection | malformed | cancelled
    error: Optional[str] = None
    n_reads: int = 0                                 # socket reads that returned bytes
    kernel_reads: int = 0                            # ... of which carried a kernel stamp
    lag_max_ns: int = 0                              # max (user time of the read − its kernel stamp)
    lag_sum_ns: int = 0
    future_stamps: int = 0                           # kernel stamps after the user time (clock step?)
    keep_alive: bool = False
    coalesced_reads: Optional[int] = None            # set by fill_record: reads with > 1 token chunk
    new_connection: bool = False                     # the attempt that answered ran on a fresh connection
    stale: bool = False                              # (internal) reused connection, failed before any byte

    @property
    def stamp_source(self) -> str:
        """``kernel``, ``user``, ``mixed``, or ``none`` when nothing was read."""
        if not self.n_reads:
            return "none"
        if not self.kernel_reads:
            return "user"
        return "kernel" if self.kernel_reads == self.n_reads else "mixed"

    def body(self) -> bytes:
        return b"".join(p for _, p in self.reads)


class _Target:
    __slots__ = ("key", "host", "port", "hostport", "path", "addrs")

    def __init__(self, url: str):
        u = urlsplit(url)
        if u.scheme != "http":
            raise ValueError(f"wire transport: only http:// URLs, got {url!r}")
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or 80
        self.key = (self.host, self.port)
        h = f"[{self.host}]" if ":" in self.host else self.host
        self.hostport = h if self.port == 80 else f"{h}:{self.port}"
        self.path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        self.addrs: Optional[list] = None                 # resolved once, the one that worked first


def _wake(fut: Optional[asyncio.Future]) -> None:
    if fut is not None and not fut.done():
        fut.set_result(None)


class _Conn:
    """One socket; the httptools parser's protocol for the exchange in flight."""

    def __init__(self, pool: "WirePool", key: tuple, sock: socket.socket):
        self.pool, self.key, self.sock, self.fd = pool, key, sock, sock.fileno()
        self.loop = pool._loop
        self.clock = pool.clock
        self.resp: Optional[WireResponse] = None
        self.active = False                 # an exchange is reading
        self.closed = False
        self.reused = False
        self.idle_since = 0.0
        self.keepalive_s = pool.keepalive_s
        self.nbytes = 0
        self.t = 0
        self._hdrs: list = []
        self.parser: Optional[httptools.HttpResponseParser] = None
        self.until_close = False
        self.headers_fut: Optional[asyncio.Future] = None
        self.done_fut: Optional[asyncio.Future] = None
        self.wfut: Optional[asyncio.Future] = None
        self._append = None
        pool._watch(self)

    # ---------------------------------------------------------------- exchange
    def begin(self, resp: WireResponse) -> None:
        self.resp, self.active, self.nbytes, self._hdrs = resp, True, 0, []
        self.until_close = False
        self.parser = httptools.HttpResponseParser(self)
        self._append = resp.reads.append
        self.headers_fut = self.loop.create_future()
        self.done_fut = self.loop.create_future()

    def on_readable(self) -> None:
        recvmsg = self.sock.recvmsg
        offset = self.clock.offset_ns if self.clock is not None else None
        while True:
            try:
                data, anc, _flags, _addr = recvmsg(BUFSIZE, kstamp.ANCBUFSIZE)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as e:
                return self.lost(f"{type(e).__name__}: {e}")
            tu = now_ns()
            if not self.active:                          # idle or finished: EOF or stray bytes
                return self.close()
            if not data:
                return self.eof(tu)
            resp = self.resp
            t = tu
            if anc and offset is not None:
                level, kind, cdata = anc[0]           # the only cmsg asked for
                if kind == _SCM_TS and level == _SOL_SOCKET:
                    sec, nsec = _unpack_ts(cdata)
                    t = sec * 1_000_000_000 + nsec - offset
                    lag = tu - t
                    if lag > resp.lag_max_ns:
                        resp.lag_max_ns = lag
                    elif lag < -FUTURE_SLACK_NS:
                        resp.future_stamps += 1
                    resp.lag_sum_ns += lag
                    resp.kernel_reads += 1
            self.nbytes += len(data)
            resp.n_reads += 1
            self.t = t
            try:
                self.parser.feed_data(data)
            except httptools.HttpParserUpgrade:
                return self.failed("malformed", "unexpected protocol upgrade", t)
            except httptools.HttpParserError as e:
                return self.failed("malformed", f"bad HTTP response: {e}", t)
            if len(data) < BUFSIZE:
                return

    # httptools callbacks
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
            for part in ka.split(","):
                k, _, v = part.strip().partition("=")
                if k.lower() == "timeout":
                    try:
                        self.keepalive_s = min(self.keepalive_s, max(float(v) - 1.0, 0.0))
                    except ValueError:
                        pass
        _wake(self.headers_fut)

    def on_body(self, body: bytes) -> None:
        self._append((self.t, body))

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
            _wake(self.headers_fut)
            _wake(self.done_fut)
            self.close()
            return
        if self.nbytes:
            what = "before the response was complete"
        else:
            what = "before the status line"
        self.failed("connection", f"ServerDisconnected: the server closed the connection {what}", t)

    def lost(self, msg: str) -> None:
        self.failed("connection", msg, now_ns())

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
            self.pool._unwatch(self)
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


class WirePool:
    """``async with WirePool(limit=N) as pool: resp = await pool.request("POST", url, headers, body)``.

    ``limit``: most requests in flight at once (0: unbounded; size it to the in-flight cap).
    ``stamps``: ``"auto"`` (kernel receive stamps where the platform gives them) or ``"user"``.
    """

    def __init__(self, limit: int = 0, timeout_s: float = 600.0, connect_timeout_s: Optional[float] = 30.0,
                 keepalive_s: float = KEEPALIVE_S, stamps: str = "auto",
                 stop_reuse_after_retry: bool = True, mux: str = "epoll"):
        if stamps not in ("auto", "user"):
            raise ValueError(f"stamps: 'auto' or 'user', got {stamps!r}")
        if mux not in ("epoll", "loop"):
            raise ValueError(f"mux: 'epoll' or 'loop', got {mux!r}")
        self.mux = mux if hasattr(select, "epoll") else "loop"
        self.limit, self.timeout_s, self.connect_timeout_s = limit or 0, timeout_s, connect_timeout_s
        self.keepalive_s, self.stamps = keepalive_s, stamps
        self.stop_reuse_after_retry = stop_reuse_after_retry
        self.reuse_connections = True
        self.clock: Optional[kstamp.ClockMap] = None
        self.probe_tries = 0                        # loopback reads until the first kernel stamp (0: none)
        self._keeper: Optional[kstamp.StampKeeper] = None
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._sem: Optional[asyncio.Semaphore] = None
        self._idle: dict = {}
        self._conns: set = set()
        self._targets: dict = {}
        self._ep = None                             # the pool's own epoll (mux="epoll")
        self.filler = RecordFiller()                # fill(): records of finished streams, sliced
        self._fdmap: dict = {}
        # run-level tallies (folded in per response)
        self.retries = self.connections_opened = self.responses = 0
        self.reads = self.kernel_reads = self.future_stamps = 0
        self.lag_max_ns = self.lag_sum_ns = 0
        self.coalesced_reads = 0                    # over the records filled by fill()
        self.clock_steps: list = []                 # [perf_counter_ns, offset moved by ns] per step seen

    async def __aenter__(self) -> "WirePool":
        self.open()
        return self

    async def __aexit__(self, *exc) -> None:
        self.close()

    def open(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self.mux == "epoll" and self._ep is None:
            self._ep = select.epoll()
            self._loop.add_reader(self._ep.fileno(), self._on_epoll)
        if self.limit:
            self._sem = asyncio.Semaphore(self.limit)
        if self.stamps == "auto":
            self._keeper = kstamp.StampKeeper()
            if self._keeper.active:
                self.probe_tries = self._keeper.probe()
                self.clock = kstamp.measure()

    def close(self) -> None:
        """Close every connection (an exchange in flight ends as a ``connection`` error)."""
        for c in list(self._conns):
            c.failed("connection", "the client closed the connection (pool closed)", now_ns())
        self._idle.clear()
        if self._ep is not None:
            self._loop.remove_reader(self._ep.fileno())
            self._ep.close()
            self._ep = None
        if self._keeper is not None:
            self._keeper.close()

    def describe(self) -> dict:
        """For meta.json / sut.json: the stamping method and what the transport did."""
        kr, n = self.kernel_reads, self.reads
        if not n:
            src = "kernel" if self.clock is not None else "user"
        else:
            src = "kernel" if kr == n else ("user" if not kr else "mixed")
        return {"transport": "wire", "mux": self.mux, "stamp_source": src,
                "clock": self.clock.describe() if self.clock else None, "probe_tries": self.probe_tries,
                "reads": n, "kernel_stamped_reads": kr, "future_stamps": self.future_stamps,
                "clock_steps": self.clock_steps, "coalesced_reads": self.coalesced_reads,
                "read_lag_ns": {"max": self.lag_max_ns, "mean": self.lag_sum_ns // kr if kr else None},
                "responses": self.responses, "connections_opened": self.connections_opened,
                "stale_connection_retries": self.retries, "reuse_connections": self.reuse_connections}

    async def fill(self, resp: WireResponse, rec: Record, **kw) -> StreamTally:
        """``fill_record`` through the pool's ``RecordFiller`` (bounded slices; see there)."""
        try:
            return await self.filler.fill(resp, rec, **kw)
        finally:
            self.coalesced_reads += resp.coalesced_reads or 0

    # ---------------------------------------------------------------- connections
    def _watch(self, conn: _Conn) -> None:
        self._conns.add(conn)
        if self._ep is not None:
            self._fdmap[conn.fd] = conn
            self._ep.register(conn.fd, select.EPOLLIN)
        else:
            self._loop.add_reader(conn.fd, conn.on_readable)

    def _unwatch(self, conn: _Conn) -> None:
        self._conns.discard(conn)
        if self._ep is not None:
            if self._fdmap.get(conn.fd) is conn:
                del self._fdmap[conn.fd]
                try:
                    self._ep.unregister(conn.fd)
                except OSError:
                    pass
        else:
            self._loop.remove_reader(conn.fd)

    def _on_epoll(self) -> None:
        """The pool's own epoll is readable: read every ready connection, one loop callback."""
        get = self._fdmap.get
        for fd, _ev in self._ep.poll(0):
            conn = get(fd)
            if conn is not None:
                conn.on_readable()

    def _target(self, url: str) -> _Target:
        t = self._targets.get(url)
        if t is None:
            t = self._targets[url] = _Target(url)
        return t

    async def _addresses(self, tg: _Target) -> list:
        if tg.addrs is None:
            try:
                ip = ipaddress.ip_address(tg.host)
                tg.addrs = [(socket.AF_INET6 if ip.version == 6 else socket.AF_INET, (tg.host, tg.port))]
            except ValueError:
                infos = await self._loop.getaddrinfo(tg.host, tg.port, type=socket.SOCK_STREAM)
                tg.addrs = [(fam, addr) for fam, _, _, _, addr in infos]
        return tg.addrs

    async def _connect(self, tg: _Target) -> _Conn:
        err: Optional[BaseException] = None
        for fam, addr in list(await self._addresses(tg)):
            sock = socket.socket(fam, socket.SOCK_STREAM)
            try:
                sock.setblocking(False)
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                if self.clock is not None:
                    kstamp.enable_rx_timestamps(sock)
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
            conn = _Conn(self, tg.key, sock)
            self.connections_opened += 1
            return conn
        raise err if err is not None else OSError(f"no address for {tg.host}")

    def _idle_conn(self, key: tuple) -> Optional[_Conn]:
        idle = self._idle.get(key)
        now = self._loop.time()
        while idle:
            c = idle.pop()
            if c.closed:
                continue
            if now - c.idle_since > c.keepalive_s:
                c.close()
                continue
            c.reused = True
            return c
        return None

    def _release(self, conn: _Conn, resp: WireResponse) -> None:
        if (conn.closed or not resp.complete or not resp.keep_alive or not self.reuse_connections
                or conn.keepalive_s <= 0):
            conn.close()
            return
        conn.active, conn.resp, conn.parser = False, None, None
        conn.headers_fut = conn.done_fut = None
        conn.idle_since = self._loop.time()
        self._idle.setdefault(conn.key, []).append(conn)

    def check_clock(self) -> int:
        """Re-measure the REALTIME − perf_counter offset (tens of µs); a move beyond CLOCK_STEP_NS
        (the wall clock was stepped) is adopted for every later stamp and listed in
        ``clock_steps``. Runs every CLOCK_CHECK_EVERY responses and after a stamp from the
        future. Returns the move in ns."""
        if self.clock is None:
            return 0
        new = kstamp.measure(32)
        moved = new.offset_ns - self.clock.offset_ns
        if abs(moved) > CLOCK_STEP_NS and new.width_ns < CLOCK_STEP_NS // 10:
            self.clock.offset_ns = new.offset_ns          # the _Conns read it per callback
            self.clock_steps.append([new.measured_at_ns, moved])
        return moved

    def _fold(self, resp: WireResponse) -> None:
        if resp.future_stamps or self.responses % CLOCK_CHECK_EVERY == CLOCK_CHECK_EVERY - 1:
            self.check_clock()
        self.responses += 1
        self.reads += resp.n_reads
        self.kernel_reads += resp.kernel_reads
        self.future_stamps += resp.future_stamps
        self.lag_sum_ns += resp.lag_sum_ns
        if resp.lag_max_ns > self.lag_max_ns:
            self.lag_max_ns = resp.lag_max_ns

    # ---------------------------------------------------------------- requests
    def _head(self, method: str, tg: _Target, headers: Optional[dict], body: bytes) -> bytes:
        lines = [f"{method} {tg.path} HTTP/1.1", f"Host: {tg.hostport}"]
        have = set()
        for k, v in (headers or {}).items():
            lk = k.lower()
            if lk in ("host", "content-length", "connection", "transfer-encoding"):
                continue
            have.add(lk)
            lines.append(f"{k}: {v}")
        if "user-agent" not in have:
            lines.append(f"User-Agent: {USER_AGENT}")
        if "accept" not in have:
            lines.append("Accept: */*")
        if body or method not in ("GET", "HEAD"):
            lines.append(f"Content-Length: {len(body)}")
        if not self.reuse_connections:
            lines.append("Connection: close")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + body

    async def request(self, method: str, url: str, headers: Optional[dict] = None, body: bytes = b"",
                      resp: Optional[WireResponse] = None,
                      on_headers: Optional[Callable[[WireResponse], None]] = None) -> WireResponse:
        """One exchange, filled into ``resp`` (made if not given) and returned. Never raises but
        ``CancelledError`` (after closing the socket; ``resp`` then says ``cancelled``)."""
        if resp is None:
            resp = WireResponse()
        if self._loop is None:
            self.open()
        loop = self._loop
        deadline = loop.time() + self.timeout_s
        try:
            tg = self._target(url)
        except ValueError as e:
            resp.error_kind, resp.error, resp.end_at_ns = "client", str(e), now_ns()
            return resp
        sem = self._sem
        acquired = False
        try:
            if sem is not None:
                await asyncio.wait_for(sem.acquire(), max(deadline - loop.time(), 0))
                acquired = True
            for attempt in (0, 1):
                conn = None
                if attempt == 0 and self.reuse_connections:
                    conn = self._idle_conn(tg.key)
                if conn is None:
                    conn = await asyncio.wait_for(self._connect(tg), max(deadline - loop.time(), 0))
                await self._exchange(conn, self._head(method, tg, headers, body), resp, deadline,
                                     on_headers)
                if not (resp.stale and attempt == 0):
                    return resp
                # stale keep-alive connection: the request never reached the server; once more, fresh
                resp.retries += 1
                resp.first_sent_at_ns, resp.retry_error = resp.sent_at_ns, resp.error
                resp.error_kind = resp.error = resp.end_at_ns = None
                resp.stale = False
                self.retries += 1
                if self.stop_reuse_after_retry:
                    self.reuse_connections = False
            return resp
        except asyncio.TimeoutError:                 # waiting for the pool or connecting
            resp.error_kind = "timeout"
            resp.error = f"no complete answer within {self.timeout_s:g} s (no connection)"
            resp.end_at_ns = now_ns()
            return resp
        except OSError as e:                         # connect refused / unreachable / no address
            resp.error_kind, resp.error, resp.end_at_ns = "connection", f"{type(e).__name__}: {e}", now_ns()
            return resp
        except asyncio.CancelledError:
            if resp.error_kind is None:
                resp.error_kind, resp.error = "cancelled", "the run was interrupted before the request ended"
                resp.end_at_ns = now_ns()
            raise
        finally:
            self._fold(resp)
            if acquired:
                sem.release()

    async def _exchange(self, conn: _Conn, data: bytes, resp: WireResponse, deadline: float,
                        on_headers: Optional[Callable[[WireResponse], None]]) -> None:
        loop = self._loop
        conn.begin(resp)
        resp.new_connection = not conn.reused
        timer = loop.call_at(deadline, conn.timed_out, self.timeout_s)
        try:
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
            await conn.headers_fut
            if resp.error_kind is None and resp.status is not None and on_headers is not None:
                on_headers(resp)
            await conn.done_fut
        except asyncio.CancelledError:
            if resp.error_kind is None:
                resp.error_kind, resp.error = "cancelled", "the run was interrupted before the request ended"
                resp.end_at_ns = now_ns()
            conn.close()
            raise
        finally:
            timer.cancel()
            self._release(conn, resp)


# -------------------------------------------------------------------- WireResponse -> Record
def content_type(resp: WireResponse) -> str:
    """The MIME type as aiohttp's ``ClientResponse.content_type`` gives it."""
    ct = resp.headers.get("content-type")
    return ct.split(";", 1)[0].strip().lower() if ct else "application/octet-stream"


def fill_record(resp: WireResponse, rec: Record, *, stream: bool, continuous: bool = False,
                workload_prompt_tokens: Optional[int] = None) -> StreamTally:
    """Fill ``rec`` from one exchange exactly as ``client.Client.execute`` fills it from aiohttp
    (same fields, same rules), then ``request.finish``. Returns the tally. Sets
    ``rec.coalesced_reads`` where the Record has that field. ``RecordFiller.fill`` does the same
    in bounded slices."""
    return _drive(_fill_steps(resp, rec, stream, continuous, workload_prompt_tokens, 0))


def _drive(gen):
    """Run a ``_fill_steps`` generator to its end; its return value."""
    try:
        while True:
            next(gen)
    except StopIteration as stop:
        return stop.value


def _fill_steps(resp: WireResponse, rec: Record, stream: bool, continuous: bool,
                workload_prompt_tokens: Optional[int], every: int):
    """``fill_record`` as a generator that yields every ``every`` body pieces (0: never)."""
    tally = StreamTally(continuous)
    if resp.sent_at_ns is not None:
        rec.sent_at_ns = resp.sent_at_ns
    if resp.retries:
        rec.retries, rec.first_sent_at_ns, rec.retry_error = (
            resp.retries, resp.first_sent_at_ns, (resp.retry_error or "")[:SNIPPET])
    coalesced = 0
    if resp.status is not None:
        rec.http_status = resp.status
        if resp.status >= 300:
            snippet = resp.body()[:SNIPPET].decode("utf-8", "replace")
            fail(rec, "http", f"HTTP {resp.status}: {' '.join(snippet.split())}",
                 resp.end_at_ns if resp.end_at_ns is not None else resp.headers_at_ns)
        elif stream and content_type(resp) != "application/json":
            coalesced = yield from _stream_steps(resp, rec, tally, every)
        elif resp.complete:
            rec.end_at_ns = resp.end_at_ns
            apply_body(rec, tally, resp.body(), resp.end_at_ns)
    kind = resp.error_kind
    if kind == "cancelled":
        if rec.status != "ok":
            rec.status, rec.error_kind = "cancelled", "cancelled"
            rec.error = "the run was interrupted before the request ended"
        if rec.end_at_ns is None:
            rec.end_at_ns = resp.end_at_ns if resp.end_at_ns is not None else now_ns()
    elif kind is not None and rec.status == "pending":
        fail(rec, kind, resp.error or kind, resp.end_at_ns)
    elif rec.status == "pending" and resp.status is not None:
        fail(rec, "incomplete", "the response ended without a complete body", resp.end_at_ns)
    resp.coalesced_reads = coalesced
    if hasattr(rec, "coalesced_reads"):
        rec.coalesced_reads = coalesced
    finish(rec, tally, workload_prompt_tokens)
    return tally


def stream_to_record(resp: WireResponse, rec: Record, tally: StreamTally) -> int:
    """The stamped body pieces through ``SSEParser``: ``rec.chunks`` as ``[stamp, tokens]``, the
    end, the failures — ``client.Client._read_stream``'s rules. Returns the number of reads that
    carried more than one token chunk (``coalesced_reads``)."""
    return _drive(_stream_steps(resp, rec, tally, 0))


def _stream_steps(resp: WireResponse, rec: Record, tally: StreamTally, every: int):
    parser = SSEParser()
    feed = parser.feed
    add = tally.add
    append = rec.chunks.append
    done = False
    coalesced = 0
    last_t = None
    tokens_in_read = 0
    ev = None
    t = resp.end_at_ns
    pieces = list(resp.reads)
    if resp.complete:
        pieces.append((resp.end_at_ns, None))        # None: the end of the body, parser.finish()
    try:
        for i, (t, piece) in enumerate(pieces):
            if every and i % every == every - 1:
                yield
            evs = feed(piece) if piece is not None else parser.finish()
            if t != last_t:                           # pieces of one read share its stamp
                if tokens_in_read > 1:
                    coalesced += 1
                last_t, tokens_in_read = t, 0
            for ev in evs:
                if ev.__class__ is bytes:
                    if not ev:                        # "data:" with nothing: not a chunk
                        continue
                    n = add(loads(ev))
                    if n < 0:                         # an error object inside the 200 stream
                        append([t, 0])
                        fail(rec, "server_error", error_message(tally.error), t)
                        return coalesced
                    append([t, n])
                    if n:
                        tokens_in_read += 1
                elif ev is DONE:
                    if not done:
                        done = True
                        rec.end_at_ns = t
                        rec.status = "ok"
                elif ev.__class__ is NamedEvent:
                    if ev.event == "error":
                        append([t, 0])
                        fail(rec, "server_error", ev.data.decode("utf-8", "replace"), t)
                        return coalesced
                    append([t, max(add(loads(ev.data)), 0)])
                else:
                    fail(rec, "malformed", f"not server-sent events: {ev.line!r}", t)
                    return coalesced
    except ValueError as e:
        what = ev[:120] if isinstance(ev, bytes) else ev
        fail(rec, "malformed", f"bad JSON in stream ({e}): {what!r}", t)
        return coalesced
    if tokens_in_read > 1:
        coalesced += 1
    if resp.complete:
        end_stream(rec, tally, done, resp.end_at_ns)
    return coalesced


class RecordFiller:
    """``fill_record`` for finished responses on ONE task, at most ``budget_ns`` of parsing between
    two turns of the event loop: a burst of streams that end together (lockstep) never holds the
    socket reads up (a held-up read coalesces segments, and all but the last get its stamp).
    ``tally = await filler.fill(resp, rec, stream=..., ...)``; cancelled, it finishes the record
    synchronously and re-raises."""

    def __init__(self, budget_ns: int = 250_000, every: int = 8):
        self.budget_ns, self.every = budget_ns, every
        self._q: collections.deque = collections.deque()
        self._task: Optional[asyncio.Task] = None

    async def fill(self, resp: WireResponse, rec: Record, *, stream: bool, continuous: bool = False,
                   workload_prompt_tokens: Optional[int] = None) -> StreamTally:
        gen = _fill_steps(resp, rec, stream, continuous, workload_prompt_tokens, self.every)
        if not (stream and resp.reads):
            return _drive(gen)                        # nothing to slice
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._q.append((gen, fut))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())
        try:
            return await fut
        except asyncio.CancelledError:
            if fut.cancelled():                       # the worker skips it from now on
                _drive(gen)
            raise

    async def _run(self) -> None:
        q = self._q
        while q:
            end = now_ns() + self.budget_ns
            while q:                                  # at least one step per turn
                gen, fut = q[0]
                if fut.done():
                    q.popleft()
                    continue
                try:
                    next(gen)
                except StopIteration as stop:
                    q.popleft()
                    fut.set_result(stop.value)
                except BaseException as e:        # noqa: B902 - handed to the waiter
                    q.popleft()
                    fut.set_exception(e)
                if now_ns() >= end:
                    break
            await asyncio.sleep(0)
