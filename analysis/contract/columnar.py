"""records.arrow: the per-request records as compact columns (Apache Arrow IPC stream, issue 42).

    Record ─► ColumnarWriter.write(rec) ─► per-field value lists (strings through ``clean``:
        the writer's redaction) ─► every BATCH records or FLUSH_S seconds: one record batch,
        lz4-compressed buffers, appended to the stream and flushed ─► records.arrow
    records.arrow ─► read_columns(path) ─► whole batches (a torn tail: a run killed while a
        batch was written, or a file still being written: dropped) ─► per batch: each field's
        values, its chunk array and counts ─► records.read_table: the same RecordTable as the
        JSON reader's (columnar_io.py: read_table_arrow, export_jsonl, from_jsonl)
One column per Record field in the field order (SCHEMA); ``chunks`` is two list columns,
``chunks_t`` (arrival_ns) and ``chunks_n`` (n_tokens); ``attempt_log`` and ``server_timing`` (rare,
nested) are JSON text. A killed run keeps what was flushed: the batches written whole.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable, Iterator, Optional

import msgspec
import msgspec.inspect as mi
import numpy as np
import pyarrow as pa

from analysis.contract.record import Record, ServerTiming

BATCH = 4096                # records per record batch (at most; FLUSH_S ends one sooner)
FLUSH_S = 1.0               # a batch is written at least this often while records come
NAME = "records.arrow"
_JSON_FIELDS = ("attempt_log", "server_timing")


def _arrow_type(t) -> pa.DataType:
    if isinstance(t, mi.Metadata):
        t = t.type
    if isinstance(t, mi.UnionType):
        t = next(x for x in t.types if not isinstance(x, mi.NoneType))
    if isinstance(t, mi.BoolType):
        return pa.bool_()
    if isinstance(t, mi.IntType):
        return pa.int64()
    if isinstance(t, mi.FloatType):
        return pa.float64()
    return pa.string()          # str, Literal[str...], and the JSON-text fields


FIELDS = Record.__struct_fields__
_TYPES = {f.name: _arrow_type(f.type) for f in mi.type_info(Record).fields}
SCHEMA = pa.schema([pa.field("chunks_t", pa.list_(pa.int64())),
                    pa.field("chunks_n", pa.list_(pa.int64()))]
                   + [pa.field(f, _TYPES[f]) for f in FIELDS if f != "chunks"])
_STRS = frozenset(f for f in FIELDS if _TYPES[f] == pa.string() and f not in _JSON_FIELDS)
_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")
_ENCODE = msgspec.json.Encoder().encode
_astuple = msgspec.structs.astuple
_AT = {f: k for k, f in enumerate(FIELDS)}


def _text(vals, clean: Optional[Callable]) -> list:
    return vals if clean is None else [v if v is None else clean(v) for v in vals]


def _buf(a: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.ascontiguousarray(a))


def _valid(vals, n: int) -> tuple[Optional[pa.Buffer], int]:
    """The validity bitmap of ``vals`` (None where every value is there) and its null count."""
    nulls = vals.count(None)
    if nulls in (0, n):                  # every value there, or none: no bitmap to build
        return None, nulls
    ok = np.fromiter((v is not None for v in vals), bool, count=n)
    return _buf(np.packbits(ok, bitorder="little")), nulls


def _column(vals, t: pa.DataType) -> pa.Array:
    """One column from Python values, built from buffers (pa.array would import pandas: 50 MB
    in the sending process)."""
    n = len(vals)
    valid, nulls = _valid(vals, n)
    if nulls == n:
        return pa.nulls(n, t)
    if nulls:
        fill = "" if t == pa.string() else 0
        vals = [fill if v is None else v for v in vals]
    if t == pa.string():
        enc = [v.encode("utf-8", "replace") for v in vals]     # a lone surrogate: "?"
        off = np.zeros(n + 1, np.int64)
        np.cumsum(np.fromiter(map(len, enc), np.int64, count=n), out=off[1:])
        if off[-1] >= 1 << 31:
            raise ValueError("a batch of more than 2 GiB of text")
        return pa.Array.from_buffers(t, n, [valid, _buf(off.astype(np.int32)),
                                            pa.py_buffer(b"".join(enc))], nulls)
    if t == pa.bool_():
        data = _buf(np.packbits(np.array(vals, bool), bitorder="little"))
    else:
        data = _buf(np.array(vals, np.float64 if t == pa.float64() else np.int64))
    return pa.Array.from_buffers(t, n, [valid, data], nulls)


def _batch(rows: list[tuple], clean: Optional[Callable]) -> pa.RecordBatch:
    """Records (as tuples in field order) ─► one record batch of SCHEMA."""
    cols = list(zip(*rows))
    chunks = cols[_AT["chunks"]]
    n = len(chunks)
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(np.fromiter(map(len, chunks), np.int64, count=n), out=offsets[1:])
    flat = np.array([c for cs in chunks for c in cs], np.int64).reshape(-1, 2)
    m = len(flat)
    arrays = [pa.ListArray.from_buffers(pa.list_(pa.int64()), n, [None, _buf(offsets)],
                                        children=[pa.Array.from_buffers(
                                            pa.int64(), m, [None, _buf(flat[:, k])])])
              for k in (0, 1)]
    for f in SCHEMA.names[2:]:
        vals = cols[_AT[f]]
        if f in _JSON_FIELDS:
            vals = _text([v if v is None else _ENCODE(v).decode() for v in vals], clean)
        elif f in _STRS:
            vals = _text(vals, clean)
        arrays.append(_column(vals, _TYPES[f]))
    return pa.RecordBatch.from_arrays(arrays, schema=SCHEMA)


class ColumnarWriter:
    """Appends records to records.arrow in record batches (see the module docstring). ``clean``:
    each text value on its way in (the writer's redaction); ``batch`` / ``flush_s``: when a
    batch is written. Not thread-safe: one writer per sender."""

    def __init__(self, path: str | Path, clean: Optional[Callable] = None, batch: int = BATCH,
                 flush_s: float = FLUSH_S):
        self.path = Path(path)
        self.clean, self.batch, self.flush_s = clean, batch, flush_s
        self._f = open(self.path, "wb")
        self._w = pa.ipc.new_stream(self._f, SCHEMA, options=_OPTIONS)
        self._f.flush()
        self._rows: list[tuple] = []
        self._last = time.monotonic()
        self.count = 0                       # records written (flushed) so far

    def write(self, rec: Record) -> None:
        rows = self._rows
        rows.append(_astuple(rec))               # one C call per record; columns at flush
        if len(rows) >= self.batch or time.monotonic() - self._last >= self.flush_s:
            self.flush()

    def write_many(self, recs) -> None:
        for r in recs:
            self.write(r)

    def flush(self) -> None:
        """The records kept so far as one record batch, written and flushed."""
        self._last = time.monotonic()
        rows, self._rows = self._rows, []
        if not rows:
            return
        self._w.write_batch(_batch(rows, self.clean))
        self._f.flush()
        self.count += len(rows)

    def close(self) -> None:
        if self._f.closed:
            return
        self.flush()
        self._w.close()
        self._f.close()

    def __enter__(self) -> "ColumnarWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def batches(path: str | Path, options: Optional[pa.ipc.IpcReadOptions] = None
            ) -> Iterator[pa.RecordBatch]:
    """The whole record batches of ``path`` in order, read a batch at a time (a plain file,
    not a memory map: the file's pages stay out of this process's RSS; ``options``: e.g.
    included_fields, the columns to read); a torn tail (killed mid-batch, or still being
    written) ends it."""
    with pa.OSFile(str(path), "rb") as src:
        try:
            reader = pa.ipc.open_stream(src, options=options)
        except (pa.ArrowInvalid, OSError):          # not even a whole schema yet
            return
        while True:
            try:
                b = reader.read_next_batch()
            except StopIteration:
                return
            except (pa.ArrowInvalid, OSError):
                return
            yield b


def _values(col: pa.ChunkedArray | pa.Array, name: str) -> list:
    vals = col.to_pylist()
    if name in _STRS and col.null_count < len(col):     # one str per distinct value (status,
        one: dict = {}                                  # phase, sources: not one per record)
        vals = [v if v is None else one.setdefault(v, v) for v in vals]
    if name == "server_timing":
        return [None if v is None else msgspec.json.decode(v, type=ServerTiming) for v in vals]
    if name == "attempt_log":
        return [None if v is None else [tuple(a) for a in json.loads(v)] for v in vals]
    return vals


def _np(a: pa.Array, dtype) -> np.ndarray:
    """A primitive array with no nulls as a numpy view of its buffer (to_numpy would import
    pandas)."""
    return np.frombuffer(a.buffers()[1], dtype)[a.offset:a.offset + len(a)]


def read_columns(path: str | Path) -> Iterator[tuple[list, np.ndarray, np.ndarray]]:
    """Each whole batch of records.arrow as (each Record field's values in field order, chunks
    as None; its (n, 2) chunk array; each record's chunk count): what records.read_table makes
    Records of, a batch at a time (the Python values of one batch at most)."""
    for b in batches(path):
        cols = [None if f == "chunks" else _values(b.column(f), f) for f in FIELDS]
        ct, cn = b.column("chunks_t"), b.column("chunks_n")
        offsets = _np(ct.offsets, np.int32).astype(np.int64)
        chunks = np.empty((int(offsets[-1] - offsets[0]), 2), np.int64)
        chunks[:, 0] = _np(ct.flatten(), np.int64)
        chunks[:, 1] = _np(cn.flatten(), np.int64)
        yield cols, chunks, np.diff(offsets)


_EOS = b"\xff\xff\xff\xff\x00\x00\x00\x00"      # the IPC stream's end mark (close() writes it)


def problems(path: str | Path) -> list[str]:
    """What is wrong with a records.arrow file, one line each ([]: none): not Arrow, another
    schema, a torn tail or no end mark (the writer was killed: its flushed batches still read)."""
    p = Path(path)
    name = p.name
    try:
        with pa.memory_map(str(p), "r") as src:
            schema = pa.ipc.open_stream(src).schema
    except (pa.ArrowInvalid, OSError) as e:
        return [f"{name}: not an Arrow IPC stream ({str(e).splitlines()[0][:120]})"]
    if not schema.equals(SCHEMA):
        extra = [f for f in schema.names if f not in SCHEMA.names]
        gone = [f for f in SCHEMA.names if f not in schema.names]
        return [f"{name}: columns differ from the contract's (not in it: {extra or '-'}; "
                f"missing: {gone or '-'}; else a column's type)"]
    n = sum(b.num_rows for b in batches(p))
    with open(p, "rb") as f:
        f.seek(max(0, p.stat().st_size - len(_EOS)))
        closed = f.read() == _EOS
    if not closed:
        return [f"{name}: no end mark after {n} records (the run was killed: only what it "
                f"flushed is there)"]
    return []
