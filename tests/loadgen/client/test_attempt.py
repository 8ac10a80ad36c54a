"""loadgen/client/attempt.py: the one attempt loop, fed records directly (no socket, no loop),
and the static rules it brings (issue #37 step 2: Record built in <= 3 places, one request spec)."""
import re
from pathlib import Path

import msgspec
import pytest

from loadgen.client.attempt import (DONE, INTERRUPTED, SEND, WAIT, AttemptLoop,
                                    cancelled_record, new_record)
from loadgen.client.hangup import Hangup
from loadgen.client.retry import RetryPolicy
from loadgen.record import Record

MS = 1_000_000
ROOT = Path(__file__).resolve().parents[3]


def _rec() -> Record:
    return new_record(7, "measured", 100, 16, 4)


def _answer(rec, sent, end, status="ok", http=200, retry_after=None):
    """What one attempt's exchange leaves in the record."""
    rec.sent_at_ns, rec.end_at_ns, rec.http_status = sent, end, http
    rec.status = status
    rec.error_kind = None if status == "ok" else ("rate_limited" if http == 429 else "http")
    rec.retry_after_s = retry_after


def test_without_retry_one_send_then_done_and_one_attempt():
    rec, h = _rec(), Hangup(after_tokens=3)
    loop = AttemptLoop(rec, None, h)
    steps = loop.play(rec)
    assert next(steps) == (SEND, h)
    _answer(rec, 10 * MS, 20 * MS)
    assert steps.send(21 * MS) == (DONE, None)
    loop.settle(rec)
    assert rec.attempts == 1 and rec.attempt_log is None


def test_never_sent_has_no_attempts():
    rec = _rec()
    loop = AttemptLoop(rec, None, None)
    loop.settle(rec)
    assert rec.attempts is None


def test_a_429_is_waited_for_and_sent_again_latency_from_the_first_send():
    rec = _rec()
    loop = AttemptLoop(rec, RetryPolicy(frozenset({429}), 3, True, backoff_s=1.0), None)
    steps = loop.play(rec)
    assert next(steps) == (SEND, None)
    _answer(rec, 10 * MS, 20 * MS, "error", 429, retry_after=0.5)
    assert steps.send(20 * MS) == (WAIT, 0.5)
    assert steps.send(520 * MS)[0] is SEND
    assert rec.status == "pending" and rec.chunks == [] and rec.sent_at_ns is None
    _answer(rec, 600 * MS, 700 * MS)
    assert steps.send(700 * MS) == (DONE, None)
    loop.settle(rec)
    assert rec.attempts == 2 and rec.sent_at_ns == 10 * MS
    assert [a[0] for a in rec.attempt_log] == [429, 200]


def test_the_hang_up_counts_from_the_first_send_and_may_come_in_the_wait():
    rec, h = _rec(), Hangup(after_ms=300)
    loop = AttemptLoop(rec, RetryPolicy(frozenset({429}), 3, True), h)
    steps = loop.play(rec)
    assert next(steps) == (SEND, h)                # the first attempt: its own send
    _answer(rec, 10 * MS, 60 * MS, "error", 429, retry_after=2.0)
    what, wait = steps.send(110 * MS)
    assert what is WAIT and wait == pytest.approx(0.2)     # shortened to the deadline
    assert steps.send(310 * MS) == (DONE, None)
    assert (rec.status, rec.error_kind) == ("aborted", "aborted")
    assert "after the first send" in rec.error
    loop.settle(rec)
    assert rec.attempts == 1


def test_a_later_attempt_gets_the_first_sends_deadline():
    rec, h = _rec(), Hangup(after_ms=5000)
    loop = AttemptLoop(rec, RetryPolicy(frozenset({503}), 3, False, backoff_s=0.1), h)
    steps = loop.play(rec)
    next(steps)
    _answer(rec, 40 * MS, 50 * MS, "error", 503)
    assert steps.send(50 * MS)[0] is WAIT
    what, again = steps.send(150 * MS)
    assert what is SEND and again.after_ms == 5000 and again.since_ns == 40 * MS


def test_cancelled_keeps_a_complete_answer_and_closes_the_attempts():
    rec = _rec()
    loop = AttemptLoop(rec, RetryPolicy(frozenset({429}), 3, True, backoff_s=1.0), None)
    steps = loop.play(rec)
    next(steps)
    _answer(rec, 10 * MS, 20 * MS, "error", 429)
    steps.send(20 * MS)                            # waiting: then the run is interrupted
    loop.cancelled(rec)
    assert (rec.status, rec.error_kind, rec.error) == ("cancelled", "cancelled", INTERRUPTED)
    assert rec.attempts == 1 and rec.end_at_ns == 20 * MS
    done = _rec()
    _answer(done, 1, 2)
    AttemptLoop(done, None, None).cancelled(done)
    assert done.status == "ok" and done.end_at_ns == 2


def test_the_constructors_are_the_records_own():
    assert new_record(1, "warmup", 5, 8, 3, "s", 2) == Record(
        id=1, phase="warmup", scheduled_at_ns=5, requested_output_tokens=8,
        workload_prompt_tokens=3, session_id="s", turn=2)
    assert cancelled_record(2, "measured", None, 9, "why", worker="0") == Record(
        id=2, phase="measured", scheduled_at_ns=None, end_at_ns=9, status="cancelled",
        error_kind="cancelled", error="why", worker="0")


def test_a_record_is_built_in_at_most_three_places():
    """issue #37: ``Record(`` is called in <= 3 places under loadgen/ and analysis/."""
    call = re.compile(r"(?<![\w.])Record\(")
    found = []
    for top in ("loadgen", "analysis"):
        for p in (ROOT / top).rglob("*.py"):
            for n, line in enumerate(p.read_text().splitlines(), 1):
                code = line.split("#")[0]
                if call.search(code) and not code.lstrip().startswith(("class ", '"""', "loadgen")):
                    found.append(f"{p.relative_to(ROOT)}:{n}")
    assert len(found) <= 3, found


def test_one_frozen_spec_from_the_workload_to_the_plan():
    from loadgen.engine.core.plan import Spec
    from loadgen.scenario.workload import PromptSpec
    assert Spec is PromptSpec
    s = PromptSpec("hi", 1, 4, id=3, phase="warmup")
    with pytest.raises(AttributeError):
        s.prompt = "no"
    assert msgspec.structs.replace(s, images=("x",)).images == ("x",)
