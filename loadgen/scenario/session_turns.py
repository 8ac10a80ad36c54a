"""One conversation's turns: the pure rules both engines follow, turn after turn.

    Session(id, turns) (loadgen.scenario.sessions) + the time turn 1 is due
        turn k > 1 due  = turn k-1's answer end + turn k's think_s      (next_due)
        turn k messages = every earlier user turn and the answer text the server returned,
                          then turn k's user text                      (with_user, with_answer)
        turn k headers  = {api.session_header: session id}, when the scenario names one
    Conversation: where one session stands: the first turn without a record (``next``), when
        it is due (None: unknown, it waits on an answer), the messages so far. A run that stops
        gives every turn from ``next`` on a cancelled record (``rest``): due time for the first,
        null for the later ones (their due time depends on answers never given).

Used by the one session driver (loadgen.engine.core.sessions, whichever runtime plays it);
imports nothing but the standard library.
"""
from __future__ import annotations

from typing import Iterator, Optional

NS = 1_000_000_000


def think_ns(turn) -> int:
    """The pause before ``turn`` (a ``sessions.Turn``), in ns."""
    return int(turn.think_s * NS)


def next_due(answer_end_ns: int, turn) -> int:
    """When ``turn`` is due: the previous answer's end plus its think time."""
    return answer_end_ns + think_ns(turn)


def with_user(messages: list, turn) -> list:
    """A new list: ``messages`` then ``turn``'s user text."""
    return messages + [{"role": "user", "content": turn.user}]


def with_answer(messages: list, text: Optional[str]) -> list:
    """A new list: ``messages`` then the assistant's answer as the server gave it."""
    return messages + [{"role": "assistant", "content": text or ""}]


def turn_headers(header: Optional[str], session_id: str) -> Optional[dict]:
    """The request's own headers for a session turn (``api.session_header``), else None."""
    return {header: session_id} if header else None


class Conversation:
    """One session in play; the player moves it on (``begin``, ``sent``, ``answered``)."""

    __slots__ = ("session", "next", "due", "messages", "closed")

    def __init__(self, session, start_ns: int):
        self.session = session
        self.next = 1                  # the first turn without a record (1-based)
        self.due: Optional[int] = start_ns
        self.messages: list = []
        self.closed = False            # every turn recorded or given up: nothing more to do

    @property
    def done(self) -> bool:
        return self.closed or self.next > len(self.session.turns)

    def turn(self):
        return self.session.turns[self.next - 1]

    def sent(self) -> list:
        """Turn ``next`` goes out now: its messages; from here on its record is the request's."""
        self.messages = with_user(self.messages, self.turn())
        self.next += 1
        self.due = None
        return self.messages

    def answered(self, text: Optional[str], end_ns: int) -> None:
        """The answer came: it joins the conversation and the next turn's due time is set."""
        self.messages = with_answer(self.messages, text)
        if not self.done:
            self.due = next_due(end_ns, self.turn())

    def rest(self) -> Iterator[tuple[int, object, Optional[int]]]:
        """(turn index, Turn, due or None) of every turn without a record, in order."""
        for k in range(self.next, len(self.session.turns) + 1):
            yield k, self.session.turns[k - 1], (self.due if k == self.next else None)
