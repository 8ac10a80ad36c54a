"""The records of a run as arrays: RecordTable (Records + one flat chunk array + numpy columns,
cached), a selection of it (_SubTable: gathered by index), and ChunkView (a record's chunks as
a read-only view of the flat array). Built by analysis.contract.records.read_table (records.jsonl)
and, as columnar_table.ArrowTable, from records.arrow.

    RecordTable: .records (a RecordList), .t / .n (every chunk's arrival_ns / n_tokens),
                 .offsets (record i's chunks are t[offsets[i]:offsets[i+1]]),
                 .column(name, dtype) / .stamp(name) (a field as an array), .select(mask)
"""
from __future__ import annotations

from functools import cached_property
from operator import attrgetter

import numpy as np

from analysis.contract.record import Record
from analysis.contract.record_in import RecordList


class ChunkView:
    """A record's chunks as a read-only sequence of ``[arrival_ns, n_tokens]`` lists (what the
    JSON line held), backed by its slice's (n, 2) array."""
    __slots__ = ("_a", "_lo", "_hi", "_i")

    def __init__(self, a: np.ndarray, lo: int, hi: int, i: int = -1):
        self._a, self._lo, self._hi, self._i = a, lo, hi, i      # _i: the record's index

    def __len__(self) -> int:
        return self._hi - self._lo

    def __bool__(self) -> bool:
        return self._hi > self._lo

    def __iter__(self):
        return iter(self._a[self._lo:self._hi].tolist())

    def __getitem__(self, i):
        return self._a[self._lo:self._hi].tolist()[i]

    def __eq__(self, other) -> bool:
        try:
            return [list(c) for c in self] == [list(c) for c in other]
        except TypeError:
            return NotImplemented

    def array(self) -> np.ndarray:
        return self._a[self._lo:self._hi]

    def __repr__(self) -> str:
        return repr(list(self))


class RecordTable:
    """A records file as Records and arrays (see the module docstring)."""

    def __init__(self, records: list[Record], chunks: np.ndarray, offsets: np.ndarray):
        self.records = records
        self.t = chunks[:, 0]
        self.n = chunks[:, 1]
        self.offsets = offsets
        self._cols: dict[str, np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.records)

    def _values(self, name: str) -> list:
        """Field ``name`` of every record, in order (a subclass may hold dicts)."""
        return list(map(attrgetter(name), self.records))

    def column(self, name: str, dtype=object) -> np.ndarray:
        """Field ``name`` of every record as an array (cached). ``float``: None ─► NaN."""
        key = f"{name}:{np.dtype(dtype).str}"
        if key not in self._cols:
            vals = self._values(name)
            if dtype is float:
                self._cols[key] = np.array(vals if None not in vals else
                                           [np.nan if v is None else v for v in vals], float)
            else:
                a = np.empty(len(vals), dtype=object)
                a[:] = vals
                self._cols[key] = a
        return self._cols[key]

    def stamp(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """A ``*_at_ns`` field as (int64 values, present mask); absent values are 0."""
        key = f"{name}:ns"
        if key not in self._cols:
            vals = self._values(name)
            nones = vals.count(None)
            if not nones or nones == len(vals):      # all there, or none: one C conversion
                self._cols[key] = np.array(vals, dtype=np.int64).reshape(len(vals)) \
                    if not nones else np.zeros(len(vals), np.int64)
                self._cols[key + ":ok"] = np.full(len(vals), not nones, bool)
            else:
                self._cols[key + ":ok"] = np.fromiter((v is not None for v in vals), bool,
                                                      count=len(vals))
                self._cols[key] = np.fromiter((v or 0 for v in vals), np.int64, count=len(vals))
        return self._cols[key], self._cols[key + ":ok"]

    def record_of_chunk(self) -> np.ndarray:
        """For each chunk, the index of its record (cached)."""
        own = self.__dict__.get("_owner")
        if own is None:
            own = self._owner = np.repeat(np.arange(len(self.records), dtype=np.int32),
                                          np.diff(self.offsets))
        return own

    def select(self, mask: np.ndarray) -> "RecordTable":
        """The records where ``mask`` holds, as a table over this one's arrays (its records a
        RecordList holding it)."""
        return _SubTable(self, np.flatnonzero(mask))


class _SubTable(RecordTable):
    """Some records of a table (a selection): its columns and chunks gathered by index."""

    def __init__(self, parent: RecordTable, idx: np.ndarray):
        self.parent, self.idx = parent, idx
        self.records = RecordList(map(parent.records.__getitem__, idx.tolist()), self)
        self._cols = {}

    def select(self, mask: np.ndarray) -> "RecordTable":
        return _SubTable(self.parent, self.idx[np.flatnonzero(mask)])   # over the one parent

    def mask(self) -> np.ndarray:
        """Which of the parent's records this selection holds."""
        out = np.zeros(len(self.parent), bool)
        out[self.idx] = True
        return out

    @cached_property
    def _chunks(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        parent, idx = self.parent, self.idx
        counts = np.diff(parent.offsets)[idx]
        offsets = np.zeros(idx.size + 1, np.int64)
        np.cumsum(counts, out=offsets[1:])
        pos = np.repeat(parent.offsets[:-1][idx] - offsets[:-1], counts) + \
            np.arange(int(offsets[-1]))
        return parent.t[pos], parent.n[pos], offsets

    t = property(lambda self: self._chunks[0])
    n = property(lambda self: self._chunks[1])
    offsets = property(lambda self: self._chunks[2])

    def column(self, name: str, dtype=object) -> np.ndarray:
        return self.parent.column(name, dtype)[self.idx]

    def stamp(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        v, ok = self.parent.stamp(name)
        return v[self.idx], ok[self.idx]


