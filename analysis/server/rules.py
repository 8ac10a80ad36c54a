"""The rules both sides apply to what a server says in a request's own answer, once: its
Retry-After header and its usage token counts. Standard library only (no pydantic, no numpy,
nothing of analysis but this module), so the client may import it (tests/test_layering.py allows
loadgen/client exactly this module of analysis).

    a raw value the server said ─► retry_after | token_count ─► Checked(value, reason)
        value   the figure, or None;  reason  None when it passed, else one line a user reads

    retry_after(header, now)   RFC 9110 §10.2.3: ASCII digits (delta-seconds) or an HTTP-date,
                               within [0, MAX_RETRY_AFTER_S]; anything else is ignored, with why
    token_count(v, what, cap)  usage counts: an int (not a bool, not "5"), ≥ 0, ≤ cap

Used by analysis/server/sanity.py (the sanity gate, which re-exports them), by
loadgen/client/retry.py (rec.retry_after_s, via client/settle.py and the aiohttp transport) and by
loadgen/client/request.py (the record's usage counts at finish). Pure and total: never an
exception.
"""
from __future__ import annotations

import email.utils
import math
import time
from typing import Any, NamedTuple, Optional

MAX_RETRY_AFTER_S = 86_400.0          # a Retry-After beyond a day is read as a day


class Checked(NamedTuple):
    """A value that passed the gate (reason None), or None and why not."""

    value: Any
    reason: Optional[str] = None

    @property
    def ok(self) -> bool:
        return self.reason is None


ABSENT = Checked(None)                # nothing said: nothing to check


def fail(reason: str) -> Checked:
    return Checked(None, reason)


def show(v: Any) -> str:
    """``v`` as a reason quotes it: at most 40 characters; a non-finite float as Prometheus
    spells it."""
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if v != v else ("+Inf" if v > 0 else "-Inf")
    s = repr(v) if isinstance(v, str) else str(v)
    return s[:40]


def retry_after(value: Any, now: Optional[float] = None) -> Checked:
    """A Retry-After header value in seconds, within [0, MAX_RETRY_AFTER_S] (RFC 9110 §10.2.3:
    ``delta-seconds = 1*DIGIT`` in ASCII, or an HTTP-date; ``²``, ``１２``, ``1.5``, a date
    without its zone are ignored). Bounded: at most 64 characters are looked at. Absent:
    Checked(None, None)."""
    if value is None or value == "":
        return ABSENT
    if not isinstance(value, str):
        return fail(f"Retry-After is a {type(value).__name__}, not text: ignored")
    v = value.strip()[:64]
    if v.isascii() and v.isdigit():      # str.isdigit alone takes "²" and "١"
        return Checked(min(float(int(v[:12])), MAX_RETRY_AFTER_S))
    bad = f"Retry-After {show(v)} is neither ASCII digits nor an HTTP-date: ignored"
    if not v.isascii():
        return fail(bad)
    try:
        when = email.utils.parsedate_to_datetime(v)
    except (TypeError, ValueError, IndexError, OverflowError):
        return fail(bad)
    if when is None or when.tzinfo is None:
        return fail(bad)
    now = time.time() if now is None else now
    return Checked(min(max(when.timestamp() - now, 0.0), MAX_RETRY_AFTER_S))


def token_count(v: Any, what: str = "tokens", cap: Optional[int] = None) -> Checked:
    """A usage count: an int (a bool, a float or the string "5" is the wrong type), in [0, cap].
    None (not said) passes as None."""
    if v is None:
        return ABSENT
    if v.__class__ is not int:
        return fail(f"usage {what} is a {type(v).__name__} ({show(v)}), not an integer")
    if v < 0 or (cap is not None and v > cap):
        return fail(f"usage {what} {v} outside [0, {'∞' if cap is None else cap}] "
                    "(what this answer could carry)")
    return Checked(v)
