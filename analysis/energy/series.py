"""Energy time series: counter unwrapping, trapezoid integration, windowing with edge interpolation.

Two kinds of series come out of power.jsonl, keyed by (source, device):

    energy_j rows (a cumulative counter, raw) ─► unwrap_counter ─► cumulative J ─┐
    power_w rows (instantaneous watts)        ─► cumulative_trapezoid ──────────┴► window_energy

A counter that decreases has either wrapped (``wrap_j`` known: RAPL's max_energy_range_uj) or been
reset (no ``wrap_j``: a DCGM exporter or driver restart); a reset counts the new value as the energy
since the reset, as Prometheus' ``increase()`` does, so a reset makes the figure a lower bound.
All functions are pure; times are int nanoseconds, energies joules, powers watts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import numpy as np


@dataclass
class Unwrapped:
    """A counter turned into a non-decreasing cumulative energy starting at 0 J."""

    t_ns: np.ndarray              # int64 [n]
    cum_j: np.ndarray             # float64 [n], cum_j[0] == 0
    wraps: list[int] = field(default_factory=list)   # indices i where reading i wrapped
    resets: list[int] = field(default_factory=list)  # indices i where reading i was a reset
    w: Optional[np.ndarray] = None  # power series: the watts, for exact piecewise-linear integrals


def unwrap_counter(t_ns: Sequence[int], values: Sequence[float],
                   wrap_j: Optional[float] = None) -> Unwrapped:
    """Deltas of a cumulative counter, handling wraparound (``wrap_j``) and resets (no wrap_j)."""
    t = np.asarray(t_ns, dtype=np.int64)
    v = np.asarray(values, dtype=np.float64)
    if t.shape != v.shape:
        raise ValueError("t_ns and values differ in length")
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    d = np.diff(v)                                     # [n-1]
    wraps: list[int] = []
    resets: list[int] = []
    for i in np.nonzero(d < 0)[0]:
        if wrap_j is not None and wrap_j > 0:
            d[i] = v[i + 1] + wrap_j - v[i]            # passed max_energy_range once
            wraps.append(int(i + 1))
        else:
            d[i] = v[i + 1]                            # restarted from zero
            resets.append(int(i + 1))
    cum = np.concatenate([[0.0], np.cumsum(d)]) if len(v) else np.zeros(0)
    return Unwrapped(t, cum, wraps, resets)


def counter_delta(values: Sequence[float], wrap_j: Optional[float] = None) -> float:
    """Total energy between the first and last reading of a counter."""
    u = unwrap_counter(list(range(len(values))), values, wrap_j)
    return float(u.cum_j[-1]) if len(u.cum_j) else 0.0


def trapezoid_j(t_ns: Sequence[int], watts: Sequence[float]) -> float:
    """Energy of a power series by the trapezoid rule (J)."""
    t = np.asarray(t_ns, dtype=np.float64) / 1e9
    w = np.asarray(watts, dtype=np.float64)
    if len(t) < 2:
        return 0.0
    return float(np.sum((w[1:] + w[:-1]) * 0.5 * np.diff(t)))


def cumulative_trapezoid(t_ns: Sequence[int], watts: Sequence[float]) -> Unwrapped:
    """Cumulative energy of a power series at each sample time (J), starting at 0."""
    t = np.asarray(t_ns, dtype=np.int64)
    order = np.argsort(t, kind="stable")
    t = t[order]
    w = np.asarray(watts, dtype=np.float64)[order]
    if len(t) == 0:
        return Unwrapped(t, np.zeros(0))
    steps = (w[1:] + w[:-1]) * 0.5 * (np.diff(t) / 1e9)
    return Unwrapped(t, np.concatenate([[0.0], np.cumsum(steps)]), w=w)


def covers(t_ns: np.ndarray, start_ns: int, end_ns: int) -> bool:
    """True when the samples bracket [start, end]: one at or before start, one at or after end."""
    return len(t_ns) >= 2 and int(t_ns[0]) <= start_ns and int(t_ns[-1]) >= end_ns


def cum_at(series: Unwrapped, t_ns: Sequence[int] | np.ndarray) -> np.ndarray:
    """Cumulative energy at the given times (inside the sampled span): a counter is interpolated
    linearly; a power series is integrated exactly with power interpolated linearly."""
    q = np.asarray(t_ns, dtype=np.float64)
    t = series.t_ns.astype(np.float64)
    if series.w is None:
        return np.interp(q, t, series.cum_j)
    i = np.clip(np.searchsorted(t, q, side="right") - 1, 0, len(t) - 1)   # segment start [m]
    wq = np.interp(q, t, series.w)
    return series.cum_j[i] + (series.w[i] + wq) * 0.5 * (q - t[i]) / 1e9


def window_energy(series: Unwrapped, start_ns: int, end_ns: int) -> Optional[float]:
    """Energy in [start, end], interpolating the cumulative series at both edges; None when the
    samples do not bracket the window."""
    if end_ns <= start_ns or not covers(series.t_ns, start_ns, end_ns):
        return None
    a, b = cum_at(series, [start_ns, end_ns])
    return float(b - a)


def window_power_samples(t_ns: Sequence[int], watts: Sequence[float], start_ns: int,
                         end_ns: int) -> tuple[np.ndarray, np.ndarray]:
    """Power samples clipped to [start, end] with linearly interpolated points at both edges."""
    t = np.asarray(t_ns, dtype=np.float64)
    w = np.asarray(watts, dtype=np.float64)
    order = np.argsort(t, kind="stable")
    t, w = t[order], w[order]
    if len(t) < 2 or t[0] > start_ns or t[-1] < end_ns:
        return np.zeros(0), np.zeros(0)
    inside = (t > start_ns) & (t < end_ns)
    tt = np.concatenate([[start_ns], t[inside], [end_ns]])
    ww = np.concatenate([[np.interp(start_ns, t, w)], w[inside], [np.interp(end_ns, t, w)]])
    return tt, ww


def mean_power_w(series: Unwrapped, start_ns: int, end_ns: int) -> Optional[float]:
    """Average power over a window from a cumulative series; None if not covered."""
    e = window_energy(series, start_ns, end_ns)
    return None if e is None else e / ((end_ns - start_ns) / 1e9)


def median_interval_s(t_ns: Sequence[int]) -> Optional[float]:
    """Median spacing of sample times (s): the achieved sampling period."""
    t = np.asarray(t_ns, dtype=np.int64)
    if len(t) < 2:
        return None
    return float(np.median(np.diff(np.sort(t)))) / 1e9
