"""The session driver: multi-turn conversations through the dispatcher, turn after turn.

    SessionPlan (loadgen.scenario.sessions) ─► Session(id, turns)
      concurrency mode: N users, each plays one session to its end, then takes the next
      server mode:      session i starts at t0 + offsets[i] (a rate of NEW sessions), open loop
    one session: turn 1 ─► answer ─► sleep think_s ─► turn 2 (messages = every earlier user turn
                 and the assistant text the server returned) ─► ... ; each turn is one RequestSpec
                 through Dispatcher._one ─► one Record (session_id, turn) in the ledger
    budget: load.num_requests counts TURNS; load.duration_s stops new turns; a failed turn ends its
            session (the conversation has no answer to build on)
    stopped (interrupt, drain timeout): the turns a started session never sent get cancelled
            records; server mode: so do the sessions scheduled but not started; concurrency mode:
            the rest of load.num_requests is the count ``unsent_requests`` (a closed loop)
    a session task that raises is a crash: the others are cancelled and the error raised

scheduled_at of turn k > 1 = the previous answer's end + think_s: the time it was due, so a late
send shows as schedule lag and TTFT from scheduled still carries it.
"""
from __future__ import annotations

import asyncio
import itertools
from typing import Callable, Iterator, Optional

from loadgen.record import now_ns
from loadgen.run.dispatch import Dispatcher, sleep_until
from loadgen.run.senders.sender import drain_why
from loadgen.run.senders.sessions import NEVER_SENT, SessionBook
from loadgen.scenario.session_turns import Conversation
from loadgen.scenario.sessions import Session

NS = 1_000_000_000


class SessionDriver:
    """Plays sessions through ``dispatcher``; ``make_spec(turn, k, messages, session, id)``
    builds the RequestSpec of one turn (the runner knows the spec class and the header name).
    The budget, ids and unsent turns are the pure book's (loadgen.run.senders.sessions, the
    Locust workers' too); this only waits and sends."""

    def __init__(self, dispatcher: Dispatcher, sessions: Iterator[Session], make_spec: Callable,
                 first_id: int, num_requests: Optional[int], end_ns: Optional[int]):
        self.d, self.sessions, self.make_spec = dispatcher, sessions, make_spec
        self.num_requests, self.end_ns = num_requests, end_ns
        self.book = SessionBook(itertools.count(first_id), num_requests, end_ns)

    @property
    def issued(self) -> int:
        return self.book.issued

    def _budget_left(self) -> bool:
        return self.book.budget_left(self.d.stop.is_set())

    def _cancel(self, recs: list) -> None:
        for r in recs:
            self.d.ledger.write(r)

    async def play(self, session: Session, start_ns: int) -> None:
        """One session from its first turn (due at ``start_ns``) to its last or the budget's end;
        stopped (interrupt, drain timeout): the turns not sent get cancelled records."""
        conv = Conversation(session, start_ns)
        self.book.started += 1
        try:
            while not conv.done:
                if conv.next > 1 and await sleep_until(conv.due, self.d.stop):
                    break
                if not self._budget_left():
                    break
                t = self.book.send(conv)     # from here on, _one writes this turn's record
                spec = self.make_spec(t.turn, t.k, t.messages, session, t.id)
                spec.scheduled_at_ns = t.due
                self.d.last_issue_ns = t.due
                rec = await self.d._one(spec, None)
                if rec is None or rec.status != "ok":
                    break               # a failed turn ends its session (nothing to build on)
                conv.answered(rec.output_text, rec.end_at_ns or now_ns())
        except asyncio.CancelledError:
            self._cancel(self.book.unsent(conv, self.d.cancel_reason))
            raise
        if self.d.stop.is_set():
            self._cancel(self.book.unsent(conv, NEVER_SENT))

    async def concurrency(self, users: int, t0_ns: int) -> None:
        """``users`` concurrent sessions; a user starts its next session when its last ended.
        Stopped early: the turns of load.num_requests never started are a count
        (``unsent_requests``), as in any closed loop."""
        async def user() -> None:
            start = t0_ns
            while self._budget_left():
                await self.play(next(self.sessions), start)
                start = now_ns()

        tasks = [self.d._spawn(user()) for _ in range(users)]
        await self._wait(tasks)
        if self.num_requests is not None and self.end_ns is None:
            self.d.unsent_requests = max(0, self.num_requests - self.issued)

    async def server(self, offsets_ns, t0_ns: int) -> None:
        """Session i starts at t0 + offsets[i], whatever earlier sessions are doing. Stopped
        early: every turn of the sessions scheduled but not started gets a cancelled record
        (open loop: every scheduled request has one), within load.num_requests."""
        tasks, started = [], 0
        for off in offsets_ns:
            start = t0_ns + int(off)
            if await sleep_until(start, self.d.stop) or not self._budget_left():
                break
            tasks.append(self.d._spawn(self.play(next(self.sessions), start)))
            started += 1
        await self._wait(tasks)
        if self.d.stop.is_set():
            self._cancel(self.book.unstarted(
                zip((t0_ns + int(off) for off in offsets_ns[started:]), self.sessions)))

    async def _wait(self, tasks: list) -> None:
        """Until every session ended, the stop flag, or drain_timeout_s after the last send. A
        session task that raised is a crash: the others are cancelled and the error raised."""
        while tasks and not self.d.stop.is_set() and any(not t.done() for t in tasks):
            if self._crashed(tasks):
                break
            last = self.d.last_issue_ns or now_ns()
            if now_ns() - last > int(self.d.drain_timeout_s * NS):
                self.d.cancel_reason = drain_why(self.d.drain_timeout_s)
                break
            await asyncio.wait([t for t in tasks if not t.done()], timeout=0.1)
        crash = self._crashed(tasks)
        if crash is not None:
            self.d.cancel_reason = f"run aborted ({type(crash).__name__})"
        await self.d.cancel_all()
        crash = crash or self._crashed(tasks)
        if crash is not None:
            raise crash

    @staticmethod
    def _crashed(tasks: list) -> Optional[BaseException]:
        """The first exception a finished session task raised (retrieved, so never 'Task
        exception was never retrieved'); None when none did."""
        first = None
        for t in tasks:
            if t.done() and not t.cancelled():
                e = t.exception()           # every one retrieved, the first one raised
                if e is not None and first is None:
                    first = e
        return first

    def describe(self) -> dict:
        return self.book.describe()
