"""The selections and the record list of a records.arrow table (columnar_table.ArrowTable):
columns and chunks gathered by index, or viewed where the records are one run; Records built
a block at a time while walked, never kept.

    ArrowTable.select(mask) ─► ArrowSub (.idx: a slice, or indices) ─► .records: LazyRecords
    LazyRecords: len / [i] / [a:b] / iter like a list; append & co. refused (read-only)
"""
from __future__ import annotations

from typing import Iterator

import numpy as np

from analysis.contract.record import Record
from analysis.contract.record_in import RecordList
from analysis.contract.record_table import RecordTable

BLOCK = 4096                     # Records built at once while a LazyRecords is walked


class ArrowSub(RecordTable):
    """Some records of an ArrowTable (a selection), over its arrays: ``idx`` a slice when they
    are one run of records (the measured ones after the warm-up: views, nothing copied), else
    their indices."""
    columnar = True

    def __init__(self, parent, idx: np.ndarray):
        self.parent = parent
        if not idx.size or int(idx[-1]) - int(idx[0]) + 1 == idx.size:
            a = int(idx[0]) if idx.size else 0
            self.idx, rows = slice(a, a + idx.size), range(a, a + idx.size)
        else:
            self.idx = rows = idx
        self._cols = {}
        self.records = LazyRecords(parent, rows, self)

    def _rows(self) -> np.ndarray:
        i = self.idx
        return np.arange(i.start, i.stop, dtype=np.int64) if isinstance(i, slice) else i

    def __len__(self) -> int:
        return len(self.records)

    def select(self, mask: np.ndarray) -> "RecordTable":
        return ArrowSub(self.parent, self._rows()[np.flatnonzero(mask)])

    def mask(self) -> np.ndarray:
        out = np.zeros(len(self.parent), bool)
        out[self.idx] = True
        return out

    def _chunks(self):
        got = self.__dict__.get("_ch")
        if got is None:
            parent, idx = self.parent, self.idx
            if isinstance(idx, slice):                     # one run: views of the parent's
                lo, hi = parent.offsets[idx.start], parent.offsets[idx.stop]
                got = (parent.t[lo:hi], parent.n[lo:hi],
                       parent.offsets[idx.start:idx.stop + 1] - lo)
            else:
                counts = np.diff(parent.offsets)[idx]
                offsets = np.zeros(idx.size + 1, np.int64)
                np.cumsum(counts, out=offsets[1:])
                pos = np.repeat(parent.offsets[:-1][idx] - offsets[:-1], counts) + \
                    np.arange(int(offsets[-1]))
                got = (parent.t[pos], parent.n[pos], offsets)
            self._ch = got
        return got

    t = property(lambda self: self._chunks()[0])
    n = property(lambda self: self._chunks()[1])
    offsets = property(lambda self: self._chunks()[2])

    def column(self, name: str, dtype=object) -> np.ndarray:
        return self.parent.column(name, dtype)[self.idx]

    def stamp(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        v, ok = self.parent.stamp(name)
        return v[self.idx], ok[self.idx]

    def values(self, name: str) -> list:
        i = self.idx
        return self.parent.values(name, i.start, i.stop) if isinstance(i, slice) else \
            self.parent.values(name, idx=i)

    _values = values

    def frame_column(self, name: str, integer: bool) -> np.ndarray:
        return self.parent.frame_column(name, integer, self.idx)


class LazyRecords(RecordList):
    """The records of an ArrowTable (or of a selection: ``idx``) as a read-only list whose
    Records are built when looked at (a block of BLOCK while walked) and not kept."""
    __slots__ = ("_src", "_idx")

    def __init__(self, src, idx, table=None):
        super().__init__((), table if table is not None else src)
        self._src, self._idx = src, idx

    def _index(self) -> np.ndarray:
        i = self._idx
        return np.arange(len(self._src), dtype=np.int64) if i is None else \
            np.arange(i.start, i.stop, dtype=np.int64) if isinstance(i, range) else i

    def __len__(self) -> int:
        return len(self._src) if self._idx is None else len(self._idx)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __iter__(self) -> Iterator[Record]:
        n = len(self)
        for lo in range(0, n, BLOCK):
            idx = np.arange(lo, min(n, lo + BLOCK), dtype=np.int64) if self._idx is None \
                else np.asarray(self._idx[lo:lo + BLOCK], np.int64)
            yield from self._src.build(idx)

    def __reversed__(self):
        return reversed(list(self))

    def __getitem__(self, i):
        if isinstance(i, slice):
            return LazyRecords(self._src, self._index()[i])
        n = len(self)
        if not -n <= i < n:
            raise IndexError("record index out of range")
        i = i + n if i < 0 else i
        k = i if self._idx is None else int(self._idx[i])
        return self._src.build(np.array([k], np.int64))[0]

    def __eq__(self, other) -> bool:
        return list(self) == list(other)

    __hash__ = None

    def _no(self, *a, **k):
        raise TypeError("the records of a run are read-only")

    append = extend = insert = remove = pop = clear = sort = reverse = __setitem__ = \
        __delitem__ = __iadd__ = _no
