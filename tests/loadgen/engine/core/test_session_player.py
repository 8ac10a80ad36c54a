"""loadgen.engine.core.sessions.SessionPlayer: the one session driver both runtimes play (pure):
which session next, when each turn is due, what a stop or a drain cancels."""
from loadgen.record import Record
from loadgen.engine.core.sessions import NEVER_SENT, NOT_STARTED, SEND, WAIT, SessionPlayer
from loadgen.scenario.sessions import Session, Turn


def _session(sid: str, n: int, think_s: float = 0.5) -> Session:
    return Session(sid, tuple(Turn(f"u{k}", 7, 3, think_s) for k in range(1, n + 1)))


def _answer(t, end_ns: int, status: str = "ok") -> Record:
    rec = t.record()
    rec.status, rec.output_text, rec.end_at_ns = status, f"a{t.k}", end_ns
    return rec


def test_a_session_is_played_turn_after_turn_and_a_failed_turn_ends_it():
    p = SessionPlayer(range(100, 200), None, lambda: False)
    p.begin(1_000, None, [(_session("s", 3), None)], server=False)
    conv = p.take(True, 5_000)
    assert conv.due == 1_000                              # a user's first session: from t0
    play = p.play(conv)
    kind, t = next(play)
    assert (kind, t.id, t.k, t.due) == (SEND, 100, 1, 1_000)
    kind, due = play.send(_answer(t, 2_000))
    assert (kind, due) == (WAIT, 2_000 + 500_000_000)     # the answer's end + think_s
    kind, t = play.send(False)
    assert t.messages[-2:] == [{"role": "assistant", "content": "a1"},
                               {"role": "user", "content": "u2"}]
    try:
        play.send(_answer(t, 3_000, "error"))             # a failed turn: nothing to build on
    except StopIteration:
        pass
    assert not p.busy and p.book.issued == 2
    assert p.take(False, 9_000) is None and p.exhausted   # the slice is used up


def test_a_stop_cancels_what_was_left_and_the_sessions_never_started():
    p = SessionPlayer(iter(range(100)), 5, lambda: False)
    p.begin(0, None, [(_session("a", 2), 10), (_session("b", 2), 20), (_session("c", 3), 30)],
            server=True, total=3)
    a, b = p.take(False, 0), p.take(False, 0)
    assert (a.due, b.due) == (10, 20) and p.pending == [a, b]
    assert p.claim(a) and p.pending == [b]
    play = p.play(a)
    _, t = next(play)                                     # a's turn 1 in flight
    assert p.drain_due(10**12, 0, True, 1.0) is None      # b waits for its start: no drain
    recs = p.stop("interrupted")
    assert [(r.session_id, r.turn, r.error) for r in recs] == [
        ("a", 2, "interrupted"),                          # in flight: the stop's reason
        ("b", 1, NOT_STARTED), ("b", 2, NOT_STARTED),     # scheduled, never started
        ("c", 1, NOT_STARTED)]                            # within the budget of 5 turns
    assert not p.claim(b) and p.stop("again") == []       # a stop once; b was recorded


def test_a_drain_cancels_every_turn_left_with_its_reason():
    p = SessionPlayer(iter(range(100)), None, lambda: False)
    p.begin(0, None, ((_session(f"s{i}", 2), None) for i in range(10)), server=False)
    play = p.play(p.take(True, 0))
    _, t = next(play)
    play.send(_answer(t, 100))                            # turn 2 waits for its think time
    assert p.drain_due(100 + 10**9, 100, False, 5.0) is None
    why = p.drain_due(100 + 6 * 10**9, 100, False, 5.0)
    assert "load.drain_timeout_s" in why
    recs = p.drain(why)
    assert [(r.turn, r.error, r.scheduled_at_ns) for r in recs] == [(2, why, 100 + 500_000_000)]
    assert p.halted() and p.take(False, 0) is None


def test_a_waiting_turn_stopped_is_never_sent():
    stopped = []
    p = SessionPlayer(iter(range(100)), None, lambda: bool(stopped))
    p.begin(0, None, [(_session("s", 3), None)], server=False)
    conv = p.take(True, 0)
    play = p.play(conv)
    _, t = next(play)
    play.send(_answer(t, 100))
    stopped.append(1)
    try:
        play.send(True)                                   # the wait saw the stop
    except StopIteration:
        pass
    assert p.busy                                         # left for the stop to record
    assert [(r.turn, r.error) for r in p.stop("x")] == [(2, NEVER_SENT), (3, NEVER_SENT)]
