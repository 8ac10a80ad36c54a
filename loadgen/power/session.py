"""PowerSession: one sampler thread per source, rows to power.jsonl, edge reads at marks.

Every timestamp (rows, marks, edges, a source's own change times) is on the session's ``clock``,
injected by the caller (the runner passes the records' clock; a test a clock it steps by hand);
only the samplers' pacing sleeps in real time. ``read_now`` waits, bounded, until every sampler
took a read that began after the call: a test steps its clock, then reads, instead of sleeping.

Never crashes the run: a source that fails to open is reported "unavailable" with its reason;
one that keeps failing while sampling (``MAX_FAILURES`` in a row) becomes "failed" and stops.
Memory is bounded: rows go straight to the file; threads are daemons joined with a timeout.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Callable

from loadgen.power.base import PowerSource, SourceUnavailable
from loadgen.scenario.model import Power

MAX_FAILURES = 10
JOIN_TIMEOUT_S = 5.0


class _Writer:
    def __init__(self, path: Path):
        self._f = open(path, "a", encoding="utf-8", buffering=1)
        self._lock = threading.Lock()
        self.rows = 0

    def write(self, rows: list[dict]) -> None:
        if not rows:
            return
        text = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in rows)
        with self._lock:
            if not self._f.closed:
                self._f.write(text)
                self.rows += len(rows)

    def close(self) -> None:
        with self._lock:
            self._f.close()


class PowerSession:
    """Samples every opened source until ``stop()``; see the package docstring for the rows."""

    def __init__(self, cfg: Power, run_dir: Path, sources: list[PowerSource],
                 unavailable: list[dict], clock: Callable[[], int]):
        self.cfg, self.clock = cfg, clock
        self.run_dir = Path(run_dir)
        self._out = _Writer(self.run_dir / "power.jsonl")
        self._sources = sources
        self._unavailable = unavailable
        self._stop = threading.Event()
        self._marks: dict[str, int] = {}
        self._edges: dict[str, dict[str, dict]] = {s.name: {} for s in sources}
        self._pending: dict[str, list[str]] = {s.name: [] for s in sources}
        self._wake = {s.name: threading.Event() for s in sources}
        self._done = {s.name: threading.Event() for s in sources}
        self._reads = {s.name: 0 for s in sources}
        self._asked = 0                                  # read_now generations requested ...
        self._served = {s.name: 0 for s in sources}      # ... and the last one each sampler began
        self._lock = threading.Lock()
        for s in sources:
            s.clock = clock
        self._t0 = clock()
        self._threads = [threading.Thread(target=self._loop, args=(s,), daemon=True,
                                          name=f"power-{s.name}") for s in sources]
        self.stopped = False
        for th in self._threads:
            th.start()

    # -- sampling -------------------------------------------------------------------------
    def _sample(self, src: PowerSource) -> None:
        gen = self._asked
        a = self.clock()
        readings = src.read()
        t = (a + self.clock()) // 2
        rows = []
        for r in readings:
            row = {"t_ns": t, "source": src.name, "device": r.device, "scope": r.scope,
                   "kind": r.kind, "value": r.value}
            if r.wrap_j is not None:
                row["wrap_j"] = r.wrap_j
            rows.append(row)
        self._out.write(rows)
        self._reads[src.name] += 1
        self._served[src.name] = gen
        with self._lock:
            pending, self._pending[src.name] = self._pending[src.name], []
        for name in pending:
            self._edges[src.name][name] = {"t_ns": t, "counters": {
                r.device: r.value for r in readings if r.kind == "energy_j"}}

    def _loop(self, src: PowerSource) -> None:
        failures = 0
        period = src.period_s
        nxt = time.monotonic()
        try:
            while True:
                try:
                    self._sample(src)
                    failures = 0
                except Exception as e:         # a failing source never takes the run down
                    failures += 1
                    src.warn(f"read failed: {type(e).__name__}: {e}")
                    if failures >= MAX_FAILURES:
                        src.status, src.reason = "failed", f"{MAX_FAILURES} reads in a row failed: {e}"
                        return
                if self._stop.is_set():
                    return                     # the final read after stop() has been taken
                nxt += period
                wait = nxt - time.monotonic()
                if wait < 0:
                    nxt, wait = time.monotonic(), 0.0
                if self._wake[src.name].wait(wait):
                    self._wake[src.name].clear()
        finally:
            self._done[src.name].set()

    # -- the runner's interface -----------------------------------------------------------
    def mark(self, name: str) -> int:
        """Write a mark row now and read every source right away (the window edges)."""
        t = self.clock()
        self._marks.setdefault(name, t)
        self._out.write([{"t_ns": t, "source": "session", "device": None, "scope": None,
                          "kind": "mark", "value": name}])
        with self._lock:
            for s in self._sources:
                self._pending[s.name].append(name)
        for ev in self._wake.values():
            ev.set()
        return t

    def read_now(self, timeout_s: float = 10.0) -> bool:
        """Wake every sampler and wait until each has finished a read begun after this call (or
        stopped: failed, or stop() ran). False if ``timeout_s`` passed first."""
        with self._lock:
            self._asked += 1
            gen = self._asked
        for ev in self._wake.values():
            ev.set()
        deadline = time.monotonic() + timeout_s
        while any(self._served[s.name] < gen and not self._done[s.name].is_set() for s in self._sources):
            if time.monotonic() > deadline:
                return False
            time.sleep(0.001)
        return True

    def idle_baseline(self) -> dict:
        """Sample for ``idle_baseline_s`` with nothing running, between idle_start/idle_end marks."""
        if self.cfg.idle_baseline_s <= 0 or not self._sources:
            return {"idle_s": 0.0}
        a = self.mark("idle_start")
        time.sleep(self.cfg.idle_baseline_s)
        b = self.mark("idle_end")
        return {"idle_s": (b - a) / 1e9, "idle_start_ns": a, "idle_end_ns": b}

    async def idle_baseline_async(self) -> dict:
        import asyncio
        return await asyncio.to_thread(self.idle_baseline)

    def stop(self) -> dict:
        """Final reads, join the threads, close the sources; return and save the descriptions."""
        if self.stopped:
            return self._result
        self.stopped = True
        linger = max((s.linger_s() for s in self._sources), default=0.0)
        if linger > 0 and "measure_end" in self._marks:
            left = (self._marks["measure_end"] + int(linger * 1e9) - self.clock()) / 1e9
            if left > 0:
                time.sleep(left)
        self._stop.set()
        for ev in self._wake.values():
            ev.set()
        for th in self._threads:
            th.join(JOIN_TIMEOUT_S)
        for s in self._sources:
            if not self._done[s.name].is_set():
                s.warn(f"sampler did not finish within {JOIN_TIMEOUT_S} s of stop()")
            try:
                s.close()
            except Exception as e:
                s.warn(f"close failed: {e}")
        self._out.close()
        elapsed = (self.clock() - self._t0) / 1e9
        descs = []
        for s in self._sources:
            d = s.describe()
            d["reads"] = self._reads[s.name]
            d["achieved_hz"] = self._reads[s.name] / elapsed if elapsed > 0 else None
            d["edges"] = self._edges[s.name]
            descs.append(d)
        self._result = {"sources": descs + self._unavailable, "marks": dict(self._marks),
                        "rows": self._out.rows, "clock": "time.perf_counter_ns",
                        "file": "power.jsonl"}
        (self.run_dir / "power_sources.json").write_text(json.dumps(self._result, indent=1))
        return self._result


def open_sources(cfg: Power, classes: dict) -> tuple[list[PowerSource], list[dict]]:
    """Open each configured source; those that cannot work here come back as descriptions."""
    opened, unavailable = [], []
    for name in dict.fromkeys(cfg.sources):
        if name == "none":
            continue
        src = classes[name](cfg)
        try:
            src.open()
            opened.append(src)
        except SourceUnavailable as e:
            src.status, src.reason = "unavailable", str(e)
        except Exception as e:                 # an unexpected library error: still not a crash
            src.status, src.reason = "unavailable", f"{type(e).__name__}: {e}"
        if src.status != "ok":
            try:
                src.close()
            except Exception:
                pass
            unavailable.append(src.describe())
    return opened, unavailable
