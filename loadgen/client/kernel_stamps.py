"""Kernel receive timestamps on the records' clock.

    socket with SO_TIMESTAMPNS ─► recvmsg(bufsize, ANCBUFSIZE) ─► SCM_TIMESTAMPNS cmsg
        (struct timespec: two int64, CLOCK_REALTIME, stamped when the packet reached the host's
        receive path: on loopback inside the sender's write) ─► realtime_ns(cmsg data)
        ─► ClockMap.to_mono: minus the REALTIME − MONOTONIC offset ─► perf_counter_ns clock

The offset is measured once (``measure``): many brackets ``perf_counter_ns(); time_ns();
perf_counter_ns()``, the tightest kept, the offset taken at its midpoint; its width bounds the
conversion error (a few hundred ns in CPython). CLOCK_REALTIME and CLOCK_MONOTONIC run at the same
rate on Linux (NTP frequency slewing moves both), so the offset only changes when the wall clock
is STEPPED (``settimeofday``, an NTP step, a leap second): ``ClockMap.check`` re-measures and says
by how much it moved; a converted stamp later than the user-space time of the same read is
impossible and is counted by the caller (``future_stamps``), the symptom of a step.

Segments that queue up before a read carry the LAST segment's stamp, and nothing can read the
older ones back: the kernel merges a segment into the tail of the receive queue
(``tcp_try_coalesce``) and the merged buffer takes the newer stamp, so even a read of exactly the
first segment's bytes returns the later time (tested here: "h"*200 at t, "w"*200 at t+50 ms, two
200-byte reads, both stamped t+50 ms). An event that shared a read with later ones may therefore
be stamped late by the gap; the only cure is reading promptly, and the caller counts such reads
(``coalesced_reads``).

Nothing here does network I/O; the pure parts (``best_bracket``, ``realtime_ns``,
``ClockMap.to_mono``) are tested on fixed numbers.

``Stamps`` is one pool's stamping, start to end: the host-wide switch, the clock map, the
re-measurements, and what the reads showed (kernel-stamped or not, how late the loop read them),
folded in per response and described for meta.json.

Why a placeholder socket: the kernel turns RX timestamping on for the whole host (a static key,
``net_enable_timestamp``) with a deferred work item, so the first packets after the first socket
asks may arrive unstamped. ``StampKeeper`` holds one UDP socket with the option set for as long as
a pool lives, so every connection it opens later finds stamping already on.
"""
from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from typing import Callable, Iterable, Optional

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35)      # Linux: SO_TIMESTAMPNS_OLD == 35
SCM_TIMESTAMPNS = getattr(socket, "SCM_TIMESTAMPNS", SO_TIMESTAMPNS)
SOL_SOCKET = socket.SOL_SOCKET
_TIMESPEC = struct.Struct("qq")                               # tv_sec, tv_nsec (64-bit Linux)
ANCBUFSIZE = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 64
METHOD = "bracket perf_counter_ns|time_ns|perf_counter_ns, tightest of {n}, midpoint"
FUTURE_SLACK_NS = 2_000_000   # a kernel stamp later than the read's user time by more: a clock step
_unpack_ts = struct.Struct("qq").unpack_from


def read_time(anc: list, offset_ns: Optional[int], tu: int, resp) -> int:
    """The stamp of one read: its kernel receive time (SCM_TIMESTAMPNS, REALTIME − ``offset_ns``)
    when the read carried one, else ``tu`` (user time). A kernel stamp is counted on ``resp``
    (``kernel_reads``, ``lag_sum_ns``, ``lag_max_ns``, ``future_stamps``). Shared by the wire
    connection and the Locust client's, so both stamp the same way."""
    if anc and offset_ns is not None:
        level, kind, cdata = anc[0]                   # the only cmsg asked for
        if kind == SCM_TIMESTAMPNS and level == SOL_SOCKET:
            sec, nsec = _unpack_ts(cdata)
            t = sec * 1_000_000_000 + nsec - offset_ns
            lag = tu - t
            if lag > resp.lag_max_ns:
                resp.lag_max_ns = lag
            elif lag < -FUTURE_SLACK_NS:
                resp.future_stamps += 1
            resp.lag_sum_ns += lag
            resp.kernel_reads += 1
            return t
    return tu
CLOCK_CHECK_EVERY = 512       # responses between two re-measurements of the REALTIME offset
CLOCK_STEP_NS = 500_000       # an offset that moved by more was stepped: adopted, counted


def enable_rx_timestamps(sock: socket.socket) -> bool:
    """Ask for SCM_TIMESTAMPNS on every read of ``sock``; False where the platform refuses."""
    try:
        sock.setsockopt(SOL_SOCKET, SO_TIMESTAMPNS, 1)
        return True
    except (OSError, AttributeError):
        return False


def realtime_ns(data: bytes) -> int:
    """A struct timespec (the cmsg payload) as integer ns."""
    sec, nsec = _TIMESPEC.unpack_from(data)
    return sec * 1_000_000_000 + nsec


def stamp_of(ancdata: list) -> Optional[int]:
    """The SCM_TIMESTAMPNS realtime stamp (ns) of one recvmsg's ancillary data, or None."""
    for level, kind, data in ancdata:
        if level == SOL_SOCKET and kind == SCM_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            return realtime_ns(data)
    return None


def best_bracket(samples: Iterable[tuple[int, int, int]]) -> tuple[int, int]:
    """``(offset_ns, width_ns)`` from ``(mono_before, realtime, mono_after)`` samples: the
    tightest bracket, the realtime read assumed at its midpoint; offset = REALTIME − MONOTONIC."""
    best: Optional[tuple[int, int, int]] = None
    for m0, rt, m1 in samples:
        if m1 < m0:
            continue
        if best is None or m1 - m0 < best[2] - best[0]:
            best = (m0, rt, m1)
    if best is None:
        raise ValueError("no usable (mono_before, realtime, mono_after) sample")
    m0, rt, m1 = best
    return rt - (m0 + m1) // 2, m1 - m0


@dataclass
class ClockMap:
    """REALTIME ns → perf_counter_ns: ``mono = realtime − offset_ns`` (± width_ns / 2)."""

    offset_ns: int
    width_ns: int
    samples: int
    measured_at_ns: int             # perf_counter_ns when measured
    method: str = ""

    def to_mono(self, realtime: int) -> int:
        return realtime - self.offset_ns

    def check(self, n: int = 32) -> int:
        """Re-measure; return how far the offset moved (ns, new − old). Does not change self."""
        return measure(n).offset_ns - self.offset_ns

    def describe(self) -> dict:
        return {"method": self.method, "offset_ns": self.offset_ns, "bracket_ns": self.width_ns,
                "samples": self.samples, "measured_at_ns": self.measured_at_ns}


def measure(n: int = 200, mono: Callable[[], int] = time.perf_counter_ns,
            realtime: Callable[[], int] = time.time_ns) -> ClockMap:
    """The REALTIME − perf_counter offset from ``n`` brackets, the tightest kept."""
    samples = []
    append = samples.append
    for _ in range(n):
        m0 = mono()
        rt = realtime()
        m1 = mono()
        append((m0, rt, m1))
    offset, width = best_bracket(samples)
    return ClockMap(offset, width, n, mono(), METHOD.format(n=n))


class StampKeeper:
    """Holds RX timestamping on host-wide while open (see module doc)."""

    def __init__(self) -> None:
        self._sock: Optional[socket.socket] = None
        try:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        except OSError:
            return
        if enable_rx_timestamps(s):
            self._sock = s
        else:
            s.close()

    def probe(self, tries: int = 40, wait_s: float = 0.005) -> int:
        """Send one byte over a loopback TCP pair until its read carries a stamp (stamping is
        switched on host-wide by deferred work): the number of tries it took, 0 if never."""
        if self._sock is None:
            return 0
        import time as _time
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        a = b = None
        try:
            srv.bind(("127.0.0.1", 0))
            srv.listen(1)
            a = socket.create_connection(srv.getsockname(), timeout=1.0)
            enable_rx_timestamps(a)
            b, _ = srv.accept()
            for i in range(1, tries + 1):
                b.send(b"x")
                _, anc, _, _ = a.recvmsg(16, ANCBUFSIZE)
                if stamp_of(anc) is not None:
                    return i
                _time.sleep(wait_s)
            return 0
        except OSError:
            return 0
        finally:
            for s_ in (a, b, srv):
                if s_ is not None:
                    s_.close()

    @property
    def active(self) -> bool:
        return self._sock is not None

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class Stamps:
    """One pool's stamping. ``stamping`` (a stamp mode, not the load's): ``"auto"`` (kernel receive stamps where the platform gives
    them) or ``"user"``. ``open()`` switches stamping on host-wide, probes it (<= 0.2 s once) and
    measures the clock; ``clock`` is then the ClockMap every connection reads its offset from
    (None: user-space stamps only). ``fold(resp)`` adds one response's read figures."""

    def __init__(self, stamping: str = "auto"):
        if stamping not in ("auto", "user"):
            raise ValueError(f"stamps: 'auto' or 'user', got {stamping!r}")
        self.stamping = stamping
        self.clock: Optional[ClockMap] = None
        self.probe_tries = 0                    # loopback reads until the first kernel stamp (0: none)
        self._keeper: Optional[StampKeeper] = None
        self.responses = self.reads = self.kernel_reads = self.future_stamps = 0
        self.lag_max_ns = self.lag_sum_ns = 0
        self.clock_steps: list = []             # [perf_counter_ns, offset moved by ns] per step seen

    def open(self) -> None:
        if self.stamping == "auto" and self._keeper is None:
            self._keeper = StampKeeper()
            if self._keeper.active:
                self.probe_tries = self._keeper.probe()
                self.clock = measure()

    def close(self) -> None:
        if self._keeper is not None:
            self._keeper.close()

    def check_clock(self) -> int:
        """Re-measure the REALTIME − perf_counter offset (tens of µs); a move beyond CLOCK_STEP_NS
        (the wall clock was stepped) is adopted for every later stamp (the connections read
        ``clock.offset_ns`` per read) and listed in ``clock_steps``. Returns the move in ns."""
        if self.clock is None:
            return 0
        new = measure(32)
        moved = new.offset_ns - self.clock.offset_ns
        if abs(moved) > CLOCK_STEP_NS and new.width_ns < CLOCK_STEP_NS // 10:
            self.clock.offset_ns = new.offset_ns
            self.clock_steps.append([new.measured_at_ns, moved])
        return moved

    def fold(self, resp) -> None:
        """One finished response's reads (``n_reads``, ``kernel_reads``, ``future_stamps``,
        ``lag_sum_ns``, ``lag_max_ns``); re-measures the clock every CLOCK_CHECK_EVERY
        responses and after a stamp from the future."""
        if resp.future_stamps or self.responses % CLOCK_CHECK_EVERY == CLOCK_CHECK_EVERY - 1:
            self.check_clock()
        self.responses += 1
        self.reads += resp.n_reads
        self.kernel_reads += resp.kernel_reads
        self.future_stamps += resp.future_stamps
        self.lag_sum_ns += resp.lag_sum_ns
        if resp.lag_max_ns > self.lag_max_ns:
            self.lag_max_ns = resp.lag_max_ns

    @property
    def source(self) -> str:
        """``kernel``, ``user`` or ``mixed`` over every read so far (before any: what is set up)."""
        kr, n = self.kernel_reads, self.reads
        if not n:
            return "kernel" if self.clock is not None else "user"
        return "kernel" if kr == n else ("user" if not kr else "mixed")

    def describe(self) -> dict:
        kr = self.kernel_reads
        return {"stamp_source": self.source, "clock": self.clock.describe() if self.clock else None,
                "probe_tries": self.probe_tries, "reads": self.reads, "kernel_stamped_reads": kr,
                "future_stamps": self.future_stamps, "clock_steps": self.clock_steps,
                "read_lag_ns": {"max": self.lag_max_ns,
                                "mean": self.lag_sum_ns // kr if kr else None},
                "responses": self.responses}


_STAMPS: Optional[Stamps] = None


def process_stamps() -> Stamps:
    """This process's stamping (opened on first use: <= 0.2 s probe, clock measured). Only an
    opened one is handed out: the probe yields to other greenlets, and one that connected
    meanwhile through a Stamps not yet open got no kernel stamps on that socket."""
    global _STAMPS
    if _STAMPS is None:
        st = Stamps("auto")
        st.open()
        if _STAMPS is None:             # another greenlet's probe may have finished first
            _STAMPS = st
    return _STAMPS
