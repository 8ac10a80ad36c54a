"""File descriptors before a run: the limit raised, the plan's need compared, one warning line.

    raise_limit()      RLIMIT_NOFILE soft ─► hard (a run may hold one socket per request in
                       flight; the soft default of 1,024 is far below what a kernel allows)
    need(sc, sched)    connections the plan may hold at once: the in-flight cap; else an open
                       loop's rate × api.timeout_s (bounded by its count); an offline run's count
    warning(...)       None, or ONE line: the plan needs more than the limit allows, requests
                       beyond it wait for a free descriptor, ``--procs N`` spreads them
    check(...)         all of it before a run (both engines' runner): raise, warn once (the live
                       bar's warning line, or stderr without one), the in-flight bound
    in_flight_bound()  the most requests a planned run keeps in flight without a cap: what the
                       descriptors allow, at most limits.MAX_CONCURRENCY (the dispatcher waits for
                       a free one beyond it: the lag shows in the records, never an EMFILE)
"""
from __future__ import annotations

import resource
import sys
from typing import Optional

from loadgen.scenario.limits import MAX_CONCURRENCY

RESERVE = 64        # descriptors kept for run files, the log, the event loop, /metrics, probes


def raise_limit() -> int:
    """Raise the soft RLIMIT_NOFILE to the hard one; return the soft limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
            soft = want
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def need(sc, schedule) -> int:
    """Connections the plan may hold at once (one per request in flight)."""
    ld = sc.load
    cap = ld.in_flight_cap
    count = schedule.count
    if cap is not None:
        return cap if count is None else min(cap, count)
    rates = [s["rate"] for s in (schedule.stages or [])] or [schedule.target_rate or 0.0]
    est = int(max(rates) * sc.api.timeout_s) + 1 if max(rates) else (count or 0)
    return min(est, count) if count is not None else est


def in_flight_bound(limit: int) -> int:
    return max(1, min(MAX_CONCURRENCY, limit - RESERVE))


def warning(sc, schedule, procs: int, limit: int) -> Optional[str]:
    """One line when the plan needs more descriptors than ``limit`` allows (per process)."""
    n = need(sc, schedule)
    per = -(-n // max(1, procs))
    if per + RESERVE <= limit:
        return None
    spread = -(-(n + RESERVE) // max(1, limit - RESERVE))
    return (f"the plan may hold up to {n:,} connections at once"
            f"{f' ({per:,} per process)' if procs > 1 else ''} but this process may open "
            f"{limit:,} files (RLIMIT_NOFILE, raised to its hard limit): requests beyond that "
            f"wait for a free descriptor (their lag shows in the records); --procs {spread} "
            "spreads them over that many processes, each with its own limit")


def check(sc, schedule, procs: int, progress) -> int:
    """RLIMIT_NOFILE raised to the hard limit; one warning line up front when the plan may need
    more descriptors than that (``progress.warn``, also on stderr when no live bar shows it).
    Returns the in-flight bound."""
    limit = raise_limit()
    text = warning(sc, schedule, procs, limit)
    if text is not None:
        progress.warn(text)
        if not progress.enabled:
            print(f"loadgen: warning: {text}", file=sys.stderr, flush=True)
    return in_flight_bound(limit)
