"""What the parent hands a sender process, and the counters both sides read.

    parent ─► Job (pickled, length-prefixed, on the child's stdin) ─► child
    parent ─► "go T0\\n" | "stop REASON\\n" lines on the same stdin (EOF: the parent is gone)
    child  ─► Counters: a small shared file (procs/progress.K.bin, mmap'd, int64 slots) that the
              child bumps per request (state, issued, sent, ok, failed, cancelled, tokens) and
              the parent reads for the live display and, after a crash, for what was started
    child  ─► procs/result.K.json when it ends (client load, transport, unsent, end)

The file outlives the process: a child killed with SIGKILL still tells how many closed-loop
requests it had started (each is counted before it is handed to the client).
"""
from __future__ import annotations

import mmap
import os
import pickle
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

# child states, in order
STARTING, WARMING, READY, MEASURING, DONE = range(5)
STATE, WARM_ISSUED, ISSUED, SENT, OK, FAILED, CANCELLED, TOKENS = range(8)
SLOTS = 8
_LEN = struct.Struct("<Q")


@dataclass
class Job:
    """One sender process's share of the run (everything it needs but the API key's value,
    which it reads from its inherited environment, and the prompts of a closed loop, which it
    draws from the same seeded workload stream)."""
    index: int
    n: int
    sc: object                          # the Scenario
    base_url: str
    model: str
    drop_fields: tuple
    part_path: str                      # procs/records.K.jsonl
    counters_path: str                  # procs/progress.K.bin
    result_path: str                    # procs/result.K.json
    warm: list = field(default_factory=list)       # RequestSpecs (ids < warmup_requests)
    planned: list = field(default_factory=list)    # RequestSpecs (offline, server, trace)
    offsets_ns: list = field(default_factory=list)  # planned[i]'s offset from t0 (server, trace)
    cap: Optional[int] = None           # this process's share of the in-flight cap
    num_requests: Optional[int] = None  # closed loop: this process's share
    stages: Optional[list] = None       # closed loop with stages: this process's users per stage


def job_bytes(job: Job) -> bytes:
    blob = pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL)
    return _LEN.pack(len(blob)) + blob


def _read_exactly(fd: int, size: int) -> bytes:
    out = bytearray()
    while len(out) < size:
        part = os.read(fd, min(size - len(out), 1 << 20))
        if not part:
            raise EOFError("job cut short on stdin (the parent went away)")
        out += part
    return bytes(out)


def read_job(fd: int) -> Job:
    """The Job from file descriptor ``fd`` (unbuffered: the parent's later lines stay there)."""
    (size,) = _LEN.unpack(_read_exactly(fd, _LEN.size))
    return pickle.loads(_read_exactly(fd, size))


class Counters:
    """SLOTS int64 counters in a shared file (``create`` by the parent, ``open`` by the child)."""

    def __init__(self, path: Path, mm: mmap.mmap):
        self.path, self._mm = Path(path), mm
        self.v = memoryview(mm).cast("q")

    @classmethod
    def create(cls, path: str | Path) -> "Counters":
        with open(path, "wb") as f:
            f.write(b"\0" * (8 * SLOTS))
        return cls.open(path)

    @classmethod
    def open(cls, path: str | Path) -> "Counters":
        fd = os.open(path, os.O_RDWR)
        try:
            mm = mmap.mmap(fd, 8 * SLOTS)
        finally:
            os.close(fd)
        return cls(Path(path), mm)

    def __getitem__(self, i: int) -> int:
        return self.v[i]

    def __setitem__(self, i: int, value: int) -> None:
        self.v[i] = value

    def bump(self, i: int, by: int = 1) -> None:
        self.v[i] += by

    def snapshot(self) -> list[int]:
        return list(self.v)

    def close(self) -> None:
        try:
            self.v.release()
            self._mm.close()
        except (BufferError, ValueError):
            pass
