"""records.arrow parts (issue 42): each sender process's own records.arrow, read a batch at a time
and written into one, for the merge of --procs and Locust (loadgen.engine.core.merge_arrow).

    part (records.K.arrow, records.worker-K.arrow: a ColumnarWriter's stream)
        ─► part_rows(path, k): (end key, k, n, id, batch, row) per record in file order, one
           record batch held at a time (columnar.batches; a torn tail: its whole batches)
    merged rows, in the merge's order ─► Joiner.row(batch, row) / Joiner.records(recs)
        ─► every BATCH rows: the rows taken from their batches (pyarrow take, no Python values),
           the Records (cancelled ones, lines of a JSONL part) built into columns
           (columnar._batch), concatenated in order ─► one record batch ─► out (records.arrow)
    Tail(path).poll(): the record batches appended since the last poll (a live display
        following a part as it is written: one message at a time, the file never re-read;
        a replaced file from its start) ─► rows(batch): each record as a dict (the JSON
        line's keys: chunks as [t, n] pairs, attempt_log and server_timing decoded)
Memory: the batches the last BATCH merged rows came from, and one batch per part.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Callable, Iterator, Optional

import msgspec
import pyarrow as pa

from analysis.contract.columnar import _OPTIONS, BATCH, SCHEMA, _batch, batches


def part_rows(path: Path, k: int) -> Iterator[tuple]:
    """(end key, k, n, id, batch, row) of each record of part ``path``: the end key is its
    end_at_ns, else the last one before it in the file (the JSONL merge's rule); no file: none."""
    if not Path(path).is_file():
        return
    last, n = 0, 0
    for b in batches(path):
        ids = b.column("id").to_pylist()
        ends = b.column("end_at_ns").to_pylist()
        for i, (rid, end) in enumerate(zip(ids, ends)):
            if end is not None:
                last = end
            yield (last, k, n, rid, b, i)
            n += 1


class Joiner:
    """Rows of part batches and whole Records, in the order given, written to ``path`` as
    record batches of at most ``batch`` rows (strings of ``records`` through ``clean``)."""

    def __init__(self, path: str | Path, batch: int = BATCH):
        self.path, self.batch = Path(path), batch
        self._f = open(self.path, "wb")
        self._w = pa.ipc.new_stream(self._f, SCHEMA, options=_OPTIONS)
        self._pieces: list = []        # [batch, [rows]] or [None, [record tuples], clean]
        self._n = 0
        self.count = 0

    def row(self, b: pa.RecordBatch, i: int) -> None:
        p = self._pieces
        if p and p[-1][0] is b:
            p[-1][1].append(i)
        else:
            p.append([b, [i]])
        self._more()

    def records(self, recs, clean: Optional[Callable] = None) -> None:
        for r in recs:
            p = self._pieces
            if not (p and p[-1][0] is None and p[-1][2] is clean):
                p.append([None, [], clean])
            p[-1][1].append(msgspec.structs.astuple(r))
            self._more()

    def _more(self) -> None:
        self._n += 1
        if self._n >= self.batch:
            self.flush()

    def flush(self) -> None:
        pieces, self._pieces, n, self._n = self._pieces, [], self._n, 0
        if not n:
            return
        parts = [p[0].take(pa.array(p[1], pa.int32())) if p[0] is not None
                 else _batch(p[1], p[2]) for p in pieces]
        one = parts[0] if len(parts) == 1 else \
            pa.Table.from_batches(parts, SCHEMA).combine_chunks().to_batches()[0]
        self._w.write_batch(one)
        self._f.flush()
        self.count += n

    def close(self) -> None:
        if self._f.closed:
            return
        try:
            self.flush()
            self._w.close()
        finally:
            self._f.close()

    def __enter__(self) -> "Joiner":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Tail:
    """The record batches appended to a records.arrow as it is written, each once: a message
    at a time from where the last poll stopped (a message not whole yet waits); a file
    replaced (another inode: the merge, server_traces' join) or cut short is read again from
    its start (the caller drops what it saw: each id once)."""

    def __init__(self, path: str | Path):
        self.path, self.pos, self.schema, self.ino = Path(path), 0, None, None

    def poll(self) -> list[pa.RecordBatch]:
        out: list[pa.RecordBatch] = []
        try:
            f = open(self.path, "rb")
        except OSError:
            return out
        with f:
            st = os.fstat(f.fileno())
            if st.st_ino != self.ino or st.st_size < self.pos:
                self.pos, self.schema, self.ino = 0, None, st.st_ino
            f.seek(self.pos)
            src = pa.PythonFile(f, mode="r")
            while True:
                try:
                    msg = pa.ipc.read_message(src)
                except (pa.ArrowInvalid, OSError, EOFError):
                    break                             # not whole yet (or the end mark)
                if msg is None:
                    break
                if self.schema is None:
                    if msg.type != "schema":
                        break
                    self.schema = pa.ipc.read_schema(msg)
                elif msg.type == "record batch":
                    out.append(pa.ipc.read_record_batch(msg, self.schema))
                self.pos = f.tell()
        return out


def rows(b: pa.RecordBatch) -> list[dict]:
    """Each record of batch ``b`` as the dict its JSON line decodes to (Record's keys)."""
    out = b.to_pylist()
    for r in out:
        r["chunks"] = [list(c) for c in zip(r.pop("chunks_t"), r.pop("chunks_n"))]
        for k in ("attempt_log", "server_timing"):
            if r[k] is not None:
                r[k] = json.loads(r[k])
    return out
