"""reader: ONE reader per worker process for every streaming socket (the native mux's rule, in gevent).

    GConn.exchange (the user's greenlet): sent_at_ns, send, Reader.watch(conn), then it waits
      on conn.done (a gevent Event) ONCE per request: no greenlet switch and no watcher per read
    Reader, kind "epoll": the process's own epoll (the original select.epoll, level-triggered;
      gevent's monkey-patching hides it) ─► ONE gevent io watcher on its fd ─► one reader
      greenlet: hub.wait(watcher) ─► pump(): epoll.poll(0) ─► inline, in two passes:
        1. every ready socket read: conn.recv(), recvmsg + SO_TIMESTAMPNS ancillary data and the
           user time of the read (only syscalls: the whole lockstep burst leaves the sockets
           within ~1 ms, so a socket's next chunk cannot join this one in a late read)
        2. every read processed in order: conn.process(), the kernel stamp → perf_counter
           clock, httptools framing, THE stream step (loadgen.client.stream_step, the native
           engine's); a read's stamp never depends on when pass 2 gets to it
      ─► the exchange ended (message complete, EOF, failure): unwatch, conn.done.set()
         (the user greenlet wakes to finish its record)
    kind "watchers": one gevent io watcher per socket whose callback is conn.on_readable, run
      by the hub itself (no greenlet); where select.epoll is missing, or LOADGEN_LOCUST_READER.

``pump()`` is also what a greenlet calls before non-stamping work (reads first: a user woken
at its answer's end pumps before it builds the record, and again before the next send): the
sockets that are ready are read before it goes on. Not
re-entrant (a pump inside a pump returns at once). A conn whose read raised (a bug of ours) is
failed as ``client`` and its user woken: the reader never dies with one socket.
"""
from __future__ import annotations

import logging
import os
from typing import Optional

import gevent
from gevent import monkey

log = logging.getLogger(__name__)
KINDS = ("epoll", "watchers")


def _original_epoll():
    try:
        return monkey.get_original("select", "epoll")
    except (AttributeError, ImportError):
        return None


class Reader:
    """Readiness of every watched conn (module doc). ``watch`` / ``unwatch`` a conn (anything
    with ``fd``, ``on_readable()`` and ``read_failed(exc)``); ``pump`` reads what is ready."""

    def __init__(self, kind: Optional[str] = None):
        kind = kind or os.environ.get("LOADGEN_LOCUST_READER") or "epoll"
        if kind not in KINDS:
            raise ValueError(f"LOADGEN_LOCUST_READER: 'epoll' or 'watchers', got {kind!r}")
        ep = _original_epoll() if kind == "epoll" else None
        self.kind = "epoll" if ep is not None else "watchers"
        self.loop = gevent.get_hub().loop
        self.conns: dict = {}                  # fd -> conn
        self.pumping = False
        self.wakes = self.ready_reads = 0      # reader wakes, ready sockets read (diagnostics)
        self._ep = ep() if ep is not None else None
        self._g: Optional[gevent.Greenlet] = None
        self._io = None
        self._watchers: dict = {}              # fd -> io watcher (kind "watchers")

    def watch(self, conn) -> None:
        fd = conn.fd
        self.conns[fd] = conn
        if self._ep is not None:
            try:
                self._ep.register(fd, 1)       # EPOLLIN, level-triggered
            except FileExistsError:            # a number left registered by a closed socket
                self._ep.modify(fd, 1)
            if self._g is None:
                self._io = self.loop.io(self._ep.fileno(), 1)
                self._g = gevent.spawn(self._run)
        else:
            w = self._watchers[fd] = self.loop.io(fd, 1)
            w.start(self._one, conn)

    def unwatch(self, conn) -> None:
        """Stop watching ``conn`` (before its socket closes: descriptor numbers are reused)."""
        fd = conn.fd
        if self.conns.get(fd) is not conn:
            return
        del self.conns[fd]
        if self._ep is not None:
            try:
                self._ep.unregister(fd)
            except OSError:
                pass
        else:
            w = self._watchers.pop(fd, None)
            if w is not None:
                w.close()

    def _run(self) -> None:
        wait = gevent.get_hub().wait
        while True:
            wait(self._io)
            self.wakes += 1
            self.pump()

    def pump(self) -> None:
        """Read every socket that is ready now, inline (kind "epoll"; a no-op for "watchers",
        whose callbacks the hub runs as soon as it polls)."""
        if self.pumping or self._ep is None or not self.conns:
            return
        self.pumping = True
        try:
            get = self.conns.get
            got = []                           # pass 1: every ready socket read (recvmsg only)
            for fd, _ev in self._ep.poll(0):
                conn = get(fd)
                if conn is None:
                    continue
                self.ready_reads += 1
                try:
                    r = conn.recv()
                except Exception as e:         # noqa: BLE001 - ours: one record, not the reader
                    self._broken(conn, e)
                    continue
                if r is not None:
                    got.append((conn, r))
            for conn, r in got:                # pass 2: stamps, framing, the stream step
                try:
                    conn.process(r)
                except Exception as e:         # noqa: BLE001
                    self._broken(conn, e)
        finally:
            self.pumping = False

    def _one(self, conn) -> None:
        self.ready_reads += 1
        try:
            conn.on_readable()
        except Exception as e:                 # noqa: BLE001 - ours, not the server's: one record
            self._broken(conn, e)

    def _broken(self, conn, e: BaseException) -> None:
        log.exception("reading a socket failed")
        try:
            conn.read_failed(e)
        finally:
            self.unwatch(conn)

    def describe(self) -> dict:
        """For meta.json (locust.worker_reports[i].reader)."""
        return {"kind": self.kind, "wakes": self.wakes, "ready_reads": self.ready_reads}

    def close(self) -> None:
        for conn in list(self.conns.values()):
            self.unwatch(conn)
        if self._g is not None:
            self._g.kill(block=False)
            self._g = None
        if self._io is not None:
            self._io.close()
            self._io = None
        if self._ep is not None:
            self._ep.close()
            self._ep = None


_READER: Optional[Reader] = None


def process_reader() -> Reader:
    """This process's one reader (made on first use, in the gevent world)."""
    global _READER
    if _READER is None:
        _READER = Reader()
    return _READER
