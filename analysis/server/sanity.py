"""The sanity gate: every figure a server says passes here before it becomes a figure of ours.

    a raw value the server said ─► one rule below ─► Checked(value, reason)
        value   the figure (a float or an int), or None
        reason  None when the value passed; else one line a user reads ("… is NaN", "went down
                at +3.2 s: a reset", "hits 1,200 > queries 1,000") and the value is None

Pure and total: no I/O, never an exception, never an absurd figure (NaN, ±Inf, a negative count,
a hit rate above 1, a string where a count belongs). The rules:

    gauge(v)                      a finite number ≥ 0 (a bool or a string is not a number)
    counter_delta(points, a, b)   a counter's Δ between the window edges a and b, from every
                                  sample (t, v) up to b: each finite and ≥ 0, and none lower than
                                  the one before (a reset mid-window, even one whose end is above
                                  its start, is a reset, not a delta)
    ratio(part, whole)            part / whole for a part that cannot exceed its whole (prefix-cache
                                  hits ≤ queries, accepted ≤ draft tokens); whole 0 ─► no ratio
    retry_after(header, now)      RFC 9110 §10.2.3: ASCII digits (delta-seconds) or an HTTP-date,
                                  within [0, MAX_RETRY_AFTER_S]; anything else is ignored
    token_count(v, cap)           usage counts: an int (not a bool, not "5"), ≥ 0, ≤ cap
    spans(queue, prefill, ttft)   server durations (s): finite, ≥ 0, queue + prefill ≤ TTFT + tol

Used by analysis/server (metrics, series, spec_decode), analysis/metrics (hangups, prefix_cache)
and loadgen/run/running_after. ``retry_after``, ``token_count`` and ``Checked`` live in
analysis/server/rules.py (standard library only), the one module of analysis loadgen/client may
import (tests/test_layering.py): the client applies the very same rules, re-exported here.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Sequence

from analysis.server.rules import MAX_RETRY_AFTER_S, Checked, retry_after, token_count  # noqa: F401
from analysis.server.rules import fail as _fail
from analysis.server.rules import show as _show

SPAN_TOLERANCE_S = 0.001              # queue + prefill may exceed TTFT by rounding only


def number(v: Any, what: str = "value") -> Checked:
    """A finite real number (int or float; not a bool, not a string)."""
    if v is None:
        return _fail(f"{what} is missing")
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return _fail(f"{what} is a {type(v).__name__} ({_show(v)}), not a number")
    if isinstance(v, float) and not math.isfinite(v):
        return _fail(f"{what} is {_show(v)}, not a finite number")
    return Checked(v)


def gauge(v: Any, what: str = "gauge") -> Checked:
    """A gauge: a finite number ≥ 0."""
    c = number(v, what)
    if c.ok and c.value < 0:
        return _fail(f"{what} is {_show(v)}: a gauge cannot be negative")
    return c


def gauge_text(text: str, what: str = "gauge") -> Checked:
    """A gauge's value as written in a /metrics line (``NaN``, ``+Inf``, ``abc`` fail)."""
    try:
        v = float(text)
    except (TypeError, ValueError):
        return _fail(f"{what} is {_show(text)}, not a number")
    return gauge(v, what)


def counter_delta(points: Sequence[tuple[int, Any]], a: int, b: int,
                  what: str = "counter") -> Checked:
    """Δ of one counter series (``points``: (t_ns, value) in time order) between the edges a and
    b: the last sample at or before b minus the last at or before a (0 when none: the counter
    began in the window). Every sample from the start edge to b is checked, not only the ends."""
    start_i = -1
    end_i = -1
    for i, (t, _v) in enumerate(points):
        if t <= a:
            start_i = i
        if t <= b:
            end_i = i
        else:
            break
    if end_i < 0:
        return _fail(f"{what}: no sample at or before the window end")
    first = max(start_i, 0)
    prev: Optional[float] = None
    for t, v in points[first:end_i + 1]:
        c = number(v, what)
        if not c.ok:
            return c
        if v < 0:
            return _fail(f"{what} is {_show(v)}: a counter cannot be negative")
        if prev is not None and v < prev:
            return _fail(f"{what} went down in the window ({prev:g} ─► {v:g} at "
                         f"{(t - a) / 1e9:+.1f} s from the start edge): the server restarted "
                         "or reset it; no delta")
        prev = v
    va = points[start_i][1] if start_i >= 0 else 0.0
    return Checked(points[end_i][1] - va)


def ratio(part: Optional[float], whole: Optional[float], part_name: str = "part",
          whole_name: str = "whole") -> Checked:
    """part / whole where the part cannot exceed the whole (≤ 1), both counts ≥ 0."""
    for v, name in ((part, part_name), (whole, whole_name)):
        c = number(v, name)
        if not c.ok:
            return c
        if v < 0:
            return _fail(f"{name} is {_show(v)}: a count cannot be negative")
    if whole == 0:
        return _fail(f"no {whole_name} in the window: the ratio is undefined")
    if part > whole:
        return _fail(f"{part_name} ({part:g}) > {whole_name} ({whole:g}): the server's counters "
                     "disagree; no ratio")
    return Checked(part / whole)


def spans(queue_s: Any, prefill_s: Any, ttft_s: Any,
          tol_s: float = SPAN_TOLERANCE_S) -> Checked:
    """Server-side spans of one request or their means (s): each finite and ≥ 0, and queue +
    prefill ≤ TTFT + tol (both happen before the first token). Value: (queue, prefill, ttft)."""
    for v, name in ((queue_s, "queue time"), (prefill_s, "prefill time"), (ttft_s, "server TTFT")):
        c = number(v, name)
        if not c.ok:
            return c
        if v < 0:
            return _fail(f"{name} is {_show(v)}: a duration cannot be negative")
    if queue_s + prefill_s > ttft_s + tol_s:
        return _fail(f"queue ({queue_s:.4g} s) + prefill ({prefill_s:.4g} s) > server TTFT "
                     f"({ttft_s:.4g} s): the server's spans disagree")
    return Checked((queue_s, prefill_s, ttft_s))
