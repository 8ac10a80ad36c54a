"""How many sender processes, and which requests each one sends. Pure (no I/O but the CPU count).

    client.processes (N | auto) + the CPUs loadgen may use ─► processes_for() ─► n (1: no procs)
    planned requests (offline, server, trace: every id and send time fixed before t0)
        ─► share(items, k, n) = items[k::n]        round-robin by position: each process gets an
                                                   even share of the arrival times (a thinned
                                                   Poisson schedule is Poisson at rate/n)
        ─► owner(id, warmup, n)                    the sender of request ``id``: its position
                                                   in its phase (warm-up, measured) mod n
    Both engines split by these rules through plan.py (each --procs child and each Locust
    worker rebuilds its slice; merging and dead-sender accounting ask ``owner``).
    for_run(run): the same from a runner.Run (its scenario, schedule and plan)
    closed loop (mode concurrency): users, num_requests and each stage's users split n ways
        ─► split(total, k, n)                      the k-th of n near-equal parts (sum = total)
        ─► closed_ids(first, k, n)                 ids first+k, first+k+n, ... in issue order
        ─► stage_share(stages, k, n)               each stage's concurrency split
"""
from __future__ import annotations

import itertools
import os
from typing import Callable, Iterator, Optional, Sequence


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity: target.server.cpus' rest), else cpu_count."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def planned_count(closed_loop: bool, schedule_count: Optional[int], num_requests: Optional[int],
                  duration_s: Optional[float]) -> Optional[int]:
    """Measured requests known before t0 (None: a closed loop bounded by duration only);
    ``closed_loop``: the scenario's ``load.closed_loop``."""
    if schedule_count is not None:
        return schedule_count
    if closed_loop and duration_s:
        return num_requests if num_requests is not None else None
    return num_requests


def processes_for(setting, cap: Optional[int], count: Optional[int], sessions: bool,
                  cpus: Optional[int] = None, warn: Optional[Callable[[str], None]] = None) -> int:
    """The sender processes to start: ``setting`` (an int, or "auto" = cpus − 1, at least 1),
    at most the in-flight cap (each process needs a user) and the planned count (each needs a
    request). Sessions run in one process. 1 means the one-process client, no extra process."""
    if setting == "auto":
        n = max(1, (cpus if cpus is not None else usable_cpus()) - 1)
    else:
        n = int(setting)
    if sessions:
        return 1
    want = n
    if cap is not None:
        n = min(n, cap)
    if count is not None:
        n = min(n, max(1, count))
    if n < want and setting != "auto" and warn is not None:
        why = (f"{count} planned requests" if count is not None and count < want
               else f"an in-flight cap of {cap}")
        warn(f"client.processes: {want} asked, {n} started ({why})")
    return max(1, n)


def share(items: Sequence, k: int, n: int) -> list:
    """Process ``k``'s items of ``n``: positions k, k+n, k+2n, ... (order kept)."""
    if not 0 <= k < n:
        raise ValueError(f"process {k} outside 0..{n - 1}")
    return list(items[k::n])


def owner(rid: int, warmup: int, n: int) -> int:
    """The sender whose slice holds request ``rid`` (``share``'s rule on ids: warm-up ids
    0..W-1 by id, measured ids by their position after the warm-up)."""
    return (rid if rid < warmup else rid - warmup) % n


def split(total: Optional[int], k: int, n: int) -> Optional[int]:
    """The k-th of ``n`` near-equal whole parts of ``total`` (the first ``total % n`` get one
    more); None stays None (no bound)."""
    if total is None:
        return None
    return total // n + (1 if k < total % n else 0)


def closed_ids(first: int, k: int, n: int) -> Iterator[int]:
    """Ids process ``k`` gives its closed-loop requests, in issue order: first+k, first+k+n, ...
    (the j-th request of process k is id first + k + j·n, so the ids of every process together
    are first, first+1, ... without a gap while each one runs its even share)."""
    return itertools.count(first + k, n)


def owed_closed(first: int, k: int, n: int, issued: int) -> list[int]:
    """The ids process ``k`` started in a closed loop that issued ``issued`` requests."""
    return [first + k + j * n for j in range(issued)]


def stage_share(stages: list[dict], k: int, n: int) -> list[dict]:
    """Each stage with its concurrency split (a process may have 0 users in a small stage)."""
    return [dict(s, concurrency=split(int(s["concurrency"]), k, n)) for s in stages]


def for_run(run, warn: Optional[Callable[[str], None]] = None) -> int:
    """Sender processes for ``run`` (client.processes resolved; 1: the one-process client)."""
    sc, ld = run.sc, run.sc.load
    if sc.client.processes == 1:
        return 1
    count = planned_count(ld.closed_loop, run.schedule.count, ld.num_requests, ld.duration_s)
    return processes_for(sc.client.processes, ld.in_flight_cap, count,   # one process: sessions
                         run.plan.sessions is not None or ld.probe is not None, warn=warn)  # probe
