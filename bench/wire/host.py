"""What else ran on the host during a run: per-CPU busy time from /proc/stat, and a pty runner.

    cpu_times() ─► {cpu index: (busy_s, total_s, steal_s)}      (USER_HZ ticks → seconds)
    cpu_share(before, after) ─► {cpu: {"busy", "steal"}} as fractions of the interval
        the client core's busy share minus the client's own CPU (rusage) = other work on that core
        (another process, or interrupts); a run where that is large measured a shared core
    run_in_pty(argv, ...) ─► (returncode, last output): the command with a terminal on stdout and
        stderr, as a user runs it (rich draws its live progress only on a terminal)
"""
from __future__ import annotations

import os
import pty
import subprocess
import threading
from typing import Callable, Optional

_HZ = os.sysconf("SC_CLK_TCK")


def cpu_times() -> dict:
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if not line.startswith("cpu") or line.startswith("cpu "):
                continue
            name, *vals = line.split()
            v = [int(x) for x in vals]
            idle = v[3] + (v[4] if len(v) > 4 else 0)             # idle + iowait
            steal = v[7] if len(v) > 7 else 0
            total = sum(v[:8])                                     # guest time is inside user
            out[int(name[3:])] = ((total - idle - steal) / _HZ, total / _HZ, steal / _HZ)
    return out


def cpu_share(before: dict, after: dict) -> dict:
    out = {}
    for c, (b1, t1, s1) in after.items():
        b0, t0, s0 = before.get(c, (0.0, 0.0, 0.0))
        dt = t1 - t0
        out[c] = {"busy": (b1 - b0) / dt if dt > 0 else None,
                  "busy_s": round(b1 - b0, 3), "steal": (s1 - s0) / dt if dt > 0 else None}
    return out


def run_in_pty(argv: list, cwd, env: dict, preexec_fn: Optional[Callable] = None,
               timeout: Optional[float] = None, keep: int = 8000) -> tuple[int, str]:
    """Run ``argv`` with a pseudo-terminal as stdout and stderr; its output is drained (last
    ``keep`` characters returned) so it never blocks on a full terminal."""
    master, slave = pty.openpty()
    env = dict(env)
    env.setdefault("TERM", "xterm-256color")
    env.setdefault("COLUMNS", "120")
    tail = bytearray()

    def drain() -> None:
        while True:
            try:
                b = os.read(master, 65536)
            except OSError:                       # EIO: every writer closed the slave
                return
            if not b:
                return
            tail.extend(b)
            del tail[:-keep]
    t = threading.Thread(target=drain, daemon=True)
    t.start()
    try:
        p = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=slave,
                             stderr=slave, preexec_fn=preexec_fn)
    finally:
        os.close(slave)
    try:
        rc = p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.wait()
        raise
    finally:
        t.join(timeout=5)
        os.close(master)
    return rc, tail.decode("utf-8", "replace")
