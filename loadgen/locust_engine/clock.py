"""Clocks and timing on the gevent side: one clock across hosts, paced sleeps, hub lag.

Latencies (TTFT, ITL, E2E) are differences of one worker's own stamps: never shifted, never
touched by the cross-host offset. The offset only places a worker's records on the master's
timeline (t0, the report's time series, power and /metrics alignment):

    worker ── loadgen_ping {seq, t_ns} ──► master (Locust's own message channel, ZMQ)
    worker ◄── loadgen_pong {seq, t_ns, master_ns} ── master (answered at once: answer_pings)
        sample (t_send, master_ns, t_recv) on the worker, PING_TRIES of them (PING_GAP_S apart)
        ─► offset_estimate: the tightest round trip; offset = master_ns − midpoint (send, recv),
           uncertainty = half that round trip (the true offset lies in ± it, whatever the
           one-way delays are)
    clock_estimate: which shift is applied (meta.json ``locust.clock.workers[i]``)
      same host (same kernel boot id)  perf_counter_ns is CLOCK_MONOTONIC for every process:
                                       shift 0, uncertainty 0 (the ping-pong is kept as a check)
      other host, ping-pong answered   shift = the measured offset ± half the tightest round trip
      other host, no answer            shift = (master mono − master wall) − (own mono − own
                                       wall): as good as the two wall clocks (NTP); uncertainty
                                       unknown (None)
    sleep_until   nap, then yield-spin the last ms (the native dispatcher's rule)
    LagSampler    how late a 100 ms gevent sleep wakes (hub lag) and process CPU over a window
"""
from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Optional

import gevent

from loadgen.client.wire.kstamp import best_bracket
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


def same_host(master: dict) -> bool:
    """The master's clock pair came from this kernel (one CLOCK_MONOTONIC)."""
    return bool(master.get("boot_id")) and master["boot_id"] == boot_id()


def clock_shift(master: dict) -> int:
    """ns to add to this process's perf_counter_ns to land on the master's (0 on one host)."""
    if master.get("boot_id") and master["boot_id"] == boot_id():
        return 0
    mine = clock_pair()
    return (master["mono_ns"] - master["wall_ns"]) - (mine["mono_ns"] - mine["wall_ns"])


PING_TRIES = 16             # ping-pongs per worker at plan time
PING_GAP_S = 0.01           # between two of them
PING_WAIT_S = 1.0           # one unanswered this long: given up (the rest are still tried)


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


def clock_estimate(same_host: bool, samples: Iterable[tuple[int, int, int]],
                   wall_shift_ns: Optional[int]) -> dict:
    """The shift a worker applies to land on the master's clock, how it was found and its
    uncertainty (ns; None where unknown) — meta.json ``locust.clock.workers[i]``; see module doc."""
    est = offset_estimate(samples)
    if same_host:
        method, shift, unc = "same_host", 0, 0
    elif est is not None:
        method, shift, unc = "ping_pong", est["offset_ns"], est["uncertainty_ns"]
    else:
        method, shift, unc = "wall_clock", wall_shift_ns or 0, None
    return {"method": method, "shift_ns": shift, "uncertainty_ns": unc, "ping_pong": est}


def answer_pings(runner) -> None:
    """On the master: answer every worker's ``loadgen_ping`` at once with the master's clock."""
    def on(environment, msg, **kw):
        runner.send_message("loadgen_pong", dict(msg.data or {}, master_ns=now_ns()),
                            client_id=msg.node_id)
    runner.register_message("loadgen_ping", on)


class Pinger:
    """On a worker: ping-pongs over Locust's messages (``send(type, data)`` to the master)."""

    def __init__(self, runner, send: Callable[[str, dict], None]):
        self.send = send
        self.samples: list[tuple[int, int, int]] = []
        self._waiting: Optional[tuple[int, int, Any]] = None      # (seq, t_send, Event)
        runner.register_message("loadgen_pong", self._on_pong)

    def _on_pong(self, environment, msg, **kw) -> None:
        t = now_ns()
        w, d = self._waiting, msg.data or {}
        if w is not None and d.get("seq") == w[0] and d.get("t_ns") == w[1]:
            self.samples.append((w[1], int(d["master_ns"]), t))
            w[2].set()

    def measure(self, tries: int = PING_TRIES) -> list[tuple[int, int, int]]:
        from gevent.event import Event
        for k in range(tries):
            ev = Event()
            t = now_ns()
            self._waiting = (k, t, ev)
            self.send("loadgen_ping", {"seq": k, "t_ns": t})
            answered = ev.wait(PING_WAIT_S)
            self._waiting = None
            if not answered:              # a master that does not answer pings: wall clock
                break
            gevent.sleep(PING_GAP_S)
        return list(self.samples)


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
