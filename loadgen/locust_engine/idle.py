"""idle: keeping a worker's gevent hub free for the reads (every read's kernel stamp is only
exact while the socket holds one chunk): bookkeeping that may wait runs when the hub has
nothing ready (the cyclic GC is kept out of the requests' way by request_source.py, with the native
client's rule: loadgen.client.gc_hold, standard library only, so no asyncio here).

    WorkerLedger.write (record ─► JSON ─► records.worker-i.jsonl), Locust's request event
      ─► IdleQueue.put(fn, *args) ─► deque ─► one greenlet: gevent.idle() ─► fn(*args), items
         in order for up to SLICE_NS per idle wake (libev runs idle watchers only when no
         other event is pending; a socket that turns readable meanwhile waits at most a slice)
      ─► drain(): everything now, in order (the ledger's close: done, interrupt, SIGTERM)
    YoungGC (while the GC is held): every CHECK_S, when more than YOUNG_BATCH young objects
      wait, gc.collect(0) at the next idle moment: small collections between decode steps,
      never the held threshold's one long pause in the middle of a step's reads

Why: a lockstep decode step makes every stream's socket readable at once; a user that finishes
its request then used to encode and write its record before the hub went on reading the
others, so at a round's turnover the reads fell more than one token behind (two chunks, one
kernel stamp). Reads and sends stay where they were; only what no stamp depends on waits
here, for the gaps between decode steps. More than MAX_QUEUED waiting: the oldest runs at once
(a hub that is never idle still writes). A failing item is logged, as Locust logs a failing
task, and the queue goes on.
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
