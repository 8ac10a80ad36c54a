"""Inside the Locust processes (gevent): a worker's request source and ledger, and the run's
coordinator on the master (or in the single local process).

    Coordinator (master)                          WorkerNode (each worker; index i of n)
      plan {digest, n, url, model, clock} ──────►  Plan(sc, i, n): its warm-up + measured slice
      ◄──────────────────────────── ready         records.worker-i.jsonl + sent.worker-i.jsonl
      runner.start(users)  (Locust spreads users over the workers)
      warm ──────────────────────────────────►   users drain the warm-up slice (closed loop)
      ◄─────────────────────────────── warm_done
      go {t0_ns} ────────────────────────────►   users pace the slice: server/offline: sleep to
                                                  t0 + offset, send; concurrency: send on free
      ◄──── records (remote workers only) ───     every record flushed to the worker's file
      ◄──────────────────────────────── done     (exhausted and drained, or drain timeout)
      master.json {t0, end, workers: done|dead} ─► runner.quit()

A worker that stops heart-beating is "dead" for the coordinator; the CLI side accounts for its
unfinished requests from its files. Times are perf_counter_ns; a worker on another host
(different boot id) shifts its times onto the master's clock through the wall clock.
"""
from __future__ import annotations

import collections
import dataclasses
import json
import os
import socket
from pathlib import Path
from typing import Callable, Optional

import gevent
from gevent.event import Event

from loadgen.client import request
from loadgen.locust_engine import user as user_mod
from loadgen.locust_engine.clock import (LagSampler, clock_estimate, clock_shift, rebase,
                                         same_host, sleep_until)
from loadgen.locust_engine.gconn import process_stamps
from loadgen.locust_engine.plan import Plan
from loadgen.record import Record, RecordWriter, now_ns
from loadgen.client.stream_step import Limits

FORWARD_EVERY_S = 0.1


class WorkerNode:
    """One worker's slice: hands specs to its users, writes each record exactly once."""

    def __init__(self, sc, index: int, n: int, setup: dict, records_dir: Path,
                 send: Callable[[str, dict], None], forward: bool, api_key: Optional[str]):
        self.sc, self.index, self.n, self.send_msg, self.forward = sc, index, n, send, forward
        self.plan = Plan(sc, index, n)
        a = sc.api
        self.base_url = setup["base_url"].rstrip("/")
        self.url = self.base_url + request.endpoint_path(a.endpoint)
        self.chat = a.endpoint == "chat"
        self.base = request.base_body(a, setup["model"], tuple(setup.get("drop_fields") or ()))
        self.headers = request.request_headers(a, api_key)
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
        self.warm = collections.deque(self.plan.warm_specs())
        self.measured = self.plan.measured_specs()
        self.closed = self.plan.schedule.offsets_ns is None
        self.phase = "idle"                      # idle | warm | measured | done
        self.changed = Event()
        self.inflight: dict[int, Record] = {}
        self.written: set[int] = set()
        self.exhausted = self.stopped = False
        self.t0: Optional[int] = None
        self.end_ns: Optional[int] = None
        self.last_issue_ns: Optional[int] = None
        records_dir.mkdir(parents=True, exist_ok=True)
        self.writer = RecordWriter(records_dir / f"records.worker-{index}.jsonl")
        self.journal = open(records_dir / f"sent.worker-{index}.jsonl", "a", buffering=1,
                            encoding="utf-8")
        self.batch_rec: list[str] = []
        self.batch_sent: list[str] = []
        self.sampler = LagSampler()
        self.sent_count = 0
        if forward:
            gevent.spawn(self._forward_loop)
        user_mod.NODE = self                     # this process's users now draw from here

    # -- phases (driven by the coordinator) --------------------------------------------------
    def _set_phase(self, phase: str) -> None:
        self.phase = phase
        ev, self.changed = self.changed, Event()
        ev.set()

    def start_warm(self) -> None:
        self._set_phase("warm")
        self._maybe_finish()

    def go(self, t0_master_ns: int) -> None:
        self.t0 = t0_master_ns - self.shift
        if self.closed and self.sc.load.duration_s:
            self.end_ns = self.t0 + int(self.sc.load.duration_s * 1e9)
        self.sampler.start()
        self._set_phase("measured")
        gevent.spawn(self._drain_watch)

    # -- what a user does ------------------------------------------------------------------
    def _next(self):
        if self.phase == "warm":
            return (self.warm.popleft(), now_ns()) if self.warm else None
        if self.phase != "measured" or self.exhausted or self.stopped:
            return None
        t = now_ns()
        if self.closed and self.t0 is not None and t < self.t0:
            return None
        if self.end_ns is not None and t >= self.end_ns:
            self.exhausted = True
            return None
        try:
            spec = next(self.measured)
        except StopIteration:
            self.exhausted = True
            return None
        return spec, (t if spec.offset_ns is None else self.t0 + spec.offset_ns)

    def serve(self, user) -> None:
        got = self._next()
        if got is None:
            self._maybe_finish()
            if self.phase == "measured" and self.t0 is not None and now_ns() < self.t0:
                sleep_until(self.t0, lambda: self.stopped)     # closed loop: start at t0
            else:
                self.changed.wait(0.05 if self.phase != "done" else 1.0)
            return
        spec, sched = got
        rec = Record(id=spec.id, phase=spec.phase, scheduled_at_ns=sched,
                     requested_output_tokens=spec.max_tokens,
                     workload_prompt_tokens=spec.prompt_tokens)
        self.inflight[spec.id] = rec
        self.last_issue_ns = sched
        try:
            if sched > now_ns() and sleep_until(sched, lambda: self.stopped):
                return                   # interrupt() wrote it as cancelled
            try:
                data = request.request_body(self.base, self.chat, spec.prompt, spec.max_tokens)
            except (TypeError, ValueError) as e:
                request.fail(rec, "client", f"cannot build the request body: {e}")
            else:
                self._journal(rec)
                a = self.sc.api
                user.send(self.url, self.headers, data, a.stream, rec, a.continuous_usage,
                          a.timeout_s, self.limits)
        except gevent.GreenletExit:
            self._cancel(rec, "the run was interrupted before the request ended")
            raise
        self._write(rec)

    # -- the ledger -------------------------------------------------------------------------
    def _journal(self, rec: Record) -> None:
        self.sent_count += 1
        line = json.dumps({"id": rec.id, "phase": rec.phase,
                           "scheduled_at_ns": rec.scheduled_at_ns + self.shift,
                           "sent_at_ns": now_ns() + self.shift,
                           "requested_output_tokens": rec.requested_output_tokens,
                           "workload_prompt_tokens": rec.workload_prompt_tokens})
        self.journal.write(line + "\n")
        if self.forward:
            self.batch_sent.append(line)

    def _write(self, rec: Record) -> None:
        if rec.id in self.written:
            return
        self.written.add(rec.id)
        self.inflight.pop(rec.id, None)
        rec.worker = str(self.index)
        rebase(rec, self.shift)
        self.writer.write(rec)
        if self.forward:
            self.batch_rec.append(rec.to_json())
        self._maybe_finish()

    def _cancel(self, rec: Record, why: str) -> None:
        snap = dataclasses.replace(rec, chunks=list(rec.chunks))
        if snap.status != "ok":
            if snap.sent_at_ns is None:           # a user held it, waiting for its time
                why = f"scheduled but never sent: {why.split(' before ')[0]}"
            snap.status, snap.error_kind, snap.error = "cancelled", "cancelled", why
        if snap.end_at_ns is None:
            snap.end_at_ns = now_ns()
        request.finish(snap, _Tally(snap), snap.workload_prompt_tokens)
        self._write(snap)

    def _maybe_finish(self) -> None:
        if self.phase == "warm" and not self.warm and not self.inflight:
            self.phase = "idle"
            self.send_msg("loadgen_warm_done", {"index": self.index})
        elif self.phase == "measured" and (self.exhausted or self.stopped) and not self.inflight:
            self._done()

    def _drain_watch(self) -> None:
        """After the last issue, give stragglers load.drain_timeout_s, then cancel them."""
        drain_ns = int(self.sc.load.drain_timeout_s * 1e9)
        while self.phase == "measured":
            gevent.sleep(0.05)
            if not self.exhausted or not self.inflight:
                continue
            if now_ns() - (self.last_issue_ns or now_ns()) > drain_ns:
                why = (f"not finished {self.sc.load.drain_timeout_s:g} s after the last send "
                       "(load.drain_timeout_s)")
                for rec in list(self.inflight.values()):
                    self._cancel(rec, why)

    def interrupt(self, why: str = "the run was interrupted before the request ended") -> None:
        self.stopped = True
        for rec in list(self.inflight.values()):
            self._cancel(rec, why)
        if self.phase != "done":
            self._done()

    def _done(self) -> None:
        if self.phase == "done":
            return
        self.phase = "done"
        report = self.sampler.stop()
        report.update(index=self.index, written=self.writer.count, sent=self.sent_count,
                      interrupted=self.stopped, host=socket.gethostname(), pid=os.getpid(),
                      clock_shift_ns=self.shift, clock=self.clock,
                      stamps=self.stamps.describe())
        self._flush_forward()
        self.writer.close()
        self.journal.close()
        self.send_msg("loadgen_done", report)
        self._set_phase("done")

    # -- remote workers: records also travel through Locust's messages -----------------------
    def _flush_forward(self) -> None:
        if self.batch_rec or self.batch_sent:
            recs, sent = self.batch_rec, self.batch_sent
            self.batch_rec, self.batch_sent = [], []
            self.send_msg("loadgen_records", {"index": self.index, "records": recs, "sent": sent})

    def _forward_loop(self) -> None:
        while self.phase != "done":
            gevent.sleep(FORWARD_EVERY_S)
            self._flush_forward()


class _Tally:
    """A finished StreamTally's view of a record (for re-deriving a cancelled snapshot)."""

    def __init__(self, rec: Record):
        self.completion_tokens = rec.usage_output_tokens
        self.prompt_tokens = rec.prompt_tokens if rec.prompt_tokens_source == "usage" else None
        self.finish_reason = rec.finish_reason
        self.chars = rec.output_chars or 0
