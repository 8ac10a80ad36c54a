"""Keeping a worker's gevent hub free for the reads: a read's kernel stamp is exact only while
its socket holds one chunk, and a lockstep decode step makes every stream readable at once.
What no stamp depends on (record lines: ledger.py; Locust's request events) waits here:

    IdleQueue.put(fn, *args) ─► one greenlet: gevent.idle() (libev runs idle watchers only when
        no other event is pending) ─► fn(*args) in order, up to SLICE_NS per idle wake; more
        than MAX_QUEUED waiting: the oldest runs at once; close(): everything, now
    YoungGC: while the GC is held (client.gc_hold), gc.collect(0) at idle moments once more than
        YOUNG_BATCH young objects wait: small pauses between decode steps, not one long one
A failing item is logged, as Locust logs a failing task, and the queue goes on.
"""
from __future__ import annotations

import collections
import gc
import logging
import time
from typing import Callable

import gevent
from gevent.event import Event


MAX_QUEUED = 4096
SLICE_NS = 300_000        # deferred work run per idle wake before the hub polls again
log = logging.getLogger(__name__)


class IdleQueue:
    def __init__(self, max_queued: int = MAX_QUEUED):
        self.max_queued = max_queued
        self.q: collections.deque = collections.deque()
        self.ready = Event()
        self.closed = False
        self.ran = self.ran_idle = 0             # items run, of which in an idle slot
        self.g = gevent.spawn(self._loop)

    def put(self, fn: Callable, *args) -> None:
        """Run ``fn(*args)`` when the hub is idle (at once once closed)."""
        if self.closed:
            self._run(fn, args)
            return
        self.q.append((fn, args))
        if len(self.q) > self.max_queued:
            self._run(*self.q.popleft())
        self.ready.set()

    def _run(self, fn: Callable, args: tuple) -> None:
        self.ran += 1
        try:
            fn(*args)
        except Exception:                        # noqa: BLE001 - logged, the queue goes on
            log.exception("deferred work failed: %r", fn)

    def _loop(self) -> None:
        now_ns = time.perf_counter_ns
        q = self.q
        while True:
            self.ready.wait()
            while q:
                gevent.idle()
                end = now_ns() + SLICE_NS
                while q:
                    self.ran_idle += 1
                    self._run(*q.popleft())
                    if now_ns() >= end:
                        break
            self.ready.clear()

    def drain(self) -> None:
        """Everything still queued, now, in order."""
        while self.q:
            self._run(*self.q.popleft())

    def close(self) -> None:
        self.drain()
        self.closed = True
        self.g.kill(block=False)


YOUNG_BATCH = 4000              # young objects per idle-time collection (about a millisecond)
CHECK_S = 0.02


class YoungGC:
    """While the GC is held (gc_hold: gen-0 threshold 50 000, whose collection of a stream's
    ``[t, n]`` lists stalls the hub for tens of ms), collect the young generation in small
    batches when the hub is idle. Only gen 0: its survivors wait for the release."""

    def __init__(self, batch: int = YOUNG_BATCH, check_s: float = CHECK_S):
        self.batch, self.check_s = batch, check_s
        self.runs = self.ns = 0                  # collections made, their time in total
        self.g = gevent.spawn(self._loop)

    def _loop(self) -> None:
        from loadgen.record import now_ns
        while True:
            gevent.sleep(self.check_s)
            if gc.get_count()[0] > self.batch:
                gevent.idle()
                t = now_ns()
                gc.collect(0)
                self.ns += now_ns() - t
                self.runs += 1

    def stop(self) -> dict:
        self.g.kill(block=False)
        return {"young_collections": self.runs, "young_collect_ms": round(self.ns / 1e6, 1)}
