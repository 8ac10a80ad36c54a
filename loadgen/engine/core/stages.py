"""The concurrency-stage driver: which users each stage needs, and when (both runtimes).

    meta schedule.stages [{"concurrency", "start_s", "duration_s"}] (scenario/schedule.py)
    users_by_worker [u_0 .. u_{n-1}]: the users each sender holds (one process: [max
        concurrency]; Locust workers report theirs at warm-up's end: Locust spreads the
        users itself, not always evenly)
        ─► global user g (0 .. Σu − 1) = round r, worker w, in order r = 0, 1, ...; w = 0 .. n-1,
           skipping a worker with no r-th user: interleaved, so every stage's users are spread
           over the workers as evenly as their user counts allow
        ─► stage of concurrency c: worker w runs its local users 0 .. active(c, w) − 1, where
           active(c, w) = how many of the globals 0 .. c − 1 are w's; the workers together run
           exactly min(c, Σu) users
    StageGate.when(k, t): local user k at time t: now if a stage running at t needs it, else
        the start of the next stage that does, else None (no stage from t on does).

Pure (no asyncio, no gevent): the native closed loop (pacing.Staged via Dispatcher.measure, in each
--procs child) and the Locust worker (engine/locust/request_source.py) ask it before each
request of a staged closed loop, and only wait and send.
"""
from __future__ import annotations

from typing import Optional, Sequence

NS = 1_000_000_000


def active_users(c: int, index: int, users_by_worker: Sequence[int]) -> int:
    """How many of worker ``index``'s users are among the first ``c`` globals (see above)."""
    left, got, r = c, 0, 0
    top = max(users_by_worker) if users_by_worker else 0
    while left > 0 and r < top:
        for w, u in enumerate(users_by_worker):
            if r < u:
                if left <= 0:
                    break
                left -= 1
                if w == index:
                    got += 1
        r += 1
    return got


def even_split(users: int, n: int) -> list[int]:
    """users over n workers, the first ones one more (when no counts were reported)."""
    return [len(range(w, users, n)) for w in range(n)]


class StageGate:
    """One worker's view of a staged closed loop started at ``t0_ns``."""

    def __init__(self, stages: list[dict], t0_ns: int, index: int,
                 users_by_worker: Sequence[int]):
        self.bounds = [(t0_ns + int(s["start_s"] * NS),
                        t0_ns + int((s["start_s"] + s["duration_s"]) * NS),
                        active_users(int(s["concurrency"]), index, users_by_worker))
                       for s in stages]
        self.end_ns = self.bounds[-1][1]

    @property
    def local_counts(self) -> list[int]:
        """This worker's running users per stage."""
        return [n for _, _, n in self.bounds]

    def when(self, k: int, t: int) -> Optional[int]:
        """Now (``t``) if local user ``k`` is needed at ``t``, else the start of the next stage
        that needs it; None when no stage from ``t`` on does."""
        for lo, hi, n in self.bounds:
            if t < hi and k < n:
                return max(t, lo)
        return None
