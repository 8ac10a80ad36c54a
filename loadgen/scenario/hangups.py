"""``load.cancel`` (clients that hang up on purpose) and ``api.retry`` (rate limits): their
scenario models, strict (one line + exit 2 for a bad value, through the loader).

    load.cancel: {fraction, after_tokens | after_ms, seed}
        which measured requests hang up is a pure function of (seed, request id)
        (loadgen.client.hangup.HangupRule): every engine, every sender process, picks the same;
        ``check_cancel(scenario)``: after_tokens needs api.stream true (tokens are counted as
        they stream); after_ms works on any answer (the transports' timer from the send)
    api.retry: {on: [429, 503], max_attempts, honor_retry_after, backoff_s, max_wait_s}
        off unless given; loadgen.client.retry.RetryPolicy decides each wait (no I/O)

Pure: pydantic only. ``Load`` (model.py) holds a ``Cancel``, ``Api`` (api.py) a ``Retry``.
"""
from __future__ import annotations

from typing import Optional

from pydantic import Field, model_validator

from loadgen.scenario.strict import Strict

MAX_ATTEMPTS = 10            # api.retry.max_attempts' bound: attempt_log stays this short
RETRY_STATUSES = (408, 425, 429, 500, 502, 503, 504)


class Cancel(Strict):
    """The client closes the stream of ``fraction`` of the measured requests (seeded) after
    ``after_tokens`` output tokens or ``after_ms`` ms from the send; the record is ``aborted``."""

    fraction: float = Field(ge=0, le=1)
    after_tokens: Optional[int] = Field(None, ge=1, le=1_000_000)
    after_ms: Optional[float] = Field(None, gt=0, le=3_600_000)
    seed: Optional[int] = None                 # None: the scenario's schedule seed
    ONE_OF = (("after_tokens", "after_ms"), "give exactly one of after_tokens and after_ms")


def check_cancel(sc) -> None:
    """The cross-field rule of load.cancel (Scenario's validator calls it): ValueError, one line."""
    c = sc.load.cancel
    if c is not None and c.after_tokens is not None and not sc.api.stream:
        raise ValueError("load.cancel.after_tokens: needs api.stream: true (a non-streamed "
                         "answer arrives whole, no token to count); use load.cancel.after_ms "
                         "or set api.stream: true")


class Retry(Strict):
    """Resend a request answered with a status in ``on`` (after waiting), up to
    ``max_attempts`` attempts in all. ``honor_retry_after``: wait what the server's Retry-After
    says (at most ``max_wait_s``); else, or without one, ``backoff_s`` × 2^(attempt − 1)."""

    on: list[int] = Field(default_factory=lambda: [429, 503], min_length=1, max_length=8)
    max_attempts: int = Field(3, ge=2, le=MAX_ATTEMPTS)
    honor_retry_after: bool = True
    backoff_s: float = Field(1.0, ge=0, le=600)
    max_wait_s: float = Field(60.0, ge=0, le=3600)

    @model_validator(mode="after")
    def _statuses(self) -> "Retry":
        bad = [s for s in self.on if s not in RETRY_STATUSES]
        if bad:
            raise ValueError(f"on: {bad[0]} is not a status to retry (one of "
                             f"{', '.join(map(str, RETRY_STATUSES))})")
        return self
