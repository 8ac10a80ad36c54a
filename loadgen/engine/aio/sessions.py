"""Multi-turn sessions through the dispatcher: the asyncio runtime of the one session driver
(loadgen.engine.core.sessions.SessionPlayer: which session next, each turn's time, think time,
the budget, what a stop or a drain cancels; the Locust workers' too). This only waits and
sends: concurrency mode, N users each playing one session to its end, then the next; server
mode, session i started at t0 + offsets[i] as its own task. Each turn is one RequestSpec
through Dispatcher._one ─► one Record (session_id, turn). A session task that raises is a
crash: the others are cancelled and the error raised.
"""
from __future__ import annotations

import asyncio
import itertools
from typing import Callable, Iterator, Optional

from loadgen.record import now_ns
from loadgen.engine.aio.dispatch import Dispatcher, sleep_until
from loadgen.engine.core.sessions import WAIT, SessionPlayer
from loadgen.scenario.sessions import Session


class SessionDriver:
    """Plays sessions through ``dispatcher``; ``make_spec(turn, k, messages, session, id)``
    builds the RequestSpec of one turn (the runner knows the spec class and the header name)."""

    def __init__(self, dispatcher: Dispatcher, sessions: Iterator[Session], make_spec: Callable,
                 first_id: int, num_requests: Optional[int], end_ns: Optional[int]):
        self.d, self.sessions, self.make_spec = dispatcher, sessions, make_spec
        self.num_requests, self.end_ns = num_requests, end_ns
        self.p = SessionPlayer(itertools.count(first_id), num_requests, dispatcher.stop.is_set)

    @property
    def issued(self) -> int:
        return self.p.book.issued

    def _write(self, recs: list) -> None:
        for r in recs:
            self.d.ledger.write(r)

    async def play(self, conv) -> None:
        """One session (SessionPlayer.play), waiting and sending what it asks."""
        play = self.p.play(conv)
        try:
            cmd = next(play)
            while True:
                if cmd[0] == WAIT:
                    cmd = play.send(await sleep_until(cmd[1], self.d.stop))
                    continue
                t = cmd[1]
                spec = self.make_spec(t.turn, t.k, t.messages, conv.session, t.id)
                spec.scheduled_at_ns = self.d.last_issue_ns = t.due
                cmd = play.send(await self.d._one(spec, None))
        except StopIteration:
            pass
        except asyncio.CancelledError:      # cancelled from outside the driver: the rest too
            self._write(self.p.close(conv, self.d.cancel_reason))
            raise

    async def concurrency(self, users: int, t0_ns: int) -> None:
        """``users`` concurrent sessions; a user starts its next session when its last ended.
        Stopped early: the turns of load.num_requests never started are a count
        (``unsent_requests``), as in any closed loop."""
        self.p.begin(t0_ns, self.end_ns, ((s, None) for s in self.sessions), False)

        async def user() -> None:
            first = True
            while (conv := self.p.take(first, now_ns())) is not None:
                first = False
                await self.play(conv)

        await self._wait([self.d._spawn(user()) for _ in range(users)])
        if self.num_requests is not None and self.end_ns is None:
            self.d.unsent_requests = max(0, self.num_requests - self.issued)

    async def server(self, offsets_ns, t0_ns: int) -> None:
        """Session i starts at t0 + offsets[i], whatever earlier sessions are doing."""
        self.p.begin(t0_ns, self.end_ns, zip(self.sessions, (int(o) for o in offsets_ns)),
                     True, len(offsets_ns))
        tasks = []
        while (conv := self.p.take(False, now_ns())) is not None:
            if await sleep_until(conv.due, self.d.stop) or not self.p.claim(conv):
                break
            tasks.append(self.d._spawn(self.play(conv)))
        await self._wait(tasks)

    async def _wait(self, tasks: list) -> None:
        """Until every session ended, the stop flag, or drain_timeout_s after the last send
        (then the driver's stop / drain records every turn left). A session task that raised
        is a crash: the others are cancelled and the error raised."""
        d = self.d
        while tasks and not d.stop.is_set() and any(not t.done() for t in tasks):
            if self._crashed(tasks):
                break
            why = self.p.drain_due(now_ns(), d.last_issue_ns, True, d.drain_timeout_s)
            if why:
                d.cancel_reason = why
                break
            await asyncio.wait([t for t in tasks if not t.done()], timeout=0.1)
        crash = self._crashed(tasks)
        if crash is not None:
            d.cancel_reason = f"run aborted ({type(crash).__name__})"
        self._write(self.p.stop(d.cancel_reason) if d.stop.is_set() and crash is None
                    else self.p.drain(d.cancel_reason))
        await d.cancel_all()
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
