"""Is the client itself the bottleneck? CPU use of this process and event-loop lag over a run.

    ClientLoad.start() ─► every interval_s: process CPU delta (time.process_time, all threads)
                                         + how late the sampler's own wake-up was (loop lag)
    ClientLoad.stop()  ─► dict for meta.json (``client_load``; ``client_cpu`` = its cpu_util)

Figures only: whether they mean the client changed what it measured (a loop near one full
core; a late loop where stamps are user-space, not with the wire transport's kernel stamps) is
judged after the run by analysis.metrics.saturation, which also sees the schedule lag and the
coalesced reads. Costs one timer per interval (default 100 ms), nothing per request.

``LoadWindow`` (no loop, no asyncio) is what every sender's monitor shares: the window's CPU
and wall time and its lag samples; ClientLoad samples it on asyncio, the Locust workers'
engine.locust.clock.LagSampler on the gevent hub.

``gc_hold()``/``gc_release()`` (called by ``Client``) keep the cyclic GC out of the hot path.
"""
from __future__ import annotations

import time
from typing import Optional

from loadgen.client.gc_hold import GC_GEN0, hold_gc, release_gc  # noqa: F401 (GC_GEN0 re-exported)


def pct(sorted_vals: list, q: float) -> Optional[float]:
    if not sorted_vals:
        return None
    i = min(len(sorted_vals) - 1, max(0, round(q / 100 * (len(sorted_vals) - 1))))
    return sorted_vals[i]


class LoadWindow:
    """Process CPU and wall time since ``start_window()``, and the loop lags (ms) a runtime's
    sampler appends to ``_lags_ms`` meanwhile (one timer per interval_s, nothing per request)."""

    def __init__(self, interval_s: float = 0.1):
        self.interval_s = interval_s
        self._cpu0 = self._wall0 = 0.0
        self._lags_ms: list[float] = []

    def start_window(self) -> None:
        self._cpu0, self._wall0 = time.process_time(), time.perf_counter()

    def window(self) -> tuple[float, float, Optional[float], list]:
        """(cpu_s, wall_s, cpu_util, the lags sorted) from the start until now, unrounded."""
        cpu_s = time.process_time() - self._cpu0
        wall_s = time.perf_counter() - self._wall0
        return cpu_s, wall_s, cpu_s / wall_s if wall_s > 0 else None, sorted(self._lags_ms)


class ClientLoad(LoadWindow):
    """``load = ClientLoad(); load.start()`` inside the running loop; ``load.stop()`` -> dict."""

    def __init__(self, interval_s: float = 0.1):
        super().__init__(interval_s)
        self._task = None                   # the asyncio.Task sampling
        self._utils: list[float] = []
        self.result: Optional[dict] = None

    def start(self) -> "ClientLoad":
        import asyncio                      # here: the gevent side imports this module too
        self.start_window()
        self._task = asyncio.get_running_loop().create_task(self._sample())
        return self

    async def _sample(self) -> None:
        import asyncio
        cpu_prev, wall_prev = self._cpu0, self._wall0
        while True:
            due = time.perf_counter() + self.interval_s
            await asyncio.sleep(self.interval_s)
            wall = time.perf_counter()
            cpu = time.process_time()
            self._lags_ms.append(max(0.0, (wall - due) * 1e3))
            if wall > wall_prev:
                self._utils.append((cpu - cpu_prev) / (wall - wall_prev))
            cpu_prev, wall_prev = cpu, wall

    def stop(self) -> dict:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        cpu_s, wall_s, util, lags = self.window()
        utils = sorted(self._utils)
        self.result = {
            "cpu_s": round(cpu_s, 3), "wall_s": round(wall_s, 3),
            "cpu_util": None if util is None else round(util, 3),
            "cpu_util_p90_interval": pct(utils, 90),
            "loop_lag_ms_p50": pct(lags, 50), "loop_lag_ms_p99": pct(lags, 99),
            "loop_lag_ms_max": lags[-1] if lags else None,
            "samples": len(lags), "evidence": "measured",
        }
        return self.result


_gc_users = 0
_gc_saved: Optional[tuple] = None


def gc_hold() -> None:
    """While any Client is open, loadgen.client.gc_hold's rule (counted: the first holder holds,
    the last one releases)."""
    global _gc_users, _gc_saved
    if _gc_users == 0:
        _gc_saved = hold_gc()
    _gc_users += 1


def gc_release() -> None:
    global _gc_users
    _gc_users -= 1
    if _gc_users == 0 and _gc_saved is not None:
        release_gc(_gc_saved)
