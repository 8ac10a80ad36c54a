"""Inside a Locust worker (gevent): its request source, the gevent runtime of the one sans-I/O
sender (engine/core/sender.SliceSender: the slice, what is due next and when, the stage gate, the
drain rule; engine/core/sessions via sessions.py), driven by the coordinator's plan ─► warm ─► go
─► stop messages. One request path for every user: body, journal, send, record (ledger.py);
at the end a report (CPU, hub lag, counts, stamping, clock) goes back as loadgen_done.
"""
from __future__ import annotations

import os
import socket
from pathlib import Path
from typing import Callable, Optional

import gevent
import msgspec.structs
from gevent.event import Event

from loadgen.client import accuracy, request
from loadgen.client.balance import Picker
from loadgen.client.hangup import HangupRule
from loadgen.client.attempt import DONE, INTERRUPTED, SEND, AttemptLoop
from loadgen.client.retry import RetryPolicy
from loadgen.client.gc_hold import hold_gc, release_gc
from loadgen.client.stream_step import Limits
from loadgen.client.gevent_wire.conn import process_stamps
from loadgen.client.gevent_wire.reader import process_reader
from loadgen.client.trace_context import TraceContext
from loadgen.engine.locust import user as user_mod
from loadgen.engine.locust.clock import LagSampler, sleep_until
from loadgen.engine.locust.idle import YoungGC
from loadgen.engine.locust.ledger import WorkerLedger
from loadgen.engine.locust.sessions import SessionWork
from loadgen.record import Record, now_ns
from loadgen.engine.core.clock import estimate_from
from loadgen.engine.core.in_flight import snapshot
from loadgen.engine.core.plan import Plan
from loadgen.engine.core.sender import SliceSender


class RequestSource(SliceSender):
    """One worker's slice: hands specs to its users, writes each record exactly once."""

    def __init__(self, sc, index: int, n: int, setup: dict, records_dir: Path,
                 send: Callable[[str, dict], None], forward: bool, api_key: Optional[str],
                 user_count: Optional[Callable[[], int]] = None):
        self.sc, self.index, self.n, self.send_msg, self.forward = sc, index, n, send, forward
        self.user_count = user_count         # this process's Locust users (stages share them)
        super().__init__(Plan(sc, index, n), sc.load)    # the pure slice sender (engine/core/)
        a = sc.api
        self.base_url = setup["base_url"].rstrip("/")
        self.url = self.base_url + request.endpoint_path(a.endpoint)
        self.shape = request.Shape(a, setup["model"], api_key,   # the native client's body,
                                   tuple(setup.get("drop_fields") or ()))   # headers, record
        self.trace = TraceContext.of(a)          # traceparent per request (client/trace_context)
        # target.urls: each request's replica picked here (balance.Picker, the native rule;
        # worker i starts its round-robin turns at URL i, as sender process i does natively)
        urls = sc.target.replica_urls
        self.replicas = (Picker(urls, sc.target.balance, index)
                         if urls and len(urls) > 1 else None)
        u = user_mod.LLMUser                     # users spawned from now on
        u.host, u.connection_timeout, u.network_timeout, u.follow_redirects = (
            self.base_url, a.connect_timeout_s, a.timeout_s, a.follow_redirects)
        self.limits = Limits.from_api(a.limits)
        self.hangups = HangupRule.of_scenario(sc)     # load.cancel: by id, as every engine
        self.retry = RetryPolicy.of_api(a)            # api.retry (client/retry.py), or None
        self.attempts: dict[int, AttemptLoop] = {}    # api.retry: the requests in flight's
        self.clock = setup.get("clock_estimate") or estimate_from(setup["clock"])
        self.shift = int(self.clock["shift_ns"])  # onto the master's clock (worker.py, engine.core.clock)
        self.stamps = process_stamps()           # kernel stamping on before the first connect
        self.work = SessionWork(self, self.plan) if self.plan.sessions else None
        self.hold = False                        # True: a batch of records, finish after it
        self.changed = Event()
        self.ledger = WorkerLedger(records_dir, index, self.shift, forward, send,
                                   arrow=sc.output.records == "arrow")
        self.later = self.ledger.idle.put        # what may wait for an idle hub (idle.py)
        self.sampler = LagSampler()
        self.gc_saved: Optional[tuple] = None    # GC thresholds before _hold_gc
        self.young: Optional[YoungGC] = None
        user_mod.NODE = self                     # this process's users now draw from here

    # -- phases (driven by the coordinator) --------------------------------------------------
    def on_message(self, t: str, data: dict) -> None:
        if t == "loadgen_warm":
            self.start_warm()
        elif t == "loadgen_go":
            self.go(data["t0_ns"], data.get("users_by_worker"))
        elif t == "loadgen_stop":
            self.interrupt(data.get("why") or "run interrupted")

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
        gevent.spawn(self._drain_watch)

    def _hold_gc(self) -> None:
        if self.gc_saved is None:                # from warm-up (or go) to done: hold_gc
            self.gc_saved = hold_gc()
            self.young = YoungGC()               # young objects collected when the hub idles

    # -- what a user does ------------------------------------------------------------------
    def serve(self, user) -> None:
        if self.work is not None and self.phase == "measured":
            if not self.work.serve(user):        # no session to play on this user (now)
                self.maybe_finish()
                self.changed.wait(0.05 if self.phase != "done" else 1.0)
            return
        t = now_ns()
        if self.stage_gate is not None and not self.idle:   # a staged closed loop
            if user.slot is None:
                user.slot, self.slots = self.slots, self.slots + 1
            what, t = self.gate(user.slot, t)    # SliceSender.gate: its stage's time, or
            if what != "send":                   # wait for the stage that needs it / the end
                if not sleep_until(t, lambda: self.stopped or self.exhausted) and what == "idle":
                    self.exhausted = True
                    self.maybe_finish()
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
        self.send(user, rec, spec, sched)

    def send(self, user, rec: Record, spec, sched: Optional[int] = None, *,
             messages: Optional[list] = None, headers: Optional[dict] = None,
             want_text: bool = False) -> None:
        """The one request path: sleep to ``sched`` (if later), body (request.Shape: ``spec``'s
        prompt, images, audio; a session turn's ``messages`` and ``headers``, ``want_text`` for
        its answer), journal, the attempt loop (client/attempt.py), record."""
        prompt, images, audio = spec.prompt, spec.images, spec.audio
        expected = spec.expected
        self.taken(rec)
        self.shape.prepare(rec, prompt, images, audio)     # the native client's record fields
        try:
            if sched is not None and sched > now_ns() and sleep_until(sched, lambda: self.stopped):
                return                   # interrupt() wrote it as cancelled
            try:
                data = self.shape.body(prompt, rec.requested_output_tokens, messages, images,
                                       audio=audio, model=rec.model)
            except (TypeError, ValueError) as e:
                request.fail(rec, "client", f"cannot build the request body: {e}")
            else:
                url, i = self.url, None
                if self.replicas is not None:    # picked at the send: rec.target_url
                    i = self.replicas.take(rec)
                    url = rec.target_url + request.endpoint_path(self.shape.endpoint)
                self.ledger.journal(rec)
                a = self.sc.api
                loop = AttemptLoop(rec, self.retry, self.hangups.of(rec.id, rec.phase)
                                   if self.hangups else None)
                if loop.att is not None:         # an interrupt's snapshot closes it (cancel)
                    self.attempts[rec.id] = loop
                hdrs = self.trace.stamp(request.with_headers(self.shape.headers, headers), rec)
                tally = None
                steps = loop.play(rec)
                try:
                    what, arg = next(steps)
                    while what is not DONE:      # the attempt loop's steps (client/attempt.py)
                        if what is SEND:
                            tally = self.shape.tally(want_text, expected)
                            user.send(url, hdrs, data, a.stream, rec, tally, a.timeout_s,
                                      self.limits, arg)
                        else:
                            gevent.sleep(arg)    # api.retry; a stop (GreenletExit) cancels it
                            if rec.id not in self.inflight:
                                break            # written (a stop, the drain)
                        what, arg = steps.send(now_ns())
                finally:
                    if i is not None:
                        self.replicas.done(i)
                    if loop.att is not None:
                        self.attempts.pop(rec.id, None)
                    loop.settle(rec)
                if expected is not None:     # a regex answer: on gevent's thread pool, bounded
                    accuracy.settle_gevent(rec, tally)
        except gevent.GreenletExit:
            self.cancel(rec, INTERRUPTED)
            raise
        self.write(rec)

    # -- the ledger (ledger.py) -------------------------------------------------------------
    def write(self, rec: Record) -> None:
        self.ended(rec)
        if self.ledger.write(rec):
            self.maybe_finish()

    def cancel(self, rec: Record, why: str) -> None:
        """``rec`` written as cancelled now (its user may still hold it): a copy, with its
        api.retry attempts so far closed in (client.retry.Attempts.close, as the native
        engine's cancellation does)."""
        loop = self.attempts.get(rec.id)
        if loop is not None:
            rec = msgspec.structs.replace(rec, chunks=list(rec.chunks))
            loop.close(rec)
        self.write(snapshot(rec, why))

    def maybe_finish(self) -> None:
        if self.hold:                            # records being written in a batch (a stop)
            return
        if self.warm_done:
            self.phase = "idle"
            users = self.user_count() if self.user_count is not None else None
            self.send_msg("loadgen_warm_done", {"index": self.index, "users": users})
        elif self.settled and not (self.work is not None and self.work.p.busy):
            self._done()

    def _drain_watch(self) -> None:
        """load.drain_timeout_s after the last send (SliceSender.drain_due; sessions: the
        SessionPlayer's): what is in flight cancelled, and every turn a session has left."""
        p = self.work.p if self.work is not None else None
        while self.phase == "measured" and not (p is not None and p.halted()):
            gevent.sleep(0.05)
            why = (self.drain_due(now_ns()) if p is None else p.drain_due(
                now_ns(), self.last_issue_ns, bool(self.inflight), self.load.drain_timeout_s))
            if why:
                self.hold = True
                for rec in [*self.inflight.values()]:
                    self.cancel(rec, why)
                for rec in p.drain(why) if p is not None else ():
                    self.write(rec)
                self.hold = False
                self.exhausted = self.exhausted or p is not None
                self.maybe_finish()

    def interrupt(self, why: str = INTERRUPTED) -> None:
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
