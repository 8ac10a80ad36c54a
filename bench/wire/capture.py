"""tcpdump on the loopback for one TCP port, and the clock offset to read its timestamps with.

    Capture(port, path, cpu).start()  tcpdump -i lo -w path -s 0 --time-stamp-precision=nano
                                      -B 131072 'tcp port N'   (pinned to ``cpu``)
        waits for tcpdump's "listening on" line: capturing from then on
    .stop() ─► waits ``settle_s`` (tcpdump hands over its ring buffer's blocks on a 1 s timeout; a
               SIGINT before that loses the last packets) ─► SIGINT, wait
               ─► {"captured", "received_by_filter", "dropped_by_kernel"}
    clock_offset_ns() ─► CLOCK_REALTIME − CLOCK_MONOTONIC, from the tightest of 50 bracketed reads
    tcp_counters() ─► host-wide TCP drop/retransmit counters (/proc/net/netstat, /proc/net/snmp); their
        change over a run says whether a packet on the wire may not have reached the client socket
        (a backlog or receive-queue drop, then a retransmission: the wire's first copy is early)
"""
from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Optional


def clock_offset_ns(tries: int = 50) -> dict:
    """REALTIME − MONOTONIC (perf_counter_ns is CLOCK_MONOTONIC on Linux), with its uncertainty."""
    best = None
    for _ in range(tries):
        a = time.perf_counter_ns()
        r = time.clock_gettime_ns(time.CLOCK_REALTIME)
        b = time.perf_counter_ns()
        if best is None or b - a < best[0]:
            best = (b - a, r - (a + b) // 2)
    return {"offset_ns": best[1], "uncertainty_ns": best[0]}


TCP_COUNTERS = ("TCPBacklogDrop", "TCPRcvQDrop", "TCPLossProbes", "TCPSpuriousRTOs", "TCPTimeouts",
                "RetransSegs", "ListenOverflows", "TCPOFOQueue")


def tcp_counters() -> dict:
    out = {}
    for f in ("/proc/net/netstat", "/proc/net/snmp"):
        try:
            lines = Path(f).read_text().splitlines()
        except OSError:
            continue
        for names, values in zip(lines[::2], lines[1::2]):
            for k, v in zip(names.split()[1:], values.split()[1:]):
                if k in TCP_COUNTERS and names.startswith(("TcpExt:", "Tcp:")):
                    out[k] = int(v)
    return out


def counter_delta(before: dict, after: dict) -> dict:
    return {k: after[k] - before.get(k, 0) for k in after}


class Capture:
    def __init__(self, port: int, path: Path, cpu: Optional[int] = None, iface: str = "lo",
                 buffer_kib: int = 131072, start_timeout_s: float = 10.0, settle_s: float = 2.0):
        exe = shutil.which("tcpdump")
        if exe is None:
            raise RuntimeError("tcpdump not found (Debian: apt-get install -y tcpdump)")
        self.argv = [exe, "-i", iface, "-w", str(path), "-s", "0", "--time-stamp-precision=nano",
                     "-B", str(buffer_kib), "-n", f"tcp port {int(port)}"]
        self.path, self.cpu, self.start_timeout_s = Path(path), cpu, start_timeout_s
        self.settle_s = settle_s
        self.proc: Optional[subprocess.Popen] = None
        self.result: Optional[dict] = None

    def start(self) -> "Capture":
        cpu = self.cpu

        def pre() -> None:
            if cpu is not None:
                os.sched_setaffinity(0, {cpu})
        self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     preexec_fn=pre)
        deadline = time.monotonic() + self.start_timeout_s
        seen = b""
        while time.monotonic() < deadline:
            r, _, _ = select.select([self.proc.stderr], [], [], 0.2)
            if r:
                line = self.proc.stderr.readline()
                seen += line
                if b"listening on" in line:
                    return self
                if not line and self.proc.poll() is not None:
                    break
        self.stop()
        raise RuntimeError(f"tcpdump did not start capturing: {seen.decode(errors='replace')[-400:]}")

    def stop(self) -> dict:
        if self.proc is None:
            return self.result or {}
        if self.proc.poll() is None:
            time.sleep(self.settle_s)
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        err = self.proc.stderr.read().decode(errors="replace") if self.proc.stderr else ""
        if self.proc.stderr:
            self.proc.stderr.close()
        self.proc = None
        out = {}
        for key, pat in (("captured", r"(\d+) packets? captured"),
                         ("received_by_filter", r"(\d+) packets? received by filter"),
                         ("dropped_by_kernel", r"(\d+) packets? dropped by kernel")):
            mo = re.search(pat, err)
            out[key] = int(mo.group(1)) if mo else None
        out["pcap_bytes"] = self.path.stat().st_size if self.path.exists() else 0
        self.result = out
        return out

    def __enter__(self) -> "Capture":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
