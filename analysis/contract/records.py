"""records.jsonl read through the one Record type, in bounded slices, into records and arrays.

    records.jsonl ─► slices of ~SLICE_BYTES whole lines ─► msgspec decode_lines(Record, chunks
        left raw) ─► each slice's chunks parsed at once into an (n, 2) int64 array
        ─► RecordTable: .records (Records; each .chunks a ChunkView into its slice's array),
                        .t / .n (every chunk's arrival_ns / n_tokens, one flat array each),
                        .offsets (record i's chunks are t[offsets[i]:offsets[i+1]]),
                        .column(name) (a per-record field as a numpy array)
A torn last line (a run killed mid-write) is skipped; any other line that is not JSON, or a
record whose field does not fit, is a ContractError naming the line and the field. Memory: the
file is never held whole, and no chunk is a Python object until asked for (ChunkView).
The records come as a RecordList (a list that holds its table): analysis selects from it
(analysis.metrics.figures.measured, ...) on the table's columns, and a selection is again a
RecordList over the same arrays. No table is looked up by a list's identity: a list that holds
no table (JSON dicts from a test, Records gathered by hand) gets one built by as_records.
read_table caches the last table read (path, size, mtime): the summary and the report of one
``loadgen report`` decode the file once.
"""
from __future__ import annotations

import os
import sys
import warnings
from collections import deque
from itertools import repeat
from operator import attrgetter
from functools import cached_property
from pathlib import Path
from typing import Annotated, Iterator, Literal, Optional

import msgspec
import numpy as np

from analysis.contract.base import ContractError
from analysis.contract.record import Record, problem_line
from analysis.contract.record_in import RecordIn, RecordList, Records, as_record  # noqa: F401
from analysis.contract.record_table import ChunkView, RecordTable, _SubTable  # noqa: F401

SLICE_BYTES = 4 << 20
_SPACES = bytes.maketrans(b"[],", b"   ")


_I64 = Annotated[int, msgspec.Meta(ge=-(1 << 63), le=(1 << 63) - 1)]   # a clock's integer ns


class _Line(Record, gc=False):
    """A Record as read: its chunks still raw JSON (parsed per slice into an array); an id or
    phase missing (hand-made or older files) reads as None (validate_run_dir names it). Times
    beyond 64 bits (no clock gives them) are refused here, naming the line; what else a line
    says is checked by analysis.contract.sanity."""
    id: Optional[int] = None
    phase: Optional[Literal["warmup", "measured", "probe_alone", "probe"]] = None   # one str each
    scheduled_at_ns: Optional[_I64] = None
    sent_at_ns: Optional[_I64] = None
    first_chunk_at_ns: Optional[_I64] = None
    first_token_at_ns: Optional[_I64] = None
    end_at_ns: Optional[_I64] = None
    chunks: msgspec.Raw = msgspec.Raw(b"[]")


_DECODE = msgspec.json.Decoder(_Line)
_SHARED = ("prompt_tokens_source", "output_tokens_source", "finish_reason")
_intern = sys.intern
_CHUNKS = msgspec.json.Decoder(list[tuple[_I64, _I64]])
_RAW = attrgetter("chunks")


def _lines(path: Path, slice_bytes: int) -> Iterator[tuple[int, memoryview, bool]]:
    """(first line number, whole lines, last) slices of the file: views into ONE buffer that
    the next slice overwrites (decode a slice before asking for the next; nothing is copied
    on the way). The tail after the last newline comes last, with last=True (a torn line, or a
    final line without newline)."""
    line_no, buf, have = 1, bytearray(slice_bytes), 0
    with open(path, "rb", buffering=0) as f:
        while True:
            if have == len(buf):                 # a line longer than a slice: a bigger buffer
                buf = buf + bytes(len(buf))      # (a new one: the old may still be viewed)
            got = f.readinto(memoryview(buf)[have:])
            if not got:
                break
            end = have + got
            cut = buf.rfind(b"\n", 0, end)
            if cut < 0:
                have = end
                continue
            yield line_no, memoryview(buf)[:cut + 1], False
            line_no += buf.count(b"\n", 0, cut + 1)
            have = end - cut - 1
            buf[:have] = buf[cut + 1:end]        # the partial line to the front (same size)
    if buf[:have].strip():
        yield line_no, memoryview(buf)[:have], True


def _decode(first: int, body, name: str, last: bool) -> list[_Line]:
    try:
        return _DECODE.decode_lines(body)
    except msgspec.DecodeError:
        pass
    out, lines = [], bytes(body).split(b"\n")
    for k, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            out.append(_DECODE.decode(line))
        except msgspec.ValidationError as e:
            raise ContractError(problem_line(e, f"{name}:{first + k}")) from None
        except msgspec.DecodeError:
            if last and not any(x.strip() for x in lines[k + 1:]):
                continue                                  # a torn last line
            raise ContractError(f"{name}:{first + k}: not JSON") from None
    return out


def _parse_chunks(recs: list[_Line], name: str) -> tuple[np.ndarray, np.ndarray]:
    """Every record's raw chunks ─► one (n, 2) int64 array and the count per record."""
    raws = list(map(bytes, map(_RAW, recs)))
    text = b" ".join(raws)
    # chunks per record: its "[" count − 1 (the outer list), found on the joined text at once
    ends = np.cumsum(np.fromiter(map(len, raws), np.int64, count=len(raws)) + 1)
    opens = np.flatnonzero(np.frombuffer(text, np.uint8) == ord("["))
    counts = np.diff(np.searchsorted(opens, ends), prepend=0) - 1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)   # "could not be read to its end"
            flat = np.fromstring(text.translate(_SPACES), dtype=np.int64, sep=" ") \
                if counts.any() else np.zeros(0, np.int64)
    except ValueError:
        flat = None
    del text
    if flat is None or flat.size != 2 * int(counts.sum()):                # not plain [[int, int], ...]: strictly
        parts = []
        for r, raw in zip(recs, raws):
            try:
                parts.append(np.asarray(_CHUNKS.decode(raw), dtype=np.int64).reshape(-1, 2))
            except msgspec.ValidationError as e:
                raise ContractError(problem_line(e, f"{name}: id {r.id}: chunks")) from None
        counts = np.array([len(p) for p in parts], dtype=np.int64)
        flat = np.concatenate(parts) if parts else np.zeros((0, 2), np.int64)
    return flat.reshape(-1, 2), counts


def read_table(path: str | Path, slice_bytes: int = SLICE_BYTES) -> RecordTable:
    """records.jsonl (or probe_stream.jsonl, or records.arrow: columnar.py) as a RecordTable;
    the last one read is cached."""
    p = Path(path)
    st = os.stat(p)
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if _CACHE.get("key") == key:
        return _CACHE["table"]
    if p.suffix == ".arrow":            # the columnar store: columns, no Record per request
        from analysis.contract.columnar_table import ArrowTable
        table = ArrowTable(p)
        _CACHE.update(key=key, table=table)
        return table
    name = p.name
    records = RecordList()
    arrays, counts = [], []
    for first, body, last in _lines(p, min(slice_bytes, max(st.st_size, 1 << 16))):
        recs = _decode(first, body, name, last)
        del body
        if not recs:
            continue
        arr, cnt = _parse_chunks(recs, name)
        _set(recs, "chunks", repeat(None))               # the raw JSON goes with its slice
        for k in _SHARED:                                # one str per distinct value, not per line
            vals = list(map(attrgetter(k), recs))
            one = {v: _intern(v) for v in set(vals) if v is not None}
            if one:
                _set(recs, k, map(one.get, vals))
        records.extend(recs)
        arrays.append(arr)
        counts.append(cnt)
    chunks = (np.zeros((0, 2), np.int64) if not arrays else
              arrays[0] if len(arrays) == 1 else np.concatenate(arrays))
    del arrays
    offsets = np.zeros(len(records) + 1, np.int64)
    if counts:
        np.cumsum(np.concatenate(counts), out=offsets[1:])
    bounds = offsets.tolist()                            # each record's view of the one array
    _set(records, "chunks", map(ChunkView, repeat(chunks), bounds[:-1], bounds[1:],
                                range(len(records))))
    del bounds
    table = RecordTable(records, chunks, offsets)
    records.table = table
    _CACHE.update(key=key, table=table)
    return table


def _set(objs: list, name: str, values) -> None:
    """setattr(objs[i], name, values[i]) for each i, iterated in C (no Python loop)."""
    deque(map(setattr, objs, repeat(name), values), maxlen=0)


def as_records(records) -> RecordList:
    """``records`` (Records or JSON dicts, in order) as a RecordList with its table: the list
    itself when it is one (read_table's, or a selection of it), else a new one over the same
    Records (dicts read as Records) and a table built from them."""
    if isinstance(records, RecordList) and records.table is not None \
            and len(records) == len(records.table.records):
        return records
    out = RecordList(map(as_record, records))
    out.table = _DictTable(out)
    return out


def table_of(records) -> RecordTable:
    """The RecordTable over ``records`` (as_records(records).table)."""
    return as_records(records).table


class _DictTable(RecordTable):
    """A table over Records not read by read_table (as_records: JSON dicts of a test, Records
    gathered by hand); its chunk arrays are built only when asked for."""

    def __init__(self, records: list):
        self.records = records
        self._cols = {}

    @cached_property
    def _chunks(self) -> tuple[np.ndarray, np.ndarray]:
        views = self._values("chunks")
        if views and all(isinstance(v, ChunkView) for v in views):   # read Records: no copy
            counts = np.array([len(v) for v in views], dtype=np.int64)
            flat = np.concatenate([v.array() for v in views]).reshape(-1, 2)
        else:
            pairs = [list(v or ()) for v in views]
            counts = np.array([len(p) for p in pairs], dtype=np.int64)
            flat = np.array([c for p in pairs for c in p], dtype=np.int64).reshape(-1, 2)
        offsets = np.zeros(len(self.records) + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        return flat, offsets

    @property
    def t(self) -> np.ndarray:
        return self._chunks[0][:, 0]

    @property
    def n(self) -> np.ndarray:
        return self._chunks[0][:, 1]

    @property
    def offsets(self) -> np.ndarray:
        return self._chunks[1]


def read_records(path: str | Path) -> RecordList:
    """records.jsonl as Records (read_table(path).records). The list is the table's: select
    from it (analysis.metrics.measured, ...), do not append to or reorder it."""
    return read_table(path).records


def records_of(run_dir: str | Path, name: str = "records.jsonl") -> Optional[RecordTable]:
    """run_dir/``name`` as a RecordTable, None when absent (records.jsonl: else records.arrow)."""
    p = Path(run_dir) / name
    p = Path(run_dir) / "records.arrow" if name == "records.jsonl" and not p.is_file() else p
    return read_table(p) if p.is_file() else None


_CACHE: dict = {}
