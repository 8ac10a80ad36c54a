"""Clocks and timing on the gevent side: one clock across hosts, paced sleeps, hub lag.

    same host (same kernel boot id)  perf_counter_ns is CLOCK_MONOTONIC for every process: shift 0
    other host                       shift = (master mono - master wall) - (own mono - own wall),
                                     so the accuracy is that of the two wall clocks (NTP)
    sleep_until   nap, then yield-spin the last ms (the native dispatcher's rule)
    LagSampler    how late a 100 ms gevent sleep wakes (hub lag) and process CPU over a window
"""
from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Callable, Optional

import gevent

from loadgen.record import Record, now_ns

SPIN_NS = 1_000_000          # yield-spin the last 1 ms before a scheduled send
TIME_FIELDS = ("scheduled_at_ns", "sent_at_ns", "first_chunk_at_ns", "first_token_at_ns",
               "end_at_ns")


def boot_id() -> Optional[str]:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def clock_pair() -> dict:
    return {"boot_id": boot_id(), "mono_ns": now_ns(), "wall_ns": time.time_ns(),
            "host": socket.gethostname()}


def clock_shift(master: dict) -> int:
    """ns to add to this process's perf_counter_ns to land on the master's (0 on one host)."""
    if master.get("boot_id") and master["boot_id"] == boot_id():
        return 0
    mine = clock_pair()
    return (master["mono_ns"] - master["wall_ns"]) - (mine["mono_ns"] - mine["wall_ns"])


def rebase(rec: Record, shift: int) -> Record:
    if shift:
        for f in TIME_FIELDS:
            v = getattr(rec, f)
            if v is not None:
                setattr(rec, f, v + shift)
        rec.chunks = [[t + shift, n] for t, n in rec.chunks]
    return rec


def sleep_until(deadline_ns: int, stopped: Callable[[], bool]) -> bool:
    """Nap, then yield-spin the last SPIN_NS; True if ``stopped()`` became true first."""
    while True:
        if stopped():
            return True
        rem = deadline_ns - now_ns()
        if rem <= 0:
            return False
        gevent.sleep(min((rem - SPIN_NS) / 1e9, 0.05) if rem > SPIN_NS else 0)


class LagSampler:
    """gevent hub lag (how late a 100 ms sleep wakes up) and process CPU over a window."""

    def __init__(self, interval_s: float = 0.1):
        self.interval_s, self.lags, self.g = interval_s, [], None
        self.cpu0 = self.wall0 = 0.0

    def start(self) -> None:
        self.cpu0, self.wall0 = time.process_time(), time.perf_counter()
        self.g = gevent.spawn(self._loop)

    def _loop(self) -> None:
        while True:
            t = time.perf_counter()
            gevent.sleep(self.interval_s)
            self.lags.append((time.perf_counter() - t - self.interval_s) * 1e3)

    def stop(self) -> dict:
        if self.g is None:
            return {}
        self.g.kill(block=False)
        wall = time.perf_counter() - self.wall0
        cpu = time.process_time() - self.cpu0
        lags = sorted(self.lags)
        p99 = lags[min(len(lags) - 1, round(0.99 * (len(lags) - 1)))] if lags else None
        return {"cpu_s": cpu, "wall_s": wall, "cpu_util": cpu / wall if wall > 0 else None,
                "loop_lag_ms_p99": p99, "loop_lag_ms_max": lags[-1] if lags else None}
