"""Clients that hang up on purpose (``load.cancel``): which request, when, and its record. Pure.

    HangupRule.of(scenario) ─► rule.of(request id, phase) ─► Hangup(after_tokens | after_ms) | None
        the choice is a hash of (seed, id): the same in every engine and sender process, as
        the plan's partition is, whoever sends the request (the one-process runner, a --procs
        child, a Locust worker); only measured requests (a session turn is one), never the
        warm-up or load.probe's side stream
    Hangup.after_tokens   the stream step (stream_step.StreamStep) asks ``token_limit``: it counts
                          output tokens as it parses; at the limit it settles the record
                          ``aborted`` and the driver closes the socket (``counts_tokens``: the
                          asyncio wire driver parses such a request's stream inline, as the
                          gevent driver always does)
    Hangup.after_ms       the driver arms ``deadline(sent, now)`` (http1.policy.Deadline, None
                          for a token hang-up) at the send; when it fires before
                          the answer ended the exchange fails with kind ``aborted`` (settle.ending:
                          the record keeps what was received, status ``aborted``). Streamed or
                          not: the timer is the transport's, not the stream step's. With
                          api.retry the deadline counts from the request's FIRST send
                          (``since_ns``: ``from_first(first_sent)``, asked by client.retry.Attempts
                          for every later attempt, handed to the driver by client/attempt.AttemptLoop's
                          SEND step); ``due_in(start, now)`` due inside a retry wait ends the
                          request there, never resent
This module is the only one outside loadgen/scenario/ that reads the rule's fields: the stream
step, the drivers, the connection policy and the retry loop ask the Hangup (its properties and
``deadline``), so a change to the rule is a change here.

``status: "aborted"`` is not the interrupt's ``cancelled`` and not a failure (the verdict does
not count it: the run asked for it); ``error_kind`` is ``aborted`` and ``error`` says when.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from loadgen.client.http1.policy import Deadline
from loadgen.record import Record

_M64 = (1 << 64) - 1


def _mix(x: int) -> int:
    """splitmix64's finaliser: a well-spread 64-bit hash of ``x``."""
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


@dataclass(frozen=True)
class Hangup:
    """When the client closes one request's stream (exactly one of after_tokens and after_ms
    is set). ``since_ns``: after_ms counts from this send (the request's first, api.retry);
    None: from the attempt's own send."""

    after_tokens: Optional[int] = None
    after_ms: Optional[float] = None
    since_ns: Optional[int] = None

    def left_s(self, sent_ns: int, now: int) -> float:
        """Seconds from ``now`` to the after_ms hang-up of an attempt sent at ``sent_ns``."""
        start = self.since_ns if self.since_ns is not None else sent_ns
        return max(self.after_ms / 1e3 - (now - start) / 1e9, 0.0)

    @property
    def token_limit(self) -> Optional[int]:
        """Output tokens after which the stream is closed, or None (a timed hang-up)."""
        return self.after_tokens

    @property
    def counts_tokens(self) -> bool:
        """Tokens must be counted as the stream is read (the stream is parsed inline)."""
        return self.after_tokens is not None

    def deadline(self, sent_at_ns: int, now: int) -> Optional[Deadline]:
        """The timed hang-up for the driver to arm: ``left_s`` from ``now`` for an attempt
        sent at ``sent_at_ns`` (the first attempt's send when api.retry retried), then
        ``aborted``; None for a token hang-up."""
        if self.after_ms is None:
            return None
        return Deadline(self.left_s(sent_at_ns, now), "aborted", self.message())

    def from_first(self, first_sent_ns: Optional[int]) -> "Hangup":
        """This hang-up for a later attempt (api.retry): a timed one counts from the
        request's first send ``first_sent_ns``; a token one, or no first send yet: itself."""
        if self.after_ms is None or first_sent_ns is None:
            return self
        return Hangup(self.after_tokens, self.after_ms, first_sent_ns)

    def due_in(self, start_ns: int, now: int) -> Optional[float]:
        """Seconds from ``now`` to a timed hang-up counted from ``start_ns``; None when not
        timed (a retry wait it falls inside ends there)."""
        if self.after_ms is None:
            return None
        return self.left_s(start_ns, now)

    def message(self, tokens: Optional[int] = None) -> str:
        if self.after_tokens is not None:
            return (f"load.cancel: the client closed the stream after {tokens or self.after_tokens}"
                    f" output tokens (after_tokens {self.after_tokens})")
        if self.since_ns is not None:
            return (f"load.cancel: the client hung up {self.after_ms:g} ms after the first send "
                    "(api.retry: the deadline counts from the first attempt)")
        return f"load.cancel: the client closed the stream {self.after_ms:g} ms after the send"


def abort(rec: Record, msg: str, t: Optional[int]) -> None:
    """The record of a request the client hung up on: ``aborted``, ended at ``t`` (what came
    before stays: chunks, first token)."""
    rec.status, rec.error_kind, rec.error = "aborted", "aborted", msg
    if rec.end_at_ns is None:
        rec.end_at_ns = t


@dataclass(frozen=True)
class HangupRule:
    """``load.cancel`` of one run: ``of(id, phase)`` says whether and when (module doc)."""

    fraction: float
    seed: int
    hangup: Hangup

    @classmethod
    def of_scenario(cls, sc: Any) -> Optional["HangupRule"]:
        c = getattr(sc.load, "cancel", None)
        if c is None or c.fraction <= 0:
            return None
        seed = c.seed if c.seed is not None else (
            sc.load.seed if sc.load.seed is not None else sc.workload.seed + 1)
        return cls(c.fraction, int(seed), Hangup(c.after_tokens, c.after_ms))

    def of(self, rid: int, phase: str) -> Optional[Hangup]:
        if phase != "measured":
            return None
        u = _mix(_mix(self.seed & _M64) ^ (rid & _M64)) / 2.0**64
        return self.hangup if u < self.fraction else None
