"""idle: keeping a worker's gevent hub free for the reads (every read's kernel stamp is only
exact while the socket holds one chunk): bookkeeping that may wait runs when the hub has
nothing ready, and the cyclic GC stays out of the requests' way.

    WorkerLedger.write (record ─► JSON ─► records.worker-i.jsonl), Locust's request event
      ─► IdleQueue.put(fn, *args) ─► deque ─► one greenlet: gevent.idle() ─► fn(*args), one
         item per idle wake (libev runs idle watchers only when no other event is pending)
      ─► drain(): everything now, in order (the ledger's close: done, interrupt, SIGTERM)

Why: a lockstep decode step makes every stream's socket readable at once; a user that finishes
its request then used to encode and write its record before the hub went on reading the
others, so at a round's turnover the reads fell more than one token behind (two chunks, one
kernel stamp). Reads and sends stay where they were; only what no stamp depends on waits
here, for the gaps between decode steps. More than MAX_QUEUED waiting: the oldest runs at once
(a hub that is never idle still writes). A failing item is logged, as Locust logs a failing
task, and the queue goes on.

    hold_gc() / release_gc(saved)   the native client's rule (loadgen.client.clientload.gc_hold,
      not imported: it brings asyncio): freeze what exists (plan, Locust, modules) and collect
      young objects rarely, from a worker's warm-up to its done (node.py)
"""
from __future__ import annotations

import collections
import gc
import logging
from typing import Callable

import gevent
from gevent.event import Event

MAX_QUEUED = 4096
GC_GEN0 = 50_000        # loadgen.client.clientload.GC_GEN0: young collections this rarely
log = logging.getLogger(__name__)


def hold_gc() -> tuple:
    """Freeze what exists, collect young objects rarely; the thresholds to give back."""
    saved = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(saved[0], GC_GEN0), *saved[1:])
    return saved


def release_gc(saved: tuple) -> None:
    gc.set_threshold(*saved)
    gc.unfreeze()


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
        while True:
            self.ready.wait()
            while self.q:
                gevent.idle()
                if self.q:
                    self.ran_idle += 1
                    self._run(*self.q.popleft())
            self.ready.clear()

    def drain(self) -> None:
        """Everything still queued, now, in order."""
        while self.q:
            self._run(*self.q.popleft())

    def close(self) -> None:
        self.drain()
        self.closed = True
        self.g.kill(block=False)
