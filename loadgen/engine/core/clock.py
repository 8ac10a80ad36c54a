"""One clock-offset record for every sender: its shift onto the run's clock and the bound on it.

Latencies (TTFT, ITL, E2E) are differences of one sender's own stamps: never shifted. The
shift only places a sender's records on the run's timeline (t0, time series, power and
/metrics alignment):

    same host (same kernel boot id   perf_counter_ns is one CLOCK_MONOTONIC for both processes:
    AND same time namespace, and     shift 0, uncertainty 0 (every --procs child; a Locust
    the ping-pong, where it ran,     worker on the master's host). Checked, never assumed: a
    agrees: |offset| <= rtt/2)       time namespace keeps the boot id and moves CLOCK_MONOTONIC
                                     (``checked`` lists what was compared)
    other host, ping-pong answered   (local send, remote stamp, local receive) samples ─►
                                     the tightest round trip: shift = remote − its midpoint,
                                     uncertainty = half that round trip
    other host, no answer            the two wall clocks' difference (as good as NTP):
                                     uncertainty unknown (None), ``placed`` False with why
    nothing to place it by           method "unplaced", shift 0, ``placed`` False with why

    clock_estimate(...) ─► {"method", "shift_ns", "uncertainty_ns", "ping_pong", "offset_ns"
                           (= shift_ns), "placed", "checked", "why"}
    estimate_from(master_pair, samples)   the same against a master's clock_pair()
        meta.json ``locust.clock.workers[i]`` and ``client_processes[k].clock``
    rebase(rec, shift)  a record's times moved onto the run's clock
    nap_s(deadline, now)  how long a sender naps before a scheduled send (both runtimes' rule)
Pure: the Locust engine exchanges the pings (engine/locust/clock.py), nothing here waits.
"""
from __future__ import annotations

import os
import socket
import time
from pathlib import Path
from typing import Iterable, Optional

from loadgen.client.kernel_stamps import best_bracket
from loadgen.record import Record, now_ns

SPIN_NS = 1_000_000         # yield-spin the last 1 ms before a scheduled send instead of napping
MAX_NAP_S = 0.05            # nap granularity, so a stop request is noticed quickly


def nap_s(deadline_ns: int, now: int) -> Optional[float]:
    """The sleep before a send due at ``deadline_ns``: a nap up to SPIN_NS before it, then 0
    (yield, spin) for the last SPIN_NS; None once it is due."""
    rem = deadline_ns - now
    if rem <= 0:
        return None
    return min((rem - SPIN_NS) / 1e9, MAX_NAP_S) if rem > SPIN_NS else 0

TIME_FIELDS = ("scheduled_at_ns", "sent_at_ns", "first_chunk_at_ns", "first_token_at_ns",
               "end_at_ns")


def boot_id() -> Optional[str]:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def ns_id(kind: str) -> Optional[str]:
    """This process's ``kind`` namespace ("time", "net"), e.g. "time:[4026531834]"; None where
    the kernel has none (a namespace id is unique on one booted kernel)."""
    try:
        return os.readlink(f"/proc/self/ns/{kind}")
    except OSError:
        return None


def clock_pair() -> dict:
    return {"boot_id": boot_id(), "mono_ns": now_ns(), "wall_ns": time.time_ns(),
            "host": socket.gethostname(), "time_ns": ns_id("time"), "net_ns": ns_id("net")}


def same_host(master: dict) -> bool:
    """The master's clock pair came from this kernel and its time namespace (one
    CLOCK_MONOTONIC): the boot id alone is not enough (a time namespace keeps it)."""
    return (bool(master.get("boot_id")) and master["boot_id"] == boot_id()
            and master.get("time_ns") == ns_id("time"))


def same_network(master: dict) -> bool:
    """The master's clock pair came from this kernel's network namespace (one loopback)."""
    return same_host(master) and master.get("net_ns") == ns_id("net")


def clock_shift(master: dict) -> int:
    """ns to add to this process's perf_counter_ns to land on the master's (0 on one host)."""
    if same_host(master):
        return 0
    mine = clock_pair()
    return (master["mono_ns"] - master["wall_ns"]) - (mine["mono_ns"] - mine["wall_ns"])


def offset_estimate(samples: Iterable[tuple[int, int, int]]) -> Optional[dict]:
    """``(local_send_ns, remote_ns, local_recv_ns)`` ping-pong samples ─► the remote − local
    clock offset at the tightest round trip's midpoint, ± half that round trip; None if none."""
    samples = list(samples)
    try:
        offset, rtt = best_bracket(samples)
    except ValueError:
        return None
    return {"offset_ns": offset, "uncertainty_ns": (rtt + 1) // 2, "rtt_min_ns": rtt,
            "tries": len(samples)}


def clock_estimate(same_host: bool, samples: Iterable[tuple[int, int, int]] = (),
                   wall_shift_ns: Optional[int] = None, checked: tuple = ()) -> dict:
    """The shift a sender applies to land on the run's clock, how it was found and its
    uncertainty (ns; None where unknown): see the module's table."""
    est = offset_estimate(samples)
    why = None
    if same_host:
        method, shift, unc = "same_host", 0, 0
    elif est is not None:
        method, shift, unc = "ping_pong", est["offset_ns"], est["uncertainty_ns"]
    elif wall_shift_ns is not None:
        method, shift, unc = "wall_clock", wall_shift_ns, None
        why = ("no ping-pong answered: shifted by the two wall clocks' difference, as good as "
               "their NTP sync (uncertainty unknown)")
    else:
        method, shift, unc = "unplaced", 0, None
        why = "no ping-pong answered and no wall clock pair: not placed on the run's clock"
    return {"method": method, "shift_ns": shift, "uncertainty_ns": unc, "ping_pong": est,
            "offset_ns": shift, "placed": why is None, "checked": list(checked), "why": why}


CONSISTENT_NS = 1_000        # a same-clock ping-pong's |offset| may exceed rtt/2 by rounding


def estimate_from(master: dict, samples: Iterable[tuple[int, int, int]] = ()) -> dict:
    """``clock_estimate`` against the master's clock pair (``clock_pair``) and ping samples.
    "same_host" only when checked: same boot id, same time namespace, and the ping-pong (where
    it was answered) measured an offset within its own bound of 0."""
    samples = list(samples)
    same, checked = same_host(master), []
    if same:
        checked = ["boot_id", "time_namespace"]
        est = offset_estimate(samples)
        if est is not None:
            if abs(est["offset_ns"]) > est["uncertainty_ns"] + CONSISTENT_NS:
                same, checked = False, []         # one kernel, yet another clock: measured
            else:
                checked.append("ping_pong")
    return clock_estimate(same, samples, clock_shift(master), tuple(checked))


def clock_info(per: dict) -> dict:
    """The run's clock block: each sender's estimate (``per``: name ─► clock_estimate) and the
    largest uncertainty (None when one is unknown)."""
    unc = [v.get("uncertainty_ns") for v in per.values()]
    return {"applies_to": "cross-host timeline only (latencies are each worker's own clock)",
            "workers": per,
            "max_uncertainty_ns": (None if not unc or None in unc else max(unc)),
            "unplaced": sorted(k for k, v in per.items() if v.get("placed") is False)}


def rebase(rec: Record, shift: int) -> Record:
    if shift:
        for f in TIME_FIELDS:
            v = getattr(rec, f)
            if v is not None:
                setattr(rec, f, v + shift)
        rec.chunks = [[t + shift, n] for t, n in rec.chunks]
    return rec


def same_processes(ready: dict) -> bool:
    """A worker's pid means a process here: same hostname, kernel boot and pid namespace (two
    machines may share a hostname; a container has its own pids)."""
    return (ready.get("host") == socket.gethostname() and ready.get("boot_id") == boot_id()
            and ready.get("pid_ns") == ns_id("pid"))
