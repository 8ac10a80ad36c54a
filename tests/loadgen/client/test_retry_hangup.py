"""The pure rules of api.retry (loadgen.client.retry) and load.cancel (loadgen.client.hangup):
Retry-After parsing (bounded), the waits, the attempt log, the seeded choice of requests."""
import email.utils

from loadgen.client.hangup import Hangup, HangupRule
from loadgen.client.retry import MAX_RETRY_AFTER_S, Attempts, RetryPolicy, retry_after
from loadgen.client.sse import StreamTally
from loadgen.client.stream_step import StreamStep
from loadgen.record import Record


def test_retry_after_seconds_date_and_garbage():
    assert retry_after("5") == 5.0 and retry_after(" 0 ") == 0.0
    now = 1_700_000_000.0
    assert retry_after(email.utils.formatdate(now + 30, usegmt=True), now) == 30.0
    assert retry_after(email.utils.formatdate(now - 30, usegmt=True), now) == 0.0   # past: now
    assert retry_after("9" * 5000) == MAX_RETRY_AFTER_S        # bounded: read, then capped
    for bad in (None, "", "soon", "-3", "1.5e9x", "Mon, 99 Foo 20 25:61:00"):
        assert retry_after(bad) is None


def test_waits_honour_retry_after_within_max_wait():
    p = RetryPolicy(frozenset({429}), 4, True, backoff_s=0.5, max_wait_s=10)
    assert p.wait_s(1, 3.0) == 3.0 and p.wait_s(1, 99.0) == 10.0
    assert [p.wait_s(k, None) for k in (1, 2, 3)] == [0.5, 1.0, 2.0]
    q = RetryPolicy(frozenset({429}), 4, False, backoff_s=0.5)
    assert q.wait_s(2, 3.0) == 1.0                              # Retry-After not honoured


def _attempt(rec: Record, status: int, sent: int, kind=None, after=None) -> None:
    rec.sent_at_ns, rec.end_at_ns, rec.http_status = sent, sent + 10, status
    rec.status, rec.error_kind, rec.retry_after_s = ("ok", None, None) if status == 200 else (
        "error", kind, after)


def test_attempts_log_first_send_and_bounds():
    p = RetryPolicy(frozenset({429, 503}), 3, True, max_wait_s=60, timeout_s=600)
    rec = Record(id=1, phase="measured", requested_output_tokens=4)
    att = Attempts(p, rec)
    _attempt(rec, 429, 1_000, "rate_limited", 2.0)
    assert att.after(rec, 2_000) == 2.0
    att.reset(rec)
    assert rec.http_status is None and rec.sent_at_ns is None and rec.chunks == []
    _attempt(rec, 503, 5_000, "http")
    assert att.after(rec, 6_000) == 2.0                         # backoff 1 s × 2^1
    att.reset(rec)
    _attempt(rec, 429, 9_000, "rate_limited", 1.0)
    assert att.after(rec, 10_000) is None                       # max_attempts reached
    att.close(rec)
    assert rec.attempts == 3 and rec.sent_at_ns == 1_000         # latencies: the first send
    assert [a[0] for a in rec.attempt_log] == [429, 503, 429] and rec.retry_after_s == 1.0
    # a status not in ``on`` and a wait past api.timeout_s are not retried
    rec2 = Record(id=2, phase="measured")
    att2 = Attempts(RetryPolicy(frozenset({429}), 3, True, timeout_s=5), rec2)
    _attempt(rec2, 500, 0, "http")
    assert att2.after(rec2, 1) is None
    rec3 = Record(id=3, phase="measured")
    att3 = Attempts(RetryPolicy(frozenset({429}), 3, True, timeout_s=5), rec3)
    _attempt(rec3, 429, 0, "rate_limited", 30.0)
    assert att3.after(rec3, 1) is None


def test_hangup_choice_is_seeded_by_id_only():
    r = HangupRule(0.3, 7, Hangup(after_tokens=2))
    picks = [i for i in range(2000) if r.of(i, "measured")]
    assert picks == [i for i in range(2000) if HangupRule(0.3, 7, Hangup(after_tokens=2)).of(
        i, "measured")]                                          # any process: the same ids
    assert 0.25 < len(picks) / 2000 < 0.35
    assert picks != [i for i in range(2000) if HangupRule(0.3, 8, Hangup(2)).of(i, "measured")]
    assert r.of(picks[0], "warmup") is None and r.of(picks[0], "probe") is None
    assert not [i for i in range(500) if HangupRule(0.0, 7, Hangup(2)).of(i, "measured")]
    assert all(HangupRule(1.0, 7, Hangup(2)).of(i, "measured") for i in range(500))


def test_stream_step_stops_counting_at_after_tokens():
    rec = Record(id=0, phase="measured", requested_output_tokens=50)
    step = StreamStep(rec, StreamTally(), hangup=Hangup(after_tokens=3))
    ev = b"".join(b'data: {"choices":[{"index":0,"text":"a"}]}\n\n' for _ in range(10))
    assert step.feed(100, ev) is True                           # settled within one read
    assert (rec.status, rec.error_kind, rec.end_at_ns) == ("aborted", "aborted", 100)
    assert sum(n for _, n in rec.chunks) == 3 and "after 3 output tokens" in rec.error


def test_the_hang_up_counts_from_the_first_send_across_attempts():
    """load.cancel after_ms with api.retry (issue 41 item 14): the deadline is the FIRST send's
    + after_ms on every attempt; one that falls inside a retry wait ends the wait there and the
    request is aborted, never sent again."""
    import pytest
    p = RetryPolicy(frozenset({429}), 3, True, max_wait_s=60, timeout_s=600)
    h = Hangup(after_ms=500)
    rec = Record(id=4, phase="measured", requested_output_tokens=4)
    att = Attempts(p, rec, h)
    assert att.hangup is h                                      # the first: from its own send
    _attempt(rec, 429, 1_000_000_000, "rate_limited", 0.1)
    assert att.after(rec, 1_100_000_000) == pytest.approx(0.1)
    assert att.again(rec, 1_200_000_000) is True                # reset for attempt 2
    nxt = att.hangup
    assert nxt.since_ns == 1_000_000_000
    assert nxt.left_s(1_200_000_000, 1_200_000_000) == pytest.approx(0.3)   # not 0.5 again
    _attempt(rec, 429, 1_200_000_000, "rate_limited", 2.0)
    assert att.after(rec, 1_300_000_000) == pytest.approx(0.2)  # the wait stops at the deadline
    assert att.again(rec, 1_500_000_000) is False               # hung up: no attempt 3
    att.close(rec)
    assert (rec.status, rec.error_kind) == ("aborted", "aborted")
    assert "500 ms after the first send" in rec.error
    assert rec.attempts == 2 and rec.sent_at_ns == 1_000_000_000
    assert rec.end_at_ns == 1_500_000_000 and [a[0] for a in rec.attempt_log] == [429, 429]


def test_closing_a_copy_leaves_the_attempts_as_they_were():
    """An interrupted request's record is closed on a copy (the Locust worker writes a snapshot
    while its user still waits): closing must not change what the attempts hold."""
    import msgspec
    p = RetryPolicy(frozenset({429}), 3, True)
    rec = Record(id=5, phase="measured")
    att = Attempts(p, rec)
    _attempt(rec, 429, 1_000, "rate_limited", 1.0)
    att.after(rec, 2_000)
    att.again(rec, 3_000)
    rec.sent_at_ns = 4_000                                      # attempt 2 in flight
    snap = msgspec.structs.replace(rec)
    att.close(snap)
    assert snap.attempts == 2 and snap.sent_at_ns == 1_000
    att.close(rec)
    assert rec.attempt_log == snap.attempt_log and rec.attempts == 2


def test_cancel_needs_a_stream_for_after_tokens_only():
    """load.cancel with api.stream false (issue 41 item 20): after_tokens is refused at load
    time, naming load.cancel; after_ms is kept (the transports' hang-up timer needs no stream)."""
    import pytest
    from loadgen.scenario.loader import ScenarioError, scenario_from_dict
    tree = {"name": "c", "target": {"url": "http://127.0.0.1:9"},
            "api": {"model": "m", "probe": False, "stream": False},
            "workload": {"tokenizer": "bytes"},
            "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 1,
                     "cancel": {"fraction": 0.5, "after_tokens": 3}}}
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(tree)
    msg = str(e.value)
    assert "load.cancel" in msg and "api.stream" in msg and "\n" not in msg.strip()
    tree["load"]["cancel"] = {"fraction": 0.5, "after_ms": 100}
    assert scenario_from_dict(tree).load.cancel.after_ms == 100
