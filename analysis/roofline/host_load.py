"""Was the host quiet while it was calibrated? Load, steal and the spread between repeats.

    snapshot() before ─┐   (/proc/stat "cpu" jiffies, this process's CPU time, load average)
    snapshot() after  ─┴► between(a, b) ─► {loadavg_1m, ncpu, other_cpus, steal_fraction}
    + spread(repeat times) ─► assess(load, spreads) ─► {busy, reasons, label}

``other_cpus``: CPUs' worth of work done by *other* processes during the calibration = the host's
busy jiffies (user + system + irq, steal excluded) over the interval, as CPUs, minus this
process's own CPU time over the same interval, minus ``server_cpus`` when the snapshots carry
the managed server's CPU time (a run's target.server: its process tree, the system under test,
never counted as another process: "the managed server used 1.1 CPUs; other processes 0.0"). ``steal_fraction``: the hypervisor's steal share of
all jiffies. ``spread``: (p90 - p10) / median of one figure's repeat times (robust to one outlier).
A calibration is "busy" when others used more than a quarter of the CPUs, steal exceeded 5 %, or
a figure's spread exceeded 15 %; the 1-minute load average is recorded and shown but is not a
criterion alone (it still carries the just-stopped server's load). A reading that is unavailable
(no /proc) is None and decides nothing. The label is the evidence string:
``measured`` or ``measured (busy host: load 1.9, spread 22 %)``.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

import numpy as np

from analysis.contract.meta import HostLoad

OTHER_CPU_SHARE = 0.25      # others' work above this share of the host's CPUs: busy
STEAL_FRACTION = 0.05
SPREAD = 0.15


def read_proc_stat(path: str = "/proc/stat") -> Optional[tuple[int, int, int]]:
    """(total, idle + iowait, steal) jiffies of the aggregate "cpu" line, or None."""
    try:
        for line in Path(path).read_text().splitlines():
            if line.startswith("cpu "):
                v = [int(x) for x in line.split()[1:]]
                v += [0] * (8 - len(v))
                return sum(v[:8]), v[3] + v[4], v[7]   # guest is already inside user
    except (OSError, ValueError):
        pass
    return None


def _loadavg() -> Optional[tuple[float, float, float]]:
    try:
        return os.getloadavg()
    except (AttributeError, OSError):
        return None


def tree_cpu_s(pid: Optional[int]) -> Optional[float]:
    """CPU seconds (user + system) of process ``pid`` and its descendants now alive, plus the
    children it already reaped; None when there is no such process (or no psutil)."""
    if not pid:
        return None
    try:
        import psutil
        root = psutil.Process(pid)
        t = root.cpu_times()
        total = t.user + t.system + getattr(t, "children_user", 0.0) + \
            getattr(t, "children_system", 0.0)
        for c in root.children(recursive=True):
            try:
                ct = c.cpu_times()
                total += ct.user + ct.system
            except (psutil.NoSuchProcess, psutil.AccessDenied):
                pass
        return total
    except Exception:                # gone, no access, no psutil: the reading decides nothing
        return None


def snapshot(read_stat: Callable[[], Optional[tuple]] = read_proc_stat,
             loadavg: Callable[[], Optional[tuple]] = _loadavg,
             server_cpu: Optional[Callable[[], Optional[float]]] = None) -> dict:
    """One reading: wall time, /proc/stat jiffies, this process's CPU seconds, load average;
    with ``server_cpu`` (the managed server's tree_cpu_s) also the server's CPU seconds."""
    return {"t": time.monotonic(), "stat": read_stat(), "own_cpu_s": time.process_time(),
            "loadavg": loadavg(), "ncpu": os.cpu_count(),
            "server_cpu_s": server_cpu() if server_cpu is not None else None}


def between(a: dict, b: dict) -> dict:
    """The load over the interval from reading ``a`` to reading ``b`` (see the module docstring)."""
    ncpu = b.get("ncpu") or a.get("ncpu")
    la = b.get("loadavg")
    out = {"loadavg_1m": round(la[0], 2) if la else None, "ncpu": ncpu, "other_cpus": None,
           "steal_fraction": None, "seconds": round(b["t"] - a["t"], 2)}
    wall = b["t"] - a["t"]
    sa_s, sb_s = a.get("server_cpu_s"), b.get("server_cpu_s")
    server = None
    if sa_s is not None and sb_s is not None and wall > 0:   # the system under test
        server = max(0.0, (sb_s - sa_s) / wall)
        out["server_cpus"] = round(server, 2)
    sa, sb = a.get("stat"), b.get("stat")
    if sa and sb and ncpu and sb[0] > sa[0]:      # /proc/stat moved on: the host's share
        total, idle, steal = (y - x for x, y in zip(sa, sb))
        busy_cpus = (total - idle - steal) / total * ncpu
        own = (b["own_cpu_s"] - a["own_cpu_s"]) / wall if wall > 0 else 0.0
        out["other_cpus"] = round(max(0.0, busy_cpus - own - (server or 0.0)), 2)
        out["steal_fraction"] = round(steal / total, 4)
    return out


def spread(times: Sequence[float]) -> Optional[float]:
    """(p90 - p10) / median of the repeat times; None with fewer than 2."""
    if len(times) < 2:
        return None
    t = np.asarray(times, dtype=float)
    med = float(np.median(t))
    return float((np.percentile(t, 90) - np.percentile(t, 10)) / med) if med > 0 else None


def assess(load: dict | HostLoad, spreads: dict) -> dict:
    """{busy, reasons, label}: ``load`` (between()'s figures) read as contract/meta.py HostLoad;
    ``spreads`` maps a figure's name to its spread (or None)."""
    reasons = []
    load = HostLoad.read(load)
    ncpu, other = load.ncpu, load.other_cpus
    if other is not None and ncpu and other > OTHER_CPU_SHARE * ncpu:
        server = load.server_cpus
        reasons.append(f"other processes used {other:.1f} of {ncpu} CPUs" + (
            f" (the managed server's {server:.1f} CPUs not counted)" if server is not None else ""))
    steal = load.steal_fraction
    if steal is not None and steal > STEAL_FRACTION:
        reasons.append(f"steal {steal:.0%}")
    worst = max(((k, v) for k, v in spreads.items() if v is not None), key=lambda kv: kv[1],
                default=None)
    if worst is not None and worst[1] > SPREAD:
        reasons.append(f"{worst[0]} spread {worst[1]:.0%} between repeats")
    if not reasons:
        return {"busy": False, "reasons": [], "label": "measured"}
    parts = []
    if load.loadavg_1m is not None:
        parts.append(f"load {load.loadavg_1m:.1f}")
    if worst is not None:
        parts.append(f"spread {worst[1] * 100:.0f} %")
    if other is not None and any(r.startswith("other") for r in reasons):
        parts.append(f"others {other:.1f} CPUs")
    if steal is not None and steal > STEAL_FRACTION:
        parts.append(f"steal {steal * 100:.0f} %")
    return {"busy": True, "reasons": reasons,
            "label": f"measured (busy host: {', '.join(parts)})"}


def over_run(start: dict, server_cpu: Optional[Callable[[], Optional[float]]] = None) -> dict:
    """The host's load from ``start`` (a snapshot() taken when the measured phase began) to now:
    between()'s figures with assess()'s ``busy`` and ``reasons`` (no repeat spreads: a run has
    none). meta.json ``host_load``; analysis.metrics.saturation tells a busy host from a
    saturated client with it. ``server_cpu`` (the reader ``start`` was taken with): the managed
    server's CPU, ``server_cpus``, apart from ``other_cpus``."""
    load = between(start, snapshot(server_cpu=server_cpu))
    judged = assess(load, {})
    return {**load, "busy": judged["busy"], "reasons": judged["reasons"]}
