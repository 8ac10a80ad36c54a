"""Rate limits: HTTP 429 and ``api.retry``. Pure: every engine's driver only waits and sends.

    settle.status_failure: 429 ─► error_kind ``rate_limited``; 429/503 with Retry-After ─►
        rec.retry_after_s (``retry_after``: analysis/server/rules.py's rule, ASCII delta-seconds or
        an HTTP-date, bounded parse; anything else ignored with its reason, appended to the
        record's error)
    Attempts(policy, rec, hangup)   one request's attempts (api.retry on); stepped by THE attempt
                                    loop (client/attempt.AttemptLoop) that every engine's driver
                                    drives (asyncio Client.execute, the Locust request source):
        send(..., att.hangup)  ─► load.cancel's Hangup for this attempt: a timed one counts from
                       the FIRST send (``Hangup.from_first``) from the second attempt on
        after(rec) ─► seconds to wait before the next attempt, or None (this one stands); a
                       hang-up due inside the wait shortens it to the deadline
        [sleep(wait)]  asyncio.sleep / gevent.sleep
        again(rec)  ─► True: the record reset for the next attempt; False: the hang-up came in
                       the wait, the record is ``aborted`` (never sent again)
        close(rec)  ─► attempts, attempt_log ([http_status, sent_at_ns, end_at_ns, error_kind]
                       each), sent_at_ns = the FIRST attempt's send; changes nothing in the
                       Attempts, so an interrupted request's copy can be closed while its
                       sender still waits (the Locust worker's snapshot)
    A stop during the wait (Ctrl-C, drain timeout) cancels it like any request in flight: the
    record is ``cancelled`` with the attempts so far, on every engine.

Latencies of a retried request count from the FIRST attempt's send (``sent_at_ns``): the
waits are the user's. The stale keep-alive resend (``retries``, ``first_sent_at_ns``) is apart:
inside one attempt, never reached the server, not an api.retry attempt.
A wait never runs past ``api.timeout_s`` from the first send (then the last answer stands).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

import msgspec

# the Retry-After rule is analysis/server/rules.py's, the sanity gate's too (one rule; the one
# module of analysis the client may import): (seconds, None); (None, reason) when ignored
from analysis.server.rules import MAX_RETRY_AFTER_S  # noqa: F401
from analysis.server.rules import retry_after as retry_after_checked
from loadgen.client.hangup import Hangup, abort
from loadgen.record import Record


def retry_after(value: Optional[str], now: Optional[float] = None) -> Optional[float]:
    """Seconds of a Retry-After value, or None when absent or ignored (retry_after_checked)."""
    return retry_after_checked(value, now)[0]


@dataclass(frozen=True)
class RetryPolicy:
    """``api.retry`` of one run (loadgen.scenario.hangups.Retry)."""

    on: frozenset
    max_attempts: int
    honor_retry_after: bool = True
    backoff_s: float = 1.0
    max_wait_s: float = 60.0
    timeout_s: float = 600.0           # api.timeout_s: no wait past first send + this

    @classmethod
    def of_api(cls, api: Any) -> Optional["RetryPolicy"]:
        r = getattr(api, "retry", None)
        if r is None:
            return None
        return cls(frozenset(r.on), r.max_attempts, r.honor_retry_after, r.backoff_s,
                   r.max_wait_s, float(getattr(api, "timeout_s", 600.0)))

    def wait_s(self, attempt: int, retry_after_s: Optional[float]) -> float:
        """The wait after attempt ``attempt`` (1-based)."""
        if self.honor_retry_after and retry_after_s is not None:
            return min(retry_after_s, self.max_wait_s)
        return min(self.backoff_s * 2 ** (attempt - 1), self.max_wait_s)


class Attempts:
    """One request's attempts under a RetryPolicy (module doc)."""

    __slots__ = ("policy", "blank", "log", "first_sent", "waited_s", "last_after", "first",
                 "hung")

    def __init__(self, policy: RetryPolicy, rec: Record, hangup: Optional[Hangup] = None):
        self.policy = policy
        self.blank = msgspec.structs.replace(rec, chunks=[])   # the record before any attempt
        self.log: list = []
        self.first_sent: Optional[int] = None
        self.waited_s = 0.0
        self.last_after: Optional[float] = None
        self.first = hangup                      # load.cancel for this request, or None
        self.hung = False                        # the hang-up is due inside the current wait

    @property
    def hangup(self) -> Optional[Hangup]:
        """load.cancel's Hangup for the next send: a timed one counts from the first send."""
        h = self.first
        return h if h is None else h.from_first(self.first_sent)

    def after(self, rec: Record, now_ns: int) -> Optional[float]:
        """The attempt in ``rec`` is over: log it; the wait before the next, or None."""
        if rec.sent_at_ns is not None and self.first_sent is None:
            self.first_sent = rec.first_sent_at_ns or rec.sent_at_ns
        self.log.append((rec.http_status, rec.sent_at_ns or now_ns, rec.end_at_ns,
                         rec.error_kind))
        if rec.retry_after_s is not None:
            self.last_after = rec.retry_after_s
        p = self.policy
        if (rec.status != "error" or rec.http_status not in p.on
                or len(self.log) >= p.max_attempts):
            return None
        wait = p.wait_s(len(self.log), rec.retry_after_s)
        start = self.first_sent if self.first_sent is not None else now_ns
        h = self.hangup
        due = None if h is None else h.due_in(start, now_ns)
        if due is not None and due <= wait:
            self.hung = True               # load.cancel: the client hangs up in the wait
            wait = due
        elif (now_ns - start) / 1e9 + wait > p.timeout_s:
            return None                    # past api.timeout_s from the first send
        self.waited_s += wait
        return wait

    def again(self, rec: Record, now_ns: int) -> bool:
        """After the wait: True with ``rec`` reset for the next attempt; False when the
        hang-up was due in it (``rec`` aborted at ``now_ns``, the last attempt's answer kept)."""
        if self.hung:
            rec.end_at_ns = None
            abort(rec, self.hangup.message(), now_ns)
            return False
        self.reset(rec)
        return True

    def reset(self, rec: Record) -> None:
        """``rec`` back to its state before the first attempt (a new chunks list)."""
        b = self.blank
        for f in Record.__struct_fields__:
            setattr(rec, f, getattr(b, f))
        rec.chunks = []

    def close(self, rec: Record) -> None:
        """The request is over (answered, failed for good, aborted, or cancelled during a wait
        or an attempt): its attempts into ``rec``. Reads the Attempts, never changes them."""
        log, first = list(self.log), self.first_sent
        if rec.sent_at_ns is None and not log:
            return
        if rec.sent_at_ns is not None and (not log or log[-1][1] != rec.sent_at_ns):
            log.append((rec.http_status, rec.sent_at_ns, rec.end_at_ns,   # cut short
                        rec.error_kind))
            if first is None:
                first = rec.first_sent_at_ns or rec.sent_at_ns
        if first is not None:
            rec.sent_at_ns = first
        rec.attempts = max(len(log), 1)
        rec.attempt_log = [list(a) for a in log] or None
        if rec.retry_after_s is None:
            rec.retry_after_s = self.last_after
