"""Multi-turn sessions, the one driver of both runtimes (pure: no asyncio, no gevent). The
runtime (loadgen.engine.aio.sessions: asyncio tasks; loadgen.engine.locust.sessions: a Locust
worker's gevent users) only waits and sends what ``SessionPlayer.play`` asks for.

    SessionPlayer(ids, budget, stopped)
        ids       the measured ids this sender gives its turns, in issue order (one process:
                  W, W+1, ...; Locust worker i of n: plan.slot_ids(), W+i, W+i+n, ...)
        budget    load.num_requests (TURNS; this sender's share), None: no bound
      begin(t0, end_ns, sessions, server)   sessions: (Session, start offset | None) in order
      take(first, now) ─► Conversation | None   which session a free user plays next:
            concurrency: a user's first from t0, later ones from ``now`` (the closed loop);
            server: session j at t0 + offset j, held in ``pending`` until its start
            (``claim``), so starts never wait on answers; None: budget, end or slice used up
      play(conv)  a generator (``drive`` runs it for a blocking runtime): yields (WAIT, due) ─► send back True if stopped while waiting;
                  (SEND, Turn) ─► send back the finished Record (None: never finished).
                  turn 1 at the start ─► answer ─► turn k due at the answer's end + think_s
                  (session_turns) ─► ...; a failed turn ends the session (no answer to build
                  on); load.num_requests and load.duration_s (end_ns) stop new turns
      stop(why)   interrupted: every turn a live session never sent gets a cancelled record
                  (the first with its due time, later ones null), why for those in flight,
                  NEVER_SENT for those waiting; server mode: every turn of the sessions
                  scheduled but not started too (NOT_STARTED), within the budget and end_ns;
                  concurrency mode: the rest of the budget is a count (``unsent_requests``)
      drain(why) / drain_due(now, last, busy, timeout_s)   load.drain_timeout_s after the last
                  send (server mode: once every session started): every turn left cancelled
    SessionBook: the turn budget, the ids, a turn going out, every unsent turn's Record.
The rules of one conversation (due times, messages, headers) are loadgen.scenario.session_turns.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Optional

from loadgen.client.attempt import cancelled_record, new_record
from loadgen.record import Record, now_ns
from loadgen.engine.core.sender import drain_why
from loadgen.scenario.session_turns import Conversation

NEVER_SENT = "turn never sent: run interrupted"
NOT_STARTED = "session scheduled but never started: run interrupted"
WAIT, SEND = "wait", "send"


@dataclass
class Turn:
    """One turn going out now."""
    id: int
    k: int                       # 1-based index in its session
    turn: object                 # scenario.sessions.Turn
    due: Optional[int]           # scheduled_at_ns
    messages: list
    session_id: str

    def record(self) -> Record:
        """The Record its request fills."""
        return new_record(self.id, "measured", self.due, self.turn.max_tokens,
                          self.turn.user_tokens, self.session_id, self.k)


class SessionBook:
    def __init__(self, ids: Iterable[int], budget: Optional[int], end_ns: Optional[int]):
        self.ids: Iterator[int] = iter(ids)
        self.left = budget
        self.end_ns = end_ns
        self.issued = 0          # turns given an id: sent or cancelled
        self.started = 0         # sessions started

    def budget_left(self, stopped: bool = False) -> bool:
        if stopped or self.left == 0:
            return False
        return self.end_ns is None or now_ns() < self.end_ns

    def take_id(self) -> int:
        self.issued += 1
        if self.left is not None:
            self.left -= 1
        return next(self.ids)

    def send(self, conv: Conversation) -> Turn:
        k, turn, due = conv.next, conv.turn(), conv.due
        messages = conv.sent()
        return Turn(self.take_id(), k, turn, due, messages, conv.session.id)

    def unsent(self, conv: Conversation, why: str) -> list[Record]:
        out = []
        for k, turn, due in conv.rest():
            if self.left == 0:
                break
            out.append(cancelled_record(
                self.take_id(), "measured", due, now_ns(), why, turn.max_tokens,
                turn.user_tokens, session_id=conv.session.id, turn=k))
        conv.closed = True
        return out

    def unstarted(self, starts: Iterable[tuple[int, object]], why: str = NOT_STARTED
                  ) -> list[Record]:
        """``starts``: (start_ns, Session) of the sessions scheduled but never started."""
        out: list[Record] = []
        for start, session in starts:
            if self.left == 0 or (self.end_ns is not None and start >= self.end_ns):
                break
            out += self.unsent(Conversation(session, start), why)
        return out


class SessionPlayer:
    """One sender's sessions: which next, each turn's time, the budget, what a stop cancels."""

    def __init__(self, ids: Iterable[int], budget: Optional[int], stopped: Callable[[], bool],
                 shift: int = 0):
        self.book = SessionBook(ids, budget, None)
        self.stopped = stopped                   # the runtime's stop flag
        self.shift = shift                       # a Record's times as written - this clock's
        self.cut: Optional[str] = None           # why the rest was given up (stop, drain)
        self.sessions: Iterator = iter(())
        self.server = self.exhausted = False
        self.t0 = 0
        self.total: Optional[int] = None         # server mode: sessions in the slice, if known
        self.taken = 0
        self.live: list[Conversation] = []       # sessions in play
        self.pending: list[Conversation] = []    # server mode: taken, waiting for their start

    def begin(self, t0: int, end_ns: Optional[int], sessions: Iterable, server: bool,
              total: Optional[int] = None) -> None:
        self.t0, self.book.end_ns, self.server, self.total = t0, end_ns, server, total
        self.sessions = iter(sessions)

    def halted(self) -> bool:
        return self.cut is not None or self.stopped()

    def budget_left(self) -> bool:
        return self.book.budget_left(self.halted())

    @property
    def busy(self) -> bool:
        """A session is in play or waits for its start."""
        return bool(self.live or self.pending)

    def take(self, first: bool, now: int) -> Optional[Conversation]:
        if self.exhausted or not self.budget_left():
            self.exhausted = True
            return None
        try:
            session, off = next(self.sessions)
        except StopIteration:
            self.exhausted = True
            return None
        self.taken += 1
        if not self.server:
            return Conversation(session, self.t0 if first else now)
        conv = Conversation(session, self.t0 + int(off))
        self.pending.append(conv)
        return conv

    def claim(self, conv: Conversation) -> bool:
        """Server mode, at ``conv``'s start: play it? (False: a stop holds or took it, or the
        budget went while it waited.)"""
        if self.halted() or conv not in self.pending:
            return False
        self.pending.remove(conv)
        if not self.budget_left():
            self.exhausted = True
            return False
        return True

    def play(self, conv: Conversation):
        """``conv`` turn after turn (see the module's table); a stop leaves it to ``stop``."""
        self.book.started += 1
        self.live.append(conv)
        ended = False
        try:
            while not conv.done:
                if conv.next > 1 and (yield WAIT, conv.due):
                    return
                if not self.budget_left():
                    ended = not self.halted()
                    return
                rec = yield SEND, self.book.send(conv)
                if conv.closed or rec is None or rec.status != "ok":
                    ended = True
                    return
                end = rec.end_at_ns
                conv.answered(rec.output_text, end - self.shift if end else now_ns())
            ended = True
        finally:
            if ended and conv in self.live:
                self.live.remove(conv)

    @staticmethod
    def drive(play, wait: Callable[[int], bool], send: Callable[[Turn], Record]) -> None:
        """Run ``play`` with a blocking runtime's ``wait(due) -> stopped`` and ``send(Turn)``."""
        try:
            cmd = next(play)
            while True:
                cmd = play.send(wait(cmd[1]) if cmd[0] == WAIT else send(cmd[1]))
        except StopIteration:
            pass

    def close(self, conv: Conversation, why: str) -> list[Record]:
        """A live session given up: a cancelled record for each turn it never sent."""
        if conv not in self.live:
            return []
        self.live.remove(conv)
        return self.book.unsent(conv, why)

    def _close_live(self, why_in_flight: str, why_waiting: str) -> list[Record]:
        out: list[Record] = []
        for conv in list(self.live):             # due None: its last turn had no answer yet
            out += self.close(conv, why_in_flight if conv.due is None else why_waiting)
        return out

    def stop(self, why: str) -> list[Record]:
        if self.cut is not None:
            return []
        self.cut = why
        out = self._close_live(why, NEVER_SENT)
        if self.server:
            waiting = sorted(self.pending, key=lambda c: c.due)
            self.pending.clear()
            out += self.book.unstarted(itertools.chain(
                ((c.due, c.session) for c in waiting),
                ((self.t0 + int(off), s) for s, off in self.sessions)))
        self.exhausted = True
        return out

    def drain(self, why: str) -> list[Record]:
        self.cut = self.cut or why
        self.exhausted = True
        return self._close_live(why, why)

    def drain_due(self, now: int, last_issue_ns: Optional[int], busy: bool,
                  timeout_s: float) -> Optional[str]:
        """Why every turn left is cancelled now, or None (see the module's table)."""
        if self.server and not (self.exhausted or (self.total is not None
                                                   and self.taken >= self.total)):
            return None
        if self.pending or not (self.live or busy):
            return None
        if now - (last_issue_ns or now) > int(timeout_s * 1e9):
            return drain_why(timeout_s)
        return None
