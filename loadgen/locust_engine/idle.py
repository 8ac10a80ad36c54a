"""idle: keeping a worker's gevent hub free for the reads (every read's kernel stamp is only
exact while the socket holds one chunk): bookkeeping that may wait runs when the hub has
nothing ready (the cyclic GC is kept out of the requests' way by node.py, with the native
client's rule: loadgen.client.gc_hold, standard library only, so no asyncio here).

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
"""
from __future__ import annotations

import collections
import logging
from typing import Callable

import gevent
from gevent.event import Event


MAX_QUEUED = 4096
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
