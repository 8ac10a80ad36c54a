"""The steady-state window: the part of a run with ramp-up and drain cut off, by a stated rule.

    records (sent_at / end_at / chunks) + meta (RunMeta: mode, in_flight_cap)
        ─► steady_window ─► dict

The full window (figures.window: first measured send to last measured end) stays the headline of
summary.json; this one is reported beside it ("steady_state") and, when "ok", energy uses it.

Rule (times on perf_counter_ns; in flight = requests sent and not yet ended, warm-up included):
  offline / concurrency (closed loop): level L = min(in-flight cap, measured requests sent).
    start = the first instant at or after the first measured send at which L requests are in
            flight (ramp-up excluded; warm-up requests still running count, so a warm-up that
            hands over a full pipeline starts the window at once);
    end   = the last measured send (no slot is refilled after it: the drain begins).
  server (open loop): start = the first measured send, end = the last measured send (the arrivals
    are the workload; the drain after the last arrival is excluded).
  The window is a time slice: every token whose chunk arrives in (start, end] counts, whichever
  request (and phase) it belongs to; a request without token chunks (not streamed) counts its
  output_tokens at end_at. request_throughput counts completed (status ok) requests whose end_at
  lies in (start, end]. mean_in_flight is the time-weighted mean over [start, end].
  status "unavailable" (figures None, reason given) when the level is never reached, the window
  is empty, or it lasts < MIN_S seconds or < MIN_FRACTION of the full window.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from analysis.contract import RunMeta
from analysis.metrics import figures as m
from analysis.contract import timing
from analysis.contract.records import Records

MIN_S = 1.0
MIN_FRACTION = 0.1
CLOSED_RULE = ("closed loop: from the first instant, at or after the first measured send, that "
               "L = min(in-flight cap, measured requests) requests (warm-up included) are in "
               "flight, to the last measured send (ramp-up and drain excluded)")
OPEN_RULE = ("open loop (server): from the first measured send to the last measured send "
             "(the drain after the last arrival excluded)")
FIGURES = ("output_tokens", "output_throughput", "request_throughput", "mean_in_flight")


def _cap(meta: RunMeta) -> Optional[int]:
    """meta.json ``in_flight_cap`` (concurrency, max_concurrency or Locust users); None: none."""
    cap = meta.in_flight_cap
    return cap if cap is not None and cap > 0 else None


def _count_at(steps: tuple[np.ndarray, np.ndarray], t: int) -> int:
    """Requests in flight just after time t (every event at t applied)."""
    i = int(np.searchsorted(steps[0], t, side="right"))
    return int(steps[1][i - 1]) if i else 0


BLOCK = 1 << 20     # steps summed at a time


def _mean_in_flight(steps: tuple[np.ndarray, np.ndarray], start: int, end: int) -> float:
    """The time-weighted mean of the step function over [start, end]: the area, summed step by
    step in float as a Python loop would (the same float), over the duration."""
    ts, cs = steps
    lo = int(np.searchsorted(ts, start, side="right"))
    hi = int(np.searchsorted(ts, end, side="left"))
    n0, area = _count_at(steps, start), 0.0
    if hi > lo:                                   # sequential, as area += n * (ts - prev),
        prev, cnt = start, n0                     # a block of steps at a time
        for b in range(lo, hi, BLOCK):
            e = min(b + BLOCK, hi)
            t = ts[b:e]
            n = np.concatenate([[cnt], cs[b:e - 1]]).astype(float)
            dt = np.diff(t, prepend=prev).astype(float)
            n *= dt
            area = float(np.cumsum(np.concatenate([[area], n]))[-1])
            prev, cnt = int(t[-1]), int(cs[e - 1])
        n0, start_prev = cnt, prev
    else:
        start_prev = start
    area += n0 * (end - start_prev)
    return area / (end - start)


def steady_window(records: Records, meta: Optional[dict | RunMeta] = None, *,
                  min_s: float = MIN_S, min_fraction: float = MIN_FRACTION) -> dict:
    """The "steady_state" object of summary.json; see the module docstring for the rule."""
    meta = RunMeta.read(meta, "meta")
    server = m.open_loop(meta.mode)
    out: dict = {"rule": OPEN_RULE if server else CLOSED_RULE, "status": "unavailable",
                 "reason": None, "start_ns": None, "end_ns": None, "duration_s": None,
                 "level": None, **{k: None for k in FIGURES},
                 "min_duration_s": min_s, "min_fraction_of_full": min_fraction}
    tab, meas, _, _ = m.selections(records)
    sent, sent_ok = tab.stamp("sent_at_ns")
    sends = sent[meas & sent_ok]                    # the measured sends (arrays)
    full = m.window(records)
    if not sends.size or full is None:
        out["reason"] = "no measured request was sent and ended"
        return out
    steps = m.in_flight_steps(records)  # all phases; at equal times ends come before sends
    first, start, end = int(sends.min()), int(sends.min()), int(sends.max())
    if not server:
        cap = _cap(meta)
        level = min(cap, sends.size) if cap else sends.size
        out["level"] = level
        # the count after every event at an instant (the last step at that time), so that an
        # intermediate count at a busy instant (ends applied, sends not yet) is not taken
        ts, cs = steps
        last = np.ones(ts.size, bool)
        last[:-1] = ts[1:] != ts[:-1]
        hit = np.flatnonzero((ts >= first) & (cs >= level) & last)
        start = int(ts[hit[0]]) if hit.size else None
        if start is None or _count_at(steps, start) < level:
            out["reason"] = f"in flight never reached the level L = {level}"
            return out
    out.update(start_ns=start, end_ns=end, duration_s=max(end - start, 0) / 1e9)
    full_s = m.duration_s(full)
    dur = out["duration_s"]
    if end <= start:
        out["reason"] = ("empty: the level was reached only at or after the last measured send"
                         + ("" if server or _cap(meta) else " (no in-flight cap: every request "
                            "is sent at once, nothing is refilled)"))
    elif dur < min_s:
        out["reason"] = f"{dur:.3f} s < the minimum {min_s:g} s"
    elif dur < min_fraction * full_s:
        out["reason"] = (f"{dur:.3f} s < {min_fraction:.0%} of the full window ({full_s:.3f} s)")
    if out["reason"]:
        return out
    tokens = timing.tokens_in(tab, start, end)      # energy.split.token_events, on arrays
    end_ns, end_ok = tab.stamp("end_at_ns")
    done = int((end_ok & (tab.column("status") == "ok") & (end_ns > start)
                & (end_ns <= end)).sum())
    out.update(status="ok", output_tokens=int(tokens), output_throughput=tokens / dur,
               request_throughput=done / dur,
               mean_in_flight=_mean_in_flight(steps, start, end))
    return out
