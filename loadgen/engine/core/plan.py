"""The run's plan, sliced: which request ids exist and which sender owns each (partition.py).

Pure (scenario, workload, schedule, numpy): imported by the loadgen CLI process (merging,
dead-worker accounting), by the gevent Locust processes, by each --procs child (what to
send) and by the one-process runner (``prompt_streams``), so every side agrees by construction. Every process rebuilds the same
seeded workload and schedule from the scenario; ``digest`` lets a worker refuse a master whose
scenario differs.

    ids 0 .. W-1              warm-up  (prompt k = k-th PromptSpec of the workload stream; a
                              trace: of its own warm-up stream, workload.warmup_specs)
    ids W .. W+M-1            measured (M = schedule count, or load.num_requests; unbounded for a
                              duration-only closed loop; prompt W+i: the stream's W+i-th, a
                              trace's i-th row: the one-process runner's rule)
    owner(id) = position in its phase mod n_workers (partition.owner; interleaved: each slice
                of a Poisson schedule is a thinned Poisson process of rate/n, balanced slices)

Sessions (workload.source sessions): session j of the stream (and, in server mode, its start
offset j) belongs to worker j mod n; a worker's turns take its measured ids in issue order
(``slot_ids``: W + i, W + i + n, ...), so load.num_requests (a count of TURNS) is shared out
as the measured ids are; only the warm-up and what the workers journal are owed a record.
Concurrency stages: the measured ids as a closed loop's; the stages bound the run (stages.py).
"""
from __future__ import annotations

import hashlib
import itertools
import json
from typing import Iterator, Optional

from loadgen.engine.core.partition import owed_closed, owner
from loadgen.scenario.model import Scenario
from loadgen.scenario.schedule import Schedule, schedule_of, seed_for
from loadgen.scenario.workload import PromptSpec, WorkloadPlan, build_workload

DEFAULT_OPEN_USERS = 256     # users (in-flight bound) for a server/offline run without a cap


Spec = PromptSpec
"""One request of the plan: the workload's PromptSpec with its ``id``, ``phase`` and
``offset_ns`` (from t0; None: closed loop, now) — one frozen type (a Locust worker sends it as
is; the asyncio engines make it a RequestSpec: loadgen.client.http_client is asyncio-bound)."""


def digest(sc: Scenario) -> str:
    """Hash of what decides the requests and their times (workload + load)."""
    blob = json.dumps({"workload": sc.workload.model_dump(mode="json"),
                       "load": sc.load.model_dump(mode="json")}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def users_for(sc: Scenario, schedule: Schedule, n_workers: Optional[int] = None) -> int:
    """Locust users in all: the in-flight cap (closed loop: the concurrency; stages: the
    largest stage's). An uncapped open loop gets min(requests, DEFAULT_OPEN_USERS); beyond
    that, lateness shows as schedule lag. Sessions in server mode: a user plays one session
    from its start to its last turn, so min(sessions, DEFAULT_OPEN_USERS), rounded up to a
    multiple of ``n_workers`` (each worker holds its own sessions' users)."""
    cap = sc.load.in_flight_cap
    if cap:
        return cap
    n = schedule.count or sc.load.num_requests or DEFAULT_OPEN_USERS
    users = max(1, min(n, DEFAULT_OPEN_USERS))
    if sc.workload.source == "sessions" and n_workers and n_workers > 1:
        users = -(-users // n_workers) * n_workers
    return users


def measured_count(sc: Scenario, schedule: Schedule) -> Optional[int]:
    """Measured requests in the plan; None for a closed loop bounded by duration only."""
    if schedule.count is not None:
        return schedule.count
    return sc.load.num_requests


class Plan:
    """A scenario's requests, sliced for worker ``index`` of ``n_workers``."""

    def __init__(self, sc: Scenario, index: int = 0, n_workers: int = 1,
                 workload: Optional[WorkloadPlan] = None, schedule: Optional[Schedule] = None):
        """``workload``/``schedule``: the ones prepare(sc) built already (else built here)."""
        if not 0 <= index < n_workers:
            raise ValueError(f"worker index {index} outside 0..{n_workers - 1}")
        self.sc, self.index, self.n = sc, index, n_workers
        self.workload: WorkloadPlan = workload if workload is not None else \
            build_workload(sc.workload)
        self.schedule: Schedule = schedule if schedule is not None else schedule_of(
            sc.load, seed_for(sc), self.workload)
        self.warmup = sc.load.warmup_requests
        self.count = measured_count(sc, self.schedule)
        self.sessions = self.workload.sessions is not None     # multi-turn (sessions.py)
        self.stages = self.schedule.stages if sc.load.closed_loop else None

    def _mine(self, rid: int) -> bool:
        return owner(rid, self.warmup, self.n) == self.index

    def prompt_streams(self) -> tuple[Iterator[PromptSpec], Iterator[PromptSpec]]:
        """(warm-up prompts, measured prompts), in id order: which prompt each id gets, for every
        sender and the one-process runner. One stream, the warm-up taking its first W; a
        trace's warm-up (and a sessions run's: single turns) has a stream of its own
        (workload.warmup_specs: no trace block), so a trace's measured request W+i is row i."""
        stream = iter(self.workload)
        if self.sc.load.traced or self.sessions:
            return self.workload.warmup_specs(), stream
        return stream, stream

    def _stream(self) -> Iterator[tuple[int, PromptSpec]]:
        """(id, prompt) of the measured requests, from id W on (a trace's from row 0)."""
        stream = self.prompt_streams()[1]
        if not self.sc.load.traced:
            stream = itertools.islice(stream, self.warmup, None)
        return enumerate(stream, self.warmup)

    def warm_specs(self) -> list[Spec]:
        out = []
        for rid, p in enumerate(itertools.islice(self.prompt_streams()[0], self.warmup)):
            if self._mine(rid):
                out.append(Spec(p.prompt, p.prompt_tokens, p.max_tokens, p.messages, p.images,
                                p.expected, p.audio, rid, "warmup", None))
        return out

    def measured_specs(self) -> Iterator[Spec]:
        """This worker's measured requests in id order (endless for a duration-only closed loop).
        Offsets are set for server (schedule) and offline (0) runs."""
        offs = self.schedule.offsets_ns
        for rid, p in self._stream():
            i = rid - self.warmup
            if self.count is not None and i >= self.count:
                return
            if not self._mine(rid):
                continue
            off = int(offs[i]) if offs is not None else None
            yield Spec(p.prompt, p.prompt_tokens, p.max_tokens, p.messages, p.images,
                       p.expected, p.audio, rid, "measured", off)

    def started(self, warm_started: int, issued: int, t0: Optional[int]
                ) -> Iterator[tuple[Spec, Optional[int]]]:
        """(spec, scheduled time) of what this sender owed a record for once it had started
        ``warm_started`` warm-up and ``issued`` closed-loop requests (--procs: its counters):
        those, or its whole planned slice timed from ``t0`` (a closed loop's: no prompt)."""
        for s in self.warm_specs()[:warm_started]:
            yield s, None
        if self.sc.load.closed_loop:
            for rid in owed_closed(self.warmup, self.index, self.n, issued):
                yield Spec(None, None, None, id=rid, phase="measured"), None
            return
        for s in self.measured_specs():
            yield s, None if t0 is None else t0 + (s.offset_ns or 0)

    def owed_count(self) -> Optional[int]:
        """Records the run owes in all, as far as known before it (the progress bar's total):
        the expected ids; sessions: the warm-up and load.num_requests turns."""
        if self.sessions and self.sc.load.num_requests:
            return self.warmup + self.sc.load.num_requests
        return len(self.expected_ids()) or None

    def time_bound_s(self, api) -> float:
        """The longest the measured phase may take before a master stops waiting: the span
        (schedule, stages or load.duration_s) + drain + one timeout + 60 s; turns and a
        num_requests closed loop add a timeout per request (they wait on answers)."""
        ld = self.sc.load
        span = int(self.schedule.offsets_ns[-1]) / 1e9 if self.schedule.count else 0.0
        if self.stages:
            span = self.stages[-1]["start_s"] + self.stages[-1]["duration_s"]
        bound = (span if self.stages else ld.duration_s or span) + ld.drain_timeout_s \
            + api.timeout_s + 60.0
        if self.sessions and ld.num_requests:
            bound += ld.num_requests * (api.timeout_s + ld.drain_timeout_s)
        elif (self.schedule.offsets_ns is None and ld.num_requests and not ld.duration_s
              and not self.stages):
            bound += ld.num_requests * api.timeout_s
        return bound

    def session_count(self) -> Optional[int]:
        """Server mode: this worker's sessions in all (j mod n of the schedule's); else None."""
        if self.schedule.offsets_ns is None:
            return None
        return len(range(self.index, self.schedule.count, self.n))

    def expected_ids(self) -> list[int]:
        """Ids every worker together owes a record, whatever happens: the warm-up, plus the
        measured requests unless a closed loop's duration or stages may end it early, or the
        run plays sessions (then only the requests that were started are owed one: the
        workers' send journals list them; a session's unsent turns its worker records)."""
        closed = self.schedule.offsets_ns is None
        if (self.count is None or self.sessions
                or (closed and (self.sc.load.duration_s or self.stages))):
            return list(range(self.warmup))
        return list(range(self.warmup + self.count))

    # -- sessions -----------------------------------------------------------------------------
    def slot_ids(self) -> "range | itertools.count":
        """This worker's measured ids in the order it uses them (a session turn each, sent or
        cancelled): W + index + k·n, within load.num_requests when given (the turn budget)."""
        if self.sc.load.num_requests is None:
            return itertools.count(self.warmup + self.index, self.n)
        return range(self.warmup + self.index, self.warmup + self.sc.load.num_requests, self.n)

    def session_slice(self) -> Iterator[tuple[object, Optional[int]]]:
        """This worker's sessions in order, each with its start offset from t0 (server mode:
        session j starts at the schedule's offset j; concurrency mode: None, endless)."""
        offs = self.schedule.offsets_ns
        for j, s in enumerate(iter(self.workload.sessions)):
            if offs is not None and j >= len(offs):
                return
            if j % self.n == self.index:
                yield s, (int(offs[j]) if offs is not None else None)
