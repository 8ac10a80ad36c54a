"""The pure turn rules both engines share (loadgen/scenario/session_turns.py)."""
from loadgen.scenario.session_turns import (Conversation, next_due, turn_headers, with_answer,
                                            with_user)
from loadgen.scenario.sessions import Session, Turn

S = Session("s7-0", (Turn("one", 1, 4), Turn("two", 1, 4, 0.25), Turn("three", 1, 4, 1.5)))


def test_messages_due_times_and_headers():
    m = with_user([], S.turns[0])
    assert m == [{"role": "user", "content": "one"}]
    m2 = with_answer(m, None)
    assert m2[-1] == {"role": "assistant", "content": ""} and len(m) == 1   # a new list
    assert next_due(1_000, S.turns[1]) == 1_000 + 250_000_000
    assert turn_headers("X-Session-ID", "s7-0") == {"X-Session-ID": "s7-0"}
    assert turn_headers(None, "s7-0") is None


def test_conversation_walks_the_turns_and_leaves_the_rest_for_a_stop():
    c = Conversation(S, 100)
    assert (c.next, c.due, c.done) == (1, 100, False)
    assert list(c.rest()) == [(1, S.turns[0], 100), (2, S.turns[1], None),
                              (3, S.turns[2], None)]
    assert c.sent() == [{"role": "user", "content": "one"}]
    assert (c.next, c.due) == (2, None)          # in flight: the next turn's time is unknown
    c.answered(" tok tok", 5_000)
    assert c.due == 5_000 + 250_000_000
    assert list(c.rest())[0] == (2, S.turns[1], 5_000 + 250_000_000)
    assert c.sent()[1:] == [{"role": "assistant", "content": " tok tok"},
                            {"role": "user", "content": "two"}]
    c.answered("x", 9_000)
    c.sent()
    c.answered("y", 12_000)
    assert c.done and list(c.rest()) == [] and len(c.messages) == 6
