"""loadgen.engine.core.sessions: the session book both drivers share (pure)."""
from loadgen.engine.core.sessions import NOT_STARTED, SessionBook
from loadgen.scenario.session_turns import Conversation
from loadgen.scenario.sessions import Session, Turn


def _session(sid: str, n: int) -> Session:
    return Session(sid, tuple(Turn(f"u{k}", 7, 3, 0.5) for k in range(1, n + 1)))


def test_turns_take_ids_in_order_and_the_budget_stops_them():
    book = SessionBook(range(10, 20, 2), 3, None)       # a worker's ids, a budget of 3 turns
    conv = Conversation(_session("s", 4), 1_000)
    t = book.send(conv)
    assert (t.id, t.k, t.due, t.session_id) == (10, 1, 1_000, "s")
    assert t.messages == [{"role": "user", "content": "u1"}] and conv.due is None
    conv.answered("a1", 2_000)
    assert conv.due == 2_000 + 500_000_000               # answer end + think_s
    assert book.send(conv).id == 12 and book.budget_left()
    rest = book.unsent(conv, "stopped")                  # turns 3 and 4; one id left
    assert [(r.id, r.turn, r.status, r.error) for r in rest] == [(14, 3, "cancelled", "stopped")]
    assert rest[0].scheduled_at_ns is None               # its due time waited on an answer
    assert conv.closed and not book.budget_left() and book.issued == 3


def test_unstarted_sessions_within_the_budget_and_the_end():
    book = SessionBook(iter(range(100)), None, 5_000)
    recs = book.unstarted([(1_000, _session("a", 2)), (4_000, _session("b", 1)),
                           (5_000, _session("c", 3))])
    assert [(r.session_id, r.turn, r.scheduled_at_ns) for r in recs] == [
        ("a", 1, 1_000), ("a", 2, None), ("b", 1, 4_000)]      # c starts at the end: not owed
    assert all(r.error == NOT_STARTED for r in recs) and [r.id for r in recs] == [0, 1, 2]
    assert not book.budget_left(stopped=True)
