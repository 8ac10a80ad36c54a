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
