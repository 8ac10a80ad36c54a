"""The session driver's book, for both runtimes: the turn budget, the ids, each turn going out,
every turn never sent as a record. Pure: the runtime (loadgen.run.sessions: asyncio, one process;
loadgen.locust_engine.sessions: gevent, each Locust worker) only waits and sends.

    SessionBook(ids, budget, end_ns)
        ids       the measured ids this sender gives its turns, in issue order (one process:
                  W, W+1, ...; Locust worker i of n: plan.slot_ids(), W+i, W+i+n, ...)
        budget    load.num_requests (TURNS; this sender's share), None: no bound
        end_ns    t0 + load.duration_s: no new turn after it
      budget_left(stopped)      not stopped, turns left, before end_ns
      send(conv) ─► Turn        turn ``conv.next`` goes out now: its id, index, Turn, due time
                                (the scheduled_at), the conversation's messages
      unsent(conv, why)         a cancelled Record per turn of ``conv`` never sent, within the
                                budget (the first with its due time, later ones null: their due
                                time depends on answers never given); closes ``conv``
      unstarted(starts, why)    the same for sessions scheduled but never started (server mode,
                                stopped), within the budget and before end_ns
The rules of one conversation (due times, messages, headers) are loadgen.scenario.session_turns.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Iterator, Optional

from loadgen.record import Record, now_ns
from loadgen.scenario.session_turns import Conversation

NEVER_SENT = "turn never sent: run interrupted"
NOT_STARTED = "session scheduled but never started: run interrupted"


@dataclass
class Turn:
    """One turn going out now."""
    id: int
    k: int                       # 1-based index in its session
    turn: object                 # scenario.sessions.Turn
    due: Optional[int]           # scheduled_at_ns
    messages: list
    session_id: str


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
            out.append(Record(
                id=self.take_id(), phase="measured", scheduled_at_ns=due, end_at_ns=now_ns(),
                status="cancelled", error_kind="cancelled", error=why,
                requested_output_tokens=turn.max_tokens, workload_prompt_tokens=turn.user_tokens,
                session_id=conv.session.id, turn=k))
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

    def describe(self) -> dict:
        return {"sessions_started": self.started, "turns_issued": self.issued}
