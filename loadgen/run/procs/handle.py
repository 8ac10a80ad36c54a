"""The parent's handle on one sender process: its Popen, Job, Counters and result.

    Senders (parent.py) ─► Child.say("go T0" | "stop REASON") ─► the child's stdin
                       ─► Child.signal(SIGTERM | SIGKILL), Child.alive, Child.how_it_ended()
"""
from __future__ import annotations

import contextlib
import signal
import subprocess
from typing import Optional

from loadgen.run.procs import job as job_mod
from loadgen.run.procs.job import Counters, Job


class Child:
    def __init__(self, k: int, proc: subprocess.Popen, job: Job, ctr: Counters):
        self.k, self.proc, self.job, self.ctr = k, proc, job, ctr
        self.result: Optional[dict] = None
        self.final: list[int] = [0] * job_mod.SLOTS     # the counters when it ended

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    def say(self, line: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.proc.stdin.write((line + "\n").encode("utf-8"))
            self.proc.stdin.flush()

    def signal(self, sig: int) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(sig)

    def how_it_ended(self) -> str:
        rc = self.proc.returncode
        if rc is None:
            return "still running"
        if rc < 0:
            with contextlib.suppress(ValueError):
                return f"was killed by {signal.Signals(-rc).name}"
            return f"was killed by signal {-rc}"
        return f"exited with code {rc}"
