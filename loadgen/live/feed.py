"""The live counters the exporter reads for ``loadgen_in_flight``: the progress display's feed.

    parent (loadgen run)                                        exporter process
    RunProgress (sent, ok, failed, cancelled, tokens: updated ─► Mirror thread, every
      by the Dispatcher per send / per record, as always;        MIRROR_S, copies those five
      client.processes > 1: summed from the sender              integers ─► live.bin ─► in_flight()
      processes' procs/progress.K.bin by procs/parent.py)       (mmap'd, counters.Counters')

The stamping interpreter does nothing more per event than it already did for the progress
bar: the copy is a timer, not a hook. ``live.bin`` has the layout of
loadgen.engine.core.counters.Counters (the sender processes' progress files), in a temporary
directory of the parent's, removed at close.
"""
from __future__ import annotations

import contextlib
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Optional

from loadgen.engine.core.counters import CANCELLED, FAILED, OK, SENT, TOKENS, Counters

MIRROR_S = 0.2


def in_flight(ctr: Counters) -> int:
    """Sent and not yet recorded (never below 0: the five integers are copied one by one)."""
    return max(0, ctr[SENT] - ctr[OK] - ctr[FAILED] - ctr[CANCELLED])


class Mirror:
    """The parent's side: ``point(progress)`` at each run, ``close()`` at the end."""

    def __init__(self, period_s: float = MIRROR_S):
        self.dir = Path(tempfile.mkdtemp(prefix="loadgen-live-"))
        self.path = self.dir / "live.bin"
        self.ctr = Counters.create(self.path)
        self.period_s = period_s
        self._progress = None
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def point(self, progress) -> None:
        """Copy ``progress``'s counters from now on (a new run of ``--repeat``: its own)."""
        self._progress = progress
        self.copy()
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="loadgen-live-mirror",
                                            daemon=True)
            self._thread.start()

    def copy(self) -> None:
        p, c = self._progress, self.ctr
        if p is None:
            return
        c[SENT], c[OK], c[FAILED], c[CANCELLED], c[TOKENS] = (
            p.sent, p.completed, p.failed, p.cancelled, p.tokens)

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.copy()

    def close(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self.copy()                         # the last counts (a run that ended: 0 in flight)
        self.ctr.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def open_counters(path: str) -> Optional[Counters]:
    """The exporter's side: the mirror's file, or None when it cannot be read."""
    with contextlib.suppress(OSError, ValueError):
        return Counters.open(path)
    return None
