"""The one-record ledger every sender writes through (the one-process run, each ``--procs``
child, each Locust worker): each request's record exactly once.

    write(rec)          once per id (a repeat is dropped; the ids are kept one bit each:
                        idset.py); ``tag``: Record.worker, the sender that sent it
                        (analysis judges each process: schedule lag, coalescing)
        ─► _put(rec)    the runtime's write (here: the RecordWriter at once; the Locust worker
                        batches lines for an idle hub) ─► on_done(rec) (the progress counters)
    cancelled(spec, why)       a never-finished request's record (from its spec)
    cancel_many(specs, why)    a remainder written at once, BULK lines per write
    a failed write (OSError: disk full) is kept in ``failed`` and sets every registered stop
    flag (anything with ``set()``); later records are not written (the file ends at its last
    whole line)
Pure: no asyncio, no gevent.
"""
from __future__ import annotations

from typing import Callable, Iterable, Optional

from loadgen.client.attempt import cancelled_record
from loadgen.record import Record, now_ns
from loadgen.engine.core import cancelled as cancelled_mod
from loadgen.engine.core.idset import IdSet

BULK = 4096                 # cancelled records per write when a remainder is written at once


class Ledger:
    """Writes each request's record exactly once and tells the progress display."""

    def __init__(self, writer, on_done: Optional[Callable[[Record], None]] = None,
                 tag: Optional[str] = None):
        self.writer = writer
        self.on_done = on_done
        self.tag = tag
        self.written = IdSet()          # one bit an id: flat memory over a long run
        self.failed: Optional[OSError] = None
        self._stops: list = []

    def stop_on_failure(self, stop) -> None:
        self._stops.append(stop)

    def _fail(self, e: OSError) -> None:
        self.failed = self.failed or e
        for ev in self._stops:
            ev.set()

    def _put(self, rec: Record) -> None:
        self.writer.write(rec)

    def write(self, rec: Record) -> bool:
        """Write ``rec`` unless its id was written already (or a write failed)."""
        if rec.id in self.written:
            return False
        self.written.add(rec.id)
        if self.failed is not None:
            return False
        if self.tag is not None:
            rec.worker = self.tag
        try:
            self._put(rec)
        except OSError as e:
            self._fail(e)
            return False
        if self.on_done is not None:
            self.on_done(rec)
        return True

    def cancelled(self, spec, why: str, sent_at_ns: Optional[int] = None) -> Record:
        rec = cancelled_mod.record(spec, why, self.tag, now_ns())
        rec.sent_at_ns = sent_at_ns
        return rec

    def cancel(self, spec, why: str, sent_at_ns: Optional[int] = None) -> None:
        self.write(self.cancelled(spec, why, sent_at_ns))

    def cancel_many(self, specs: Iterable, why: str) -> None:
        """A cancelled record for each spec not yet written, BULK lines per write (made from
        one template: engine/core/cancelled.py), the progress counters told with one stand-in."""
        write_lines = getattr(self.writer, "write_lines", None)
        if write_lines is None or type(self)._put is not Ledger._put:
            # a ledger that writes its own way (the Locust worker's: rebased, forwarded, when
            # the hub is idle) takes them one by one
            for s in specs:
                if s.id not in self.written:
                    self.cancel(s, why)
            return
        make = cancelled_mod.Lines(self.tag, now_ns()).line
        ids: list = []
        lines: list = []
        for s in specs:
            if s.id in self.written:
                continue
            self.written.add(s.id)
            ids.append(s.id)
            lines.append(make(s, why))
            if len(lines) >= BULK:
                self._write_lines(ids, lines, why)
                ids, lines = [], []
        if lines:
            self._write_lines(ids, lines, why)

    def _write_lines(self, ids: list, lines: list, why: str) -> None:
        if self.failed is not None:
            return
        try:
            self.writer.write_lines(lines)
        except OSError as e:
            self._fail(e)
            return
        if self.on_done is not None:        # the progress counters: one stand-in record
            shown = cancelled_record(-1, "measured", None, None, why, worker=self.tag)
            for i in ids:
                shown.id = i
                self.on_done(shown)
