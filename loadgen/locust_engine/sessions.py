"""Multi-turn sessions on a Locust worker (gevent): the native driver's rules, turn after turn.

    Plan.session_slice (plan.py): this worker's sessions (j mod n), server mode with their start
    Plan.slot_ids: this worker's measured ids, one per turn sent or cancelled (the turn budget)
    concurrency mode: each Locust user plays one session to its end, then takes the next (its
        first from t0, the next ones from when it became free)
    server mode:      a user takes the next session, sleeps to t0 + its offset, plays it; a
                      user per session (plan.users_for), so starts never wait on answers
    one session (session_turns.Conversation): turn 1 at its start ─► answer ─► sleep to the
        answer's end + think_s ─► turn 2 (messages: every earlier user turn and the answer text
        the server returned; api.session_header: the session id) ─► ...; each turn one Record
        (session_id, turn) through the worker's one request path (RequestSource.send)
    budget: load.num_requests (this worker's share of the turns) and load.duration_s stop new
        turns; a failed turn ends its session (no answer to build on)
    stopped (interrupt, or load.drain_timeout_s after the last send): every turn a started
        session never sent gets a cancelled record (the first with its due time, later ones
        null); server mode, interrupted: so does every turn of the sessions scheduled but not
        started (within the budget and load.duration_s); concurrency mode: the turns of
        load.num_requests never started are the count ``unsent_requests`` (run.py)

The budget, the ids, each turn going out and every unsent turn's record are the pure book's
(loadgen.run.senders.sessions), the native driver's too; a conversation's rules are
loadgen.scenario.session_turns. This only waits and sends. No asyncio, no aiohttp here.
"""
from __future__ import annotations

import itertools
from typing import Optional

import gevent

from loadgen.locust_engine.clock import sleep_until
from loadgen.record import Record, now_ns
from loadgen.run.senders.sender import drain_why
from loadgen.run.senders.sessions import NEVER_SENT, SessionBook
from loadgen.scenario.session_turns import Conversation, turn_headers


class SessionWork:
    """One worker's sessions; ``node`` is its RequestSource (records, the request path)."""

    def __init__(self, node, plan):
        self.node, self.sc = node, node.sc
        ids = plan.slot_ids()
        self.book = SessionBook(ids, len(ids) if isinstance(ids, range) else None, None)
        self.slice = plan.session_slice()
        self.server = plan.schedule.offsets_ns is not None
        # server mode: this worker's sessions in all, and how many a user took so far
        self.total = len(range(plan.index, plan.schedule.count, plan.n)) if self.server else None
        self.taken = 0
        self.header = self.sc.api.session_header
        self.live: list[Conversation] = []
        self.pending: list[list] = []          # [start_ns, seq, session]: taken, not started
        self.seq = itertools.count()
        self.cut: Optional[str] = None         # why the rest was given up (stop, drain)

    def go(self, t0: int) -> None:
        if self.sc.load.duration_s:
            self.book.end_ns = t0 + int(self.sc.load.duration_s * 1e9)
        gevent.spawn(self._drain_watch)

    @property
    def busy(self) -> bool:
        """A session is in play or waits for its start: the worker is not done."""
        return bool(self.live or self.pending)

    def _stopped(self) -> bool:
        return self.node.stopped or self.cut is not None

    def budget_left(self) -> bool:
        """The one rule (SessionBook): not stopped, turns left, before load.duration_s's end."""
        return self.book.budget_left(self._stopped())

    # -- a user's turn at the work (node.serve) ---------------------------------------------
    def serve(self, user) -> bool:
        """Play one session on ``user``; False when there is none to play (now or ever)."""
        node = self.node
        if node.t0 is None or self._stopped() or node.exhausted:
            return False
        if not self.server and now_ns() < node.t0:
            sleep_until(node.t0, self._stopped)       # a closed loop starts at t0
            return True
        if not self.budget_left():
            node.exhausted = True
            return False
        if self.server:
            return self._serve_scheduled(user)
        start = node.t0 if not getattr(user, "sessions_played", 0) else now_ns()
        user.sessions_played = getattr(user, "sessions_played", 0) + 1
        session, _ = next(self.slice)
        self.play(user, Conversation(session, start))
        return True

    def _serve_scheduled(self, user) -> bool:
        node = self.node
        try:
            session, off = next(self.slice)
        except StopIteration:
            node.exhausted = True
            return False
        self.taken += 1
        entry = [node.t0 + off, next(self.seq), session]
        self.pending.append(entry)
        sleep_until(entry[0], self._stopped)
        if entry not in self.pending:                 # a stop recorded it as never started
            return True
        self.pending.remove(entry)
        if not self.budget_left():                    # the budget went while it waited
            node.exhausted = True
            node.maybe_finish()
            return True
        self.play(user, Conversation(session, entry[0]))
        return True

    def play(self, user, conv: Conversation) -> None:
        """``conv`` from its first turn to its last, the budget's end, a failed turn or a stop
        (whoever stops it records the turns left: ``stop`` / ``_drain_watch``)."""
        node = self.node
        self.book.started += 1
        self.live.append(conv)
        try:
            while not conv.done:
                if conv.next > 1 and sleep_until(conv.due, self._stopped):
                    return                            # stopped: the stop recorded the rest
                if not self.budget_left():
                    return
                t = self.book.send(conv)
                rec = Record(id=t.id, phase="measured", scheduled_at_ns=t.due,
                             requested_output_tokens=t.turn.max_tokens,
                             workload_prompt_tokens=t.turn.user_tokens,
                             session_id=t.session_id, turn=t.k)
                node.last_issue_ns = now_ns()
                node.send(user, rec, t.turn.user, t.messages,
                          turn_headers(self.header, t.session_id), True)
                if conv.closed or rec.status != "ok":
                    return                 # stopped mid-request, or a failed turn ends it
                end = rec.end_at_ns       # as written: on the master's clock (ledger.py)
                conv.answered(rec.output_text, end - node.shift if end else now_ns())
        finally:
            conv.closed = True
            if conv in self.live:
                self.live.remove(conv)
            node.maybe_finish()

    # -- stopping ---------------------------------------------------------------------------
    def _cancel_rest(self, conv: Conversation, why: str) -> None:
        """A cancelled record for each turn of ``conv`` never sent, within the budget."""
        for rec in self.book.unsent(conv, why):
            self.node.write(rec)

    def _close_live(self, why_in_flight: str, why_waiting: str) -> None:
        for conv in list(self.live):
            in_flight = conv.due is None              # its last sent turn had no answer yet
            self._cancel_rest(conv, why_in_flight if in_flight else why_waiting)
        self.live.clear()

    def stop(self, why: str) -> None:
        """The run was interrupted (node.interrupt, after it cancelled what was in flight)."""
        if self.cut is not None:
            return
        self.cut = why
        self._close_live(why, NEVER_SENT)
        if not self.server:
            return
        waiting = sorted(self.pending, key=lambda e: (e[0], e[1]))
        self.pending.clear()
        rest = itertools.chain(((e[0], e[2]) for e in waiting),
                               ((self.node.t0 + off, s) for s, off in self.slice))
        for rec in self.book.unstarted(rest):
            self.node.write(rec)

    def _drain_watch(self) -> None:
        """load.drain_timeout_s after the last send with a session still unfinished (server
        mode: once every session started): what is in flight and every turn left is cancelled
        (the native driver's ``_wait``)."""
        node = self.node
        drain_ns = int(self.sc.load.drain_timeout_s * 1e9)
        while node.phase == "measured" and not self._stopped():
            gevent.sleep(0.05)
            started = node.exhausted or self.taken >= self.total if self.server else True
            if not started or self.pending:            # server mode: once every one started
                continue
            if not self.live and not node.inflight:
                continue
            if now_ns() - (node.last_issue_ns or now_ns()) > drain_ns:
                why = drain_why(self.sc.load.drain_timeout_s)
                self.cut, node.hold = why, True
                try:
                    for rec in list(node.inflight.values()):
                        node.cancel(rec, why)
                    self._close_live(why, why)
                finally:
                    node.hold = False
                node.exhausted = True
                node.maybe_finish()

    def describe(self) -> dict:
        return self.book.describe()
