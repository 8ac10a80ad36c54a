"""Arrival schedules: when each measured request should be sent, as ns offsets from t0.

Pure functions of (arrival process, rate, count/duration, seeded ``numpy.random.Generator``):
the same seed gives the same schedule, so a run can be repeated exactly.

    server       poisson   exponential gaps, mean 1/rate (MLPerf LoadGen's Server scenario)
                 constant  gaps of exactly 1/rate
                 gamma     gamma gaps, shape = burstiness, scale = 1/(rate*burstiness): mean 1/rate,
                           coefficient of variation 1/sqrt(burstiness) (< 1 burstier, 1 = poisson)
    server + stages  one such segment per stage ({rate, duration_s}), back to back: stage k starts
                 where stage k-1 ends; its arrivals are drawn at its own rate from its start
    trace        the trace file's timestamps (loadgen.scenario.trace), times load.time_scale
    offline      every request at t0 (MLPerf Offline)
    concurrency  no schedule: a closed loop sends when a virtual user becomes free; with stages,
                 stage k has its own number of users ({"concurrency", "duration_s"}, back to back)

The first request is at offset 0; request i is at the sum of the first i gaps.
The seed of a scenario's schedule is ``seed_for(scenario)`` (load.seed, else workload.seed + 1).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

NS = 1_000_000_000


def gaps_s(rng: np.random.Generator, arrival: str, rate: float, n: int,
           burstiness: float = 1.0) -> np.ndarray:
    """``n`` inter-arrival gaps in seconds. shape: (n,) float64."""
    if rate <= 0:
        raise ValueError("rate must be > 0")
    if arrival == "poisson":
        return rng.exponential(1.0 / rate, size=n)
    if arrival == "constant":
        return np.full(n, 1.0 / rate)
    if arrival == "gamma":
        if burstiness <= 0:
            raise ValueError("burstiness must be > 0")
        return rng.gamma(shape=burstiness, scale=1.0 / (rate * burstiness), size=n)
    raise ValueError(f"unknown arrival process {arrival!r}")


def server_offsets_ns(rng: np.random.Generator, arrival: str, rate: float,
                      n: Optional[int] = None, duration_s: Optional[float] = None,
                      burstiness: float = 1.0) -> np.ndarray:
    """Send offsets (int64 ns from t0, non-decreasing) for an open-loop server run.

    Bounded by ``n`` requests and/or ``duration_s`` (offsets strictly below the duration);
    at least one bound is required. shape: (count,) int64.
    """
    if n is None and duration_s is None:
        raise ValueError("give n and/or duration_s")
    if n is not None:
        if n <= 0:
            return np.zeros(0, dtype=np.int64)
        g = gaps_s(rng, arrival, rate, n, burstiness)
        offsets = np.concatenate(([0.0], np.cumsum(g[:-1])))
    else:
        # draw in blocks until the schedule passes the duration
        parts, last = [], 0.0
        block = max(16, int(rate * duration_s * 1.2) + 16)
        while last < duration_s:
            g = gaps_s(rng, arrival, rate, block, burstiness)
            c = last + np.cumsum(g)
            parts.append(c)
            last = float(c[-1])
        offsets = np.concatenate(([0.0], *parts))
    if duration_s is not None:
        offsets = offsets[offsets < duration_s]
    if arrival == "constant":
        # exact integer multiples, free of float accumulation
        idx = np.arange(len(offsets), dtype=np.int64)
        return np.round(idx * (NS / rate)).astype(np.int64)
    return np.round(offsets * NS).astype(np.int64)


def staged_offsets_ns(rng: np.random.Generator, arrival: str, stages: list[tuple[float, float]],
                      n: Optional[int] = None, burstiness: float = 1.0
                      ) -> tuple[np.ndarray, list[dict]]:
    """Offsets for back-to-back stages of (rate, duration_s), cut to the first ``n`` requests.
    Returns (offsets int64 ns, [{"index", "rate", "start_s", "duration_s"}])."""
    parts, table, start = [], [], 0.0
    for i, (rate, dur) in enumerate(stages):
        off = server_offsets_ns(rng, arrival, rate, None, dur, burstiness)
        parts.append(off + int(round(start * NS)))
        table.append({"index": i, "rate": rate, "start_s": start, "duration_s": dur})
        start += dur
    offsets = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    if n is not None:
        offsets = offsets[:n]
    return offsets.astype(np.int64), table


def offline_offsets_ns(n: int) -> np.ndarray:
    """Every request at t0. shape: (n,) int64 zeros."""
    return np.zeros(max(0, n), dtype=np.int64)


def scheduled_rate(offsets_ns: np.ndarray) -> Optional[float]:
    """Requests/s the schedule itself implies: (n - 1) / span. None for < 2 requests or zero span."""
    if len(offsets_ns) < 2:
        return None
    span = int(offsets_ns[-1]) - int(offsets_ns[0])
    if span <= 0:
        return None
    return (len(offsets_ns) - 1) * NS / span


def gap_cv(offsets_ns: np.ndarray) -> Optional[float]:
    """Coefficient of variation of the gaps (1 for Poisson, 0 for constant); None if < 3 requests."""
    if len(offsets_ns) < 3:
        return None
    g = np.diff(offsets_ns.astype(np.float64))
    m = g.mean()
    return float(g.std() / m) if m > 0 else None


@dataclass
class Schedule:
    """What the runner needs: the mode and, for open/offline modes, the send offsets."""

    mode: str                               # "server" | "trace" | "offline" | "concurrency"
    offsets_ns: Optional[np.ndarray]        # None for the closed loop
    target_rate: Optional[float] = None
    arrival: Optional[str] = None
    burstiness: Optional[float] = None
    stages: Optional[list[dict]] = None     # server stages: {"index", "rate", "start_s", "duration_s"}
    time_scale: Optional[float] = None      # trace

    @property
    def count(self) -> Optional[int]:
        return None if self.offsets_ns is None else len(self.offsets_ns)

    def describe(self) -> dict:
        out = {"mode": self.mode, "target_rate": self.target_rate, "arrival": self.arrival,
               "burstiness": self.burstiness, "scheduled_count": self.count,
               "scheduled_rate": None, "gap_cv": None, "scheduled_span_s": None,
               "stages": self.stages, "time_scale": self.time_scale}
        if self.offsets_ns is not None and self.mode in ("server", "trace"):
            out["scheduled_rate"] = scheduled_rate(self.offsets_ns)
            out["gap_cv"] = gap_cv(self.offsets_ns)
            if len(self.offsets_ns):
                out["scheduled_span_s"] = int(self.offsets_ns[-1]) / NS
        return out


def seed_for(sc) -> int:
    """The arrival-schedule seed of a ``scenario.Scenario``: load.seed, else workload.seed + 1.
    The one rule for every engine (native runner, Locust plan) and for meta.json."""
    seed = getattr(sc.load, "seed", None)
    return seed if seed is not None else sc.workload.seed + 1


def schedule_of(load, seed: int, workload) -> Schedule:
    """``build_schedule`` with a trace's times taken from ``workload`` (a WorkloadPlan) in mode
    trace: the one place a schedule is built for a run (outcome.prepare, engine/core/plan.Plan)."""
    return build_schedule(load, seed, workload.trace_offsets(load) if load.traced else None)


def build_schedule(load, seed: int, trace_offsets: Optional[np.ndarray] = None) -> Schedule:
    """Schedule for a ``scenario.Load``; ``seed`` makes it reproducible. Trace mode takes the
    trace's offsets (``loadgen.scenario.trace.trace_offsets_ns``, already scaled and bounded)."""
    rng = np.random.default_rng(seed)
    if load.mode == "trace":
        if trace_offsets is None:
            raise ValueError("mode trace needs the trace's offsets")
        return Schedule("trace", np.asarray(trace_offsets, dtype=np.int64),
                        time_scale=load.time_scale)
    if load.mode == "server" and getattr(load, "stages", None):
        off, table = staged_offsets_ns(rng, load.arrival,
                                       [(s.rate, s.duration_s) for s in load.stages],
                                       load.num_requests, load.burstiness)
        return Schedule("server", off, None, load.arrival,
                        load.burstiness if load.arrival == "gamma" else None, stages=table)
    if load.mode == "server":
        off = server_offsets_ns(rng, load.arrival, load.rate, load.num_requests,
                                load.duration_s, load.burstiness)
        return Schedule("server", off, load.rate, load.arrival,
                        load.burstiness if load.arrival == "gamma" else None)
    if load.mode == "offline":
        return Schedule("offline", offline_offsets_ns(load.num_requests or 0))
    return Schedule("concurrency", None, stages=concurrency_stages(load.stages))


def concurrency_stages(stages) -> Optional[list[dict]]:
    """Back-to-back closed-loop stages: {"index", "concurrency", "start_s", "duration_s"}."""
    if not stages:
        return None
    out, start = [], 0.0
    for i, s in enumerate(stages):
        out.append({"index": i, "concurrency": s.concurrency, "start_s": start,
                    "duration_s": s.duration_s})
        start += s.duration_s
    return out
