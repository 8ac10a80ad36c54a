"""Inside a Locust worker (gevent): its request source — the gevent driver of the sans-I/O
sender (senders/sender.SliceSender: the slice of the plan, what is due next and when, the stage
gate, the drain rule), the session driver asked before each send, one request path (body,
journal, send, record) — driven by the run's coordinator on the master. This only waits and
sends.

    Coordinator (master)                          RequestSource (each worker; index i of n)
      plan {digest, n, url, model, clock} ──────►  Plan(sc, i, n): its warm-up + measured slice
      ◄──────────────────────────── ready         records.worker-i.jsonl + sent.worker-i.jsonl
      runner.start(users)  (Locust spreads users over the workers)
      warm ──────────────────────────────────►   users drain the warm-up slice (closed loop)
      ◄─────────────────────────────── warm_done
      go {t0_ns, users_by_worker} ───────────►   users pace the slice: server/offline: sleep to
                                                  t0 + offset, send; concurrency: send on free
                                                  (stages: only the users the stage running now
                                                  needs, stages.py); sessions: each user plays
                                                  one session at a time (sessions.py)
      ◄──── records (remote workers only) ───     every record flushed to the worker's file
                                                  exactly once (ledger.py)
      ◄──────────────────────────────── done     (exhausted and drained, or drain timeout)
      master.json {t0, end, workers: done|dead} ─► runner.quit()

A worker that stops heart-beating is "dead" for the coordinator; the CLI side accounts for its
unfinished requests from its files. Times are perf_counter_ns; a worker on another host
(different boot id) shifts its times onto the master's clock through the wall clock.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Callable, Optional

import gevent
from gevent.event import Event

from loadgen.client import request
from loadgen.client.balance import Picker
from loadgen.client.gc_hold import hold_gc, release_gc
from loadgen.client.stream_step import Limits
from loadgen.locust_engine import user as user_mod
from loadgen.locust_engine.clock import LagSampler, sleep_until
from loadgen.client.gevent_wire.conn import process_stamps
from loadgen.locust_engine.idle import YoungGC
from loadgen.locust_engine.ledger import WorkerLedger
from loadgen.client.gevent_wire.reader import process_reader
from loadgen.locust_engine.sessions import SessionWork
from loadgen.record import Record, now_ns
from loadgen.run.senders.clock import clock_estimate, clock_shift, same_host
from loadgen.run.senders.plan import Plan
from loadgen.run.senders.sender import SliceSender


class RequestSource(SliceSender):
    """One worker's slice: hands specs to its users, writes each record exactly once."""

    def __init__(self, sc, index: int, n: int, setup: dict, records_dir: Path,
                 send: Callable[[str, dict], None], forward: bool, api_key: Optional[str],
                 user_count: Optional[Callable[[], int]] = None):
        self.sc, self.index, self.n, self.send_msg, self.forward = sc, index, n, send, forward
        self.user_count = user_count         # this process's Locust users (stages share them)
        super().__init__(Plan(sc, index, n), sc.load)    # the pure slice sender (senders/)
        a = sc.api
        self.base_url = setup["base_url"].rstrip("/")
        self.url = self.base_url + request.endpoint_path(a.endpoint)
        # the native client's request shape: body, headers, record fields, the tally
        self.shape = request.Shape(a, setup["model"], api_key,
                                   tuple(setup.get("drop_fields") or ()))
        # target.urls: this process picks each request's replica (balance.pick, the native
        # client's pure rule; least_in_flight counts this process's requests only); worker i
        # starts its round-robin turns at URL i, as sender process i does natively
        urls = sc.target.replica_urls
        self.replicas = (Picker(urls, sc.target.balance, index)
                         if urls and len(urls) > 1 else None)
        user_mod.LLMUser.host = self.base_url   # users spawned from now on (Locust's UI label)
        user_mod.LLMUser.connection_timeout = a.connect_timeout_s
        user_mod.LLMUser.network_timeout = a.timeout_s
        user_mod.LLMUser.follow_redirects = a.follow_redirects
        self.limits = Limits.from_api(a.limits)
        # the shift onto the master's clock: measured by the worker's ping-pong (worker.py), else
        # 0 on one host / the wall clocks' (clock.clock_estimate); latencies never use it
        self.clock = setup.get("clock_estimate") or clock_estimate(
            same_host(setup["clock"]), (), clock_shift(setup["clock"]))
        self.shift = int(self.clock["shift_ns"])
        self.stamps = process_stamps()           # kernel stamping on before the first connect
        self.work = SessionWork(self, self.plan) if self.plan.sessions else None
        self.hold = False                        # True: a batch of records, finish after it
        self.changed = Event()
        self.ledger = WorkerLedger(records_dir, index, self.shift, forward, send)
        self.later = self.ledger.idle.put        # what may wait for an idle hub (idle.py)
        self.sampler = LagSampler()
        self.gc_saved: Optional[tuple] = None    # GC thresholds before _hold_gc
        self.young: Optional[YoungGC] = None
        user_mod.NODE = self                     # this process's users now draw from here

    # -- phases (driven by the coordinator) --------------------------------------------------
    def _set_phase(self, phase: str) -> None:
        self.phase = phase
        ev, self.changed = self.changed, Event()
        ev.set()

    def start_warm(self) -> None:
        self._hold_gc()
        self._set_phase("warm")
        self.maybe_finish()

    def go(self, t0_master_ns: int, users_by_worker: Optional[list] = None) -> None:
        self.begin(t0_master_ns - self.shift, users_by_worker)
        self._hold_gc()
        self.sampler.start()
        self._set_phase("measured")
        if self.work is not None:
            self.work.go(self.t0)
        else:
            gevent.spawn(self._drain_watch)

    def _hold_gc(self) -> None:
        if self.gc_saved is None:                # from warm-up (or go) to done: hold_gc
            self.gc_saved = hold_gc()
            self.young = YoungGC()               # young objects collected when the hub idles

    # -- what a user does ------------------------------------------------------------------
    def _gate(self, user) -> Optional[int]:
        """A staged closed loop: the time at which a stage needed ``user`` (SliceSender.gate),
        or None after it waited (for the stage that needs it, or to the end when none does)."""
        if self.idle:
            return now_ns()
        if user.slot is None:
            user.slot, self.slots = self.slots, self.slots + 1
        what, t = self.gate(user.slot, now_ns())
        if what == "send":
            return t
        if not sleep_until(t, lambda: self.stopped or self.exhausted) and what == "idle":
            self.exhausted = True
            self.maybe_finish()
        return None

    def serve(self, user) -> None:
        if self.work is not None and self.phase == "measured":
            if not self.work.serve(user):        # no session to play on this user (now)
                self.maybe_finish()
                self.changed.wait(0.05 if self.phase != "done" else 1.0)
            return
        t = now_ns()
        if self.stage_gate is not None:
            t = self._gate(user)
            if t is None:
                return
        got = self.next(t)
        if got is None:
            self.maybe_finish()
            if self.phase == "measured" and self.t0 is not None and now_ns() < self.t0:
                sleep_until(self.t0, lambda: self.stopped)     # closed loop: start at t0
            else:
                self.changed.wait(0.05 if self.phase != "done" else 1.0)
            return
        spec, sched = got
        rec = self.record(spec, sched)
        self.last_issue_ns = sched
        self.send(user, rec, spec.prompt, None, None, False, sched, spec.images)

    def send(self, user, rec: Record, prompt, messages: Optional[list], headers: Optional[dict],
             want_text: bool, sched: Optional[int] = None,
             images: Optional[tuple] = None) -> None:
        """The one request path: sleep to ``sched`` (if later), body, journal, send, record.
        ``messages`` (a session turn): the whole conversation; ``headers``: its own headers;
        ``want_text``: keep the answer's text (Record.output_text, the next turn sends it);
        ``images``: workload.images' data URLs (their parts JSON-encoded once per process,
        request.image_part, spliced into the body)."""
        self.taken(rec)
        self.shape.prepare(rec, prompt, images)     # the native client's record fields
        try:
            if sched is not None and sched > now_ns() and sleep_until(sched, lambda: self.stopped):
                return                   # interrupt() wrote it as cancelled
            try:
                data = self.shape.body(prompt, rec.requested_output_tokens, messages, images)
            except (TypeError, ValueError) as e:
                request.fail(rec, "client", f"cannot build the request body: {e}")
            else:
                url, i = self.url, None
                if self.replicas is not None:    # picked at the send: rec.target_url
                    i = self.replicas.take(rec)
                    url = rec.target_url + request.endpoint_path(self.shape.endpoint)
                self.ledger.journal(rec)
                a = self.sc.api
                try:
                    user.send(url, request.with_headers(self.shape.headers, headers), data,
                              a.stream, rec, self.shape.tally(want_text), a.timeout_s,
                              self.limits)
                finally:
                    if i is not None:
                        self.replicas.done(i)
        except gevent.GreenletExit:
            self.cancel(rec, "the run was interrupted before the request ended")
            raise
        self.write(rec)

    # -- the ledger (ledger.py) -------------------------------------------------------------
    def write(self, rec: Record) -> None:
        self.ended(rec)
        if self.ledger.write(rec):
            self.maybe_finish()

    def cancel(self, rec: Record, why: str) -> None:
        self.write(self.ledger.snapshot(rec, why))

    def maybe_finish(self) -> None:
        if self.hold:                            # records being written in a batch (a stop)
            return
        if self.warm_done:
            self.phase = "idle"
            users = self.user_count() if self.user_count is not None else None
            self.send_msg("loadgen_warm_done", {"index": self.index, "users": users})
        elif self.settled and not (self.work is not None and self.work.busy):
            self._done()

    def _drain_watch(self) -> None:
        """After the last issue, give stragglers load.drain_timeout_s, then cancel them."""
        while self.phase == "measured":
            gevent.sleep(0.05)
            why = self.drain_due(now_ns())
            for rec in list(self.inflight.values()) if why else ():
                self.cancel(rec, why)

    def interrupt(self, why: str = "the run was interrupted before the request ended") -> None:
        self.stopped = self.hold = True
        try:
            for rec in list(self.inflight.values()):
                self.cancel(rec, why)
            if self.work is not None and self.phase == "measured":
                self.work.stop(why)          # every turn a session never sent: cancelled
        finally:
            self.hold = False
        if self.phase != "done":
            self._done()

    def _done(self) -> None:
        if self.phase == "done":
            return
        self.phase = "done"
        report = self.sampler.stop()
        self.ledger.close()                      # records still queued are written first
        report.update(index=self.index, written=self.ledger.writer.count,
                      sent=self.ledger.sent_count,
                      interrupted=self.stopped, host=socket.gethostname(), pid=os.getpid(),
                      clock_shift_ns=self.shift, clock=self.clock,
                      stamps=self.stamps.describe(), reader=process_reader().describe())
        if self.replicas is not None:            # target.urls: this process's picks (run.py)
            report["replicas"] = self.replicas.describe()
        if self.gc_saved is not None:
            report.update(self.young.stop())
            release_gc(self.gc_saved)
            self.gc_saved = None
        self.send_msg("loadgen_done", report)
        self._set_phase("done")
