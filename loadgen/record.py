"""The per-request record's clock and writer: ``Record`` itself is analysis.contract.record's.

    analysis.contract.record.Record (THE one definition, a msgspec Struct; re-exported here, so
        ``from loadgen.record import Record`` is the writer's spelling) ─► RecordWriter
        (Record.to_json, redacted, one write per line) ─► records.jsonl

Timed on one clock (``time.perf_counter_ns`` = ``now_ns``, CLOCK_MONOTONIC on Linux, so a server
process or power sampler on the same host shares it), one JSON line per request, flushed as each
request ends. Times are integers in nanoseconds on that clock; ``None`` means "did not happen".
docs/architecture.md and docs/schema/record.json list every field.
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from analysis.contract.record import ERROR_KINDS, Record
from loadgen.redact import redact

__all__ = ["Record", "RecordWriter", "ERROR_KINDS", "now_ns", "read_records", "arrow_writer",
           "store_writer"]

now_ns = time.perf_counter_ns


class RecordWriter:
    """Appends records to ``records.jsonl``, one line each, each line one write (no torn line),
    fsync'd per record with ``fsync=True``. A failed write (disk full, I/O error) cuts the file
    back to its last whole line and raises ``loadgen.run.storage.StorageError``; ``failed`` keeps
    it and every later write raises it again."""

    def __init__(self, path: str | Path, fsync: bool = False, file=None):
        from loadgen.run.storage import LineWriter   # lazy: the client imports this module
        self.path = Path(path)
        self._f = LineWriter(file, self.path.name) if file is not None else LineWriter.open(self.path)
        self._fsync = fsync
        self._lock = threading.Lock()
        self.count = 0

    @property
    def failed(self):
        return self._f.failed

    def write(self, rec: Record) -> None:
        line = (redact(rec.to_json()) + "\n").encode("utf-8")   # no secret, whatever echoed it
        with self._lock:
            self._f.write(line)
            if self._fsync:
                self._f.fsync()
            self.count += 1

    def write_many(self, recs) -> None:
        """Several records in one write (a bulk of cancelled ones); whole lines only on failure."""
        self.write_lines([redact(r.to_json()) for r in recs])

    def write_lines(self, lines: list) -> None:
        """Lines already encoded and redacted (one record each, no newline) in one write; whole
        lines only on failure. The Locust ledger forwards the same lines it writes."""
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        if not data:
            return
        with self._lock:
            before = self._f.lines
            try:
                self._f.write(data)
            finally:
                self.count += self._f.lines - before
            if self._fsync:
                self._f.fsync()

    def close(self) -> None:
        with self._lock:
            self._f.close()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def arrow_writer(empty: RecordWriter, run_dir: str | Path):
    """output.records: arrow (issue 42, a one-process run): records.arrow instead of
    records.jsonl (``empty``: closed, its file removed), strings redacted on the way in."""
    empty.close()
    empty.path.unlink(missing_ok=True)
    return store_writer(Path(run_dir) / "records.arrow")


def store_writer(path: str | Path):
    """A sender's records part at ``path``: a ColumnarWriter (redacted on the way in) for a
    ``.arrow`` path (output.records: arrow, issue 42), else a RecordWriter."""
    if Path(path).suffix == ".arrow":
        from analysis.contract.columnar import ColumnarWriter      # pyarrow: only if asked
        return ColumnarWriter(path, clean=redact)
    return RecordWriter(path)


def read_records(path: str | Path) -> list[dict]:
    """A records-shaped JSON-lines file of the engines' own (worker parts, send journals) as
    dicts; a torn last line (killed mid-write) is skipped. Analysis reads records.jsonl through
    analysis.contract.records instead (typed, bounded slices)."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out
