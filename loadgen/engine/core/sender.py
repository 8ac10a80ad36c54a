"""The sans-I/O sender: one sender's slice of the plan in, what to send next and when out.
It owns no loop, no socket and no clock of its own (the caller passes ``now``); the runtime
(a Locust worker's gevent users: engine/locust/request_source.py) only waits and sends.

    SliceSender(plan, load)        plan: engine/core/plan.Plan (this sender's warm-up + measured
                                   slice); load: scenario.load (duration, drain timeout, cap)
      phase                        idle ─► warm ─► idle (warm-up done) ─► measured ─► done
      begin(t0, users_by_worker)   the measured phase starts at t0: the mode's strategy of
                                   the one scheduler (pacing.pacing_for, begun at t0):
                                   concurrency stages (this sender's users per stage: the
                                   reported counts, else an even split) or load.duration_s
                                   bound ``end_ns``
      next(now) ─► (Spec, due)     the next request and its scheduled_at: warm-up: now;
                  | None           server/offline: t0 + its offset; closed loop: now (None
                                   before t0, after end_ns or when the slice is used up)
      gate(slot, now)              a staged closed loop's user ``slot``: ("send", now) | ("wait",
                                   the next stage that needs it) | ("idle", end_ns: none does)
      record(spec, due)            the Record the exchange fills (the ledger's, once finished)
      taken(rec) / ended(rec)      the in-flight table (a stop cancels what is in it)
      drain_due(now) ─► why        load.drain_timeout_s after the last send (or end_ns) with
                                   requests still in flight: the reason each is cancelled
      warm_done / settled          the warm-up slice is drained / the measured phase is over
    drain_why(timeout_s, after)    the one wording of a drain timeout's cancelled records
                                   (pacing.py's, re-exported)
Pure: no asyncio, no gevent.
"""
from __future__ import annotations

import collections
from typing import Optional, Sequence

from loadgen.client.attempt import new_record
from loadgen.record import Record
from loadgen.engine.core.pacing import Pacing, drain_why, pacing_for
from loadgen.engine.core.stages import StageGate, even_split

NS = 1_000_000_000
__all__ = ["SliceSender", "drain_why"]


class SliceSender:
    """One sender's slice of the plan and the rules of its pacing (see the module's table)."""

    def __init__(self, plan, load):
        self.plan, self.load = plan, load
        self.warm = collections.deque(plan.warm_specs())
        self.measured = plan.measured_specs()
        self.closed = plan.schedule.offsets_ns is None
        self.pacing: Optional[Pacing] = None     # the mode's strategy, from begin on
        self.slots = 0                           # users seen in a staged run (local index)
        self.phase = "idle"                      # idle | warm | measured | done
        self.inflight: dict[int, Record] = {}
        self.exhausted = self.stopped = False
        self.t0: Optional[int] = None
        self.end_ns: Optional[int] = None
        self.last_issue_ns: Optional[int] = None

    def begin(self, t0: int, users_by_worker: Optional[Sequence[int]] = None) -> None:
        """The measured phase from ``t0`` (the stages end it: pacing.Staged, the native rule)."""
        self.t0, plan, ld = t0, self.plan, self.load
        ub = users_by_worker
        if plan.stages and (not ub or len(ub) != plan.n or not sum(ub)):
            ub = even_split(ld.in_flight_cap, plan.n)
        self.pacing = pacing_for(ld, plan.schedule, bool(plan.sessions), stages=plan.stages or [],
                                 index=plan.index, users_by_worker=ub).begin(t0)
        if not plan.sessions:                    # sessions: the session player's own end
            self.end_ns = self.pacing.end_ns

    @property
    def stage_gate(self) -> Optional[StageGate]:
        """Concurrency stages' gate (from begin on), else None."""
        return getattr(self.pacing, "gate", None)

    @property
    def idle(self) -> bool:
        """Nothing to send from this sender now: not in a phase, used up or stopped."""
        return self.phase != "measured" or self.stopped or self.exhausted

    def next(self, now: int):
        """The next spec and its scheduled time (see the module's table), or None."""
        if self.phase == "warm":
            return (self.warm.popleft(), now) if self.warm else None
        if self.idle:
            return None
        if self.closed and self.t0 is not None and now < self.t0:
            return None
        if self.end_ns is not None and now >= self.end_ns:
            self.exhausted = True
            return None
        try:
            spec = next(self.measured)
        except StopIteration:
            self.exhausted = True
            return None
        return spec, (now if spec.offset_ns is None else self.t0 + spec.offset_ns)

    def gate(self, slot: int, now: int) -> tuple[str, Optional[int]]:
        """A staged closed loop: may local user ``slot`` send at ``now`` (its request's
        scheduled_at, so a request belongs to the stage that let it go)?"""
        when = self.pacing.free_at(slot, now)
        if when is None:                         # no stage from now on needs it
            return "idle", self.end_ns
        return ("wait", when) if when > now else ("send", now)

    @staticmethod
    def record(spec, due: Optional[int]) -> Record:
        return new_record(spec.id, spec.phase, due, spec.max_tokens, spec.prompt_tokens)

    def taken(self, rec: Record) -> None:
        self.inflight[rec.id] = rec

    def ended(self, rec: Record) -> None:
        self.inflight.pop(rec.id, None)

    def drain_due(self, now: int) -> Optional[str]:
        """The slice is used up and requests are still in flight load.drain_timeout_s after
        the last send (a closed loop: after its end): why each is cancelled; else None."""
        if not self.exhausted or not self.inflight:
            return None
        last = max(self.last_issue_ns or now, self.end_ns or 0)
        if now - last > int(self.load.drain_timeout_s * NS):
            return drain_why(self.load.drain_timeout_s)
        return None

    @property
    def warm_done(self) -> bool:
        return self.phase == "warm" and not self.warm and not self.inflight

    @property
    def settled(self) -> bool:
        """The measured phase is over: used up or stopped, nothing in flight."""
        return (self.phase == "measured" and (self.exhausted or self.stopped)
                and not self.inflight)
