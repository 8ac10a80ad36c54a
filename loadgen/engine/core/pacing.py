"""The one scheduler, sans-I/O: per load mode, what is due next and what may be drained.

    pacing_for(load, schedule, ...)  the ONE load-mode switch of the engines (a factory);
    slice_pacing(load, schedule, k, n)  sender k of n's share (a --procs child's), the same:
        offline          Offline    planned: request i due at t0 (MLPerf Offline)
        server | trace   OpenLoop   planned: request i due at t0 + offsets[i]; t0 starts
                                    T0_LEAD_NS after set-up so the first sends are not late
        concurrency      Closed     N users: a free user sends now, until num_requests were
                                    issued or load.duration_s ended (refill on each end)
        concurrency +    Staged     user k sends while a stage running now needs it, else
          stages                    waits for the next stage that does (engine.core.stages.StageGate)
        workload sessions Sessions  the session player's (engine.core.sessions): opened at the
                                    schedule's times (server) or by N users (concurrency)
    each strategy, fed the caller's clock (``now``, ``last_issue_ns``; no loop, no sleep):
        planned / users        which driver loop runs it (due times / a user pool)
        begin(t0)              the measured phase starts at t0 (ends: ``end_ns``)
        due(i)                 planned: request i's scheduled time
        when(slot, now)        users: now (send), a later time (wait until), None (done)
        free_at(slot, now)     the same but for the num_requests budget (a slice's own)
        took()                 a user sent one (the num_requests budget)
        drain_due(now, last)   the reason to cancel what is in flight, or None (not yet)
        unsent()               a closed loop's never-started remainder (a count), or None
Drivers only wait and send: asyncio (loadgen.engine.aio.dispatch.Dispatcher.measure: one process, and
each --procs child on its slice) and gevent (engine.core.sender.SliceSender in a Locust worker).
"""
from __future__ import annotations

from typing import Optional, Sequence

from loadgen.engine.core.partition import split, stage_share
from loadgen.engine.core.stages import StageGate

NS = 1_000_000_000
T0_LEAD_NS = 20_000_000     # open loop: t0 a little after set-up so first sends are not late


def drain_why(timeout_s: float, after: str = "the last send") -> str:
    """Why a request still in flight ``timeout_s`` after ``after`` is cancelled."""
    return f"not finished {timeout_s:g} s after {after} (load.drain_timeout_s)"


class Pacing:
    """A load mode's pacing rules (see the module's table); the base is a planned one."""

    planned = True              # due(i) per request; else a user pool asking when(slot, now)
    sessions = False            # the session player's (runner._sessions, locust sessions.py)
    t0_lead_ns = 0
    users = 0

    def __init__(self, drain_timeout_s: float, offsets_ns=None):
        self.timeout_s, self.timeout_ns = drain_timeout_s, int(drain_timeout_s * NS)
        self.offsets = offsets_ns
        self.t0: Optional[int] = None
        self.end_ns: Optional[int] = None

    def begin(self, t0: int) -> "Pacing":
        self.t0 = t0
        return self

    def due(self, i: int) -> int:
        return self.t0

    def drain_due(self, now: int, last_issue_ns: Optional[int]) -> Optional[str]:
        """drain_timeout_s after the last send (``now`` when nothing was sent) is over."""
        if (last_issue_ns or now) + self.timeout_ns - now <= 0:
            return drain_why(self.timeout_s)
        return None

    def drain_left_s(self, now: int, last_issue_ns: Optional[int]) -> float:
        """Seconds until drain_due (a driver's wait bound)."""
        return ((last_issue_ns or now) + self.timeout_ns - now) / NS

    def unsent(self) -> Optional[int]:
        return None


class Offline(Pacing):
    """Every request due at t0."""


class OpenLoop(Pacing):
    """Request i due at t0 + offsets[i], whatever earlier ones are doing (never coordinated)."""

    t0_lead_ns = T0_LEAD_NS

    def due(self, i: int) -> int:
        return self.t0 + int(self.offsets[i])


class Closed(Pacing):
    """``users`` virtual users; one sends again as soon as its last request ended."""

    planned = False
    after = "load.duration_s"

    def __init__(self, drain_timeout_s: float, users: int, num_requests: Optional[int] = None,
                 duration_s: Optional[float] = None):
        super().__init__(drain_timeout_s)
        self.users, self.num, self.duration_s = users, num_requests, duration_s
        self.issued = 0

    def begin(self, t0: int) -> "Closed":
        self.t0 = t0
        self.end_ns = t0 + int(self.duration_s * NS) if self.duration_s else None
        return self

    def free_at(self, slot: int, now: int) -> Optional[int]:
        if now < self.t0:                        # a sender told of a later t0 waits for it
            return self.t0
        return now if self.end_ns is None or now < self.end_ns else None

    def when(self, slot: int, now: int) -> Optional[int]:
        if self.num is not None and self.issued >= self.num:
            return None
        return self.free_at(slot, now)

    def took(self) -> None:
        self.issued += 1

    def drain_due(self, now: int, last_issue_ns: Optional[int]) -> Optional[str]:
        """The users' own end is bounded only by a duration: drain_timeout_s after it."""
        if self.end_ns is not None and now - self.end_ns - self.timeout_ns > 0:
            return drain_why(self.timeout_s, self.after)
        return None

    def drain_left_s(self, now: int, last_issue_ns: Optional[int]) -> float:
        return float("inf")

    def unsent(self) -> Optional[int]:
        """num_requests never started (a count, not records: 10^12 of them would never end)."""
        if self.num is not None and self.duration_s is None:
            return max(0, self.num - self.issued)
        return None


class Staged(Closed):
    """A closed loop whose number of users changes by stage (the stage gate decides)."""

    after = "the last stage"

    def __init__(self, drain_timeout_s: float, stages: list, num_requests: Optional[int] = None,
                 index: int = 0, users_by_worker: Optional[Sequence[int]] = None):
        super().__init__(drain_timeout_s, max(int(s["concurrency"]) for s in stages),
                         num_requests)
        self.stages, self.index, self.users_by_worker = stages, index, users_by_worker
        self.gate: Optional[StageGate] = None

    def begin(self, t0: int) -> "Staged":
        self.t0 = t0
        self.gate = StageGate(self.stages, t0, self.index, self.users_by_worker or [self.users])
        self.end_ns = self.gate.end_ns
        return self

    def free_at(self, slot: int, now: int) -> Optional[int]:
        if now >= self.end_ns:
            return None
        return self.gate.when(slot, now)

    def unsent(self) -> Optional[int]:
        return None


class Sessions(Pacing):
    """Multi-turn sessions: opened at t0 + offsets[i] (``offsets``), else by ``users`` users;
    their turns are the session player's (engine.core.sessions.SessionPlayer)."""

    planned, sessions = False, True

    def __init__(self, drain_timeout_s: float, offsets_ns, users: int,
                 duration_s: Optional[float]):
        super().__init__(drain_timeout_s, offsets_ns)
        self.users, self.duration_s = users, duration_s
        self.t0_lead_ns = T0_LEAD_NS if offsets_ns is not None else 0

    def begin(self, t0: int) -> "Sessions":
        self.t0 = t0
        self.end_ns = t0 + int(self.duration_s * NS) if self.duration_s else None
        return self


def pacing_for(load, schedule, sessions: bool = False, *, users: Optional[int] = None,
               num_requests: Optional[int] = None, stages: Optional[list] = None,
               offsets_ns=None, index: int = 0,
               users_by_worker: Optional[Sequence[int]] = None) -> Pacing:
    """The strategy of ``load`` (scenario.Load) over ``schedule`` (scenario.schedule.Schedule):
    the one place the engines branch on the load mode. A sender's slice passes its share:
    ``users`` (default load.in_flight_cap or 1), ``num_requests`` (default load's),
    ``stages`` (default the schedule's), ``offsets_ns`` (default the schedule's), ``index`` and
    ``users_by_worker`` (the stage gate's split)."""
    t = load.drain_timeout_s
    offs = schedule.offsets_ns if offsets_ns is None else offsets_ns
    num = load.num_requests if num_requests is None else num_requests
    users = users if users is not None else (load.in_flight_cap or 1)
    if sessions:
        return Sessions(t, offs if load.mode == "server" else None, users, load.duration_s)
    if load.mode in ("server", "trace"):
        return OpenLoop(t, offs)
    if load.mode == "offline":
        return Offline(t, offs)
    stages = schedule.stages if stages is None else stages
    if stages:
        return Staged(t, stages, num, index, users_by_worker)
    return Closed(t, users, num, load.duration_s)


def slice_pacing(load, schedule, k: int, n: int) -> Pacing:
    """Sender ``k`` of ``n``'s pacing: its share (engine.core.partition) of the users, of
    num_requests and of each stage's users, and every n-th send time from the k-th."""
    offs = schedule.offsets_ns
    stages = schedule.stages if load.closed_loop else None
    return pacing_for(load, schedule, users=split(load.in_flight_cap, k, n) or 1,
                      num_requests=split(load.num_requests, k, n),
                      stages=stage_share(stages, k, n) if stages else [],
                      offsets_ns=offs[k::n] if offs is not None else None)
