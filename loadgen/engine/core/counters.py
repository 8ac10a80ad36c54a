"""The progress counter file every sender bumps and its parent (or the live exporter) reads.

    Counters: SLOTS int64 slots in a small shared file (mmap'd): the sender's state and its
              counts per request (warm-up issued, issued, sent, ok, failed, cancelled, tokens)
    --procs:  procs/progress.K.bin, bumped by child K, read by the parent for the live bar and,
              after a crash, for what it had started (counted before it is handed to the client)
    live:     loadgen.live.feed mirrors the one-process counts into a file of this layout

The file outlives the process: a sender killed with SIGKILL still tells what it had started.
"""
from __future__ import annotations

import mmap
import os
from pathlib import Path

# sender states, in order
STARTING, WARMING, READY, MEASURING, DONE = range(5)
STATE, WARM_ISSUED, ISSUED, SENT, OK, FAILED, CANCELLED, TOKENS = range(8)
SLOTS = 8
_SHOWN = ((SENT, "sent"), (OK, "completed"), (FAILED, "failed"), (CANCELLED, "cancelled"),
          (TOKENS, "tokens"))


class Counters:
    """SLOTS int64 counters in a shared file (``create`` by the reader, ``open`` by the sender)."""

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


def mirror(progress, ctr: "Counters") -> None:
    """The sender's side: a RunProgress's counts (sent, ok, failed, cancelled, tokens) into
    ``ctr``."""
    v = ctr.v
    v[SENT], v[OK], v[FAILED], v[CANCELLED], v[TOKENS] = (
        progress.sent, progress.completed, progress.failed, progress.cancelled, progress.tokens)


def show(progress, slots) -> None:
    """The reader's side: ``slots`` (one snapshot, or several summed) into a RunProgress."""
    for i, name in _SHOWN:
        setattr(progress, name, slots[i])


def show_phase(progress, snaps: list, measuring: bool) -> None:
    """The live bar from several senders' snapshots: those in the phase shown, summed."""
    show(progress, [sum(x) for x in zip(*[s for s in snaps if (s[STATE] >= MEASURING) == measuring],
                                        [0] * SLOTS)])
    refresh = getattr(progress, "_refresh", None)
    if refresh is not None:
        refresh()
