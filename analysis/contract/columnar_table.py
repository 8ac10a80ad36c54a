"""records.arrow as a RecordTable that holds columns, not Records (issue 42: analysis in bounded
memory).

    records.arrow ─► ArrowTable(path)
        .t / .n / .offsets   every chunk's arrival_ns / n_tokens (one (m, 2) int64 array) and
                             each record's span of it, read from the chunks_t / chunks_n columns
        .column(name, dtype) / .stamp(name)
                             ONE field read from the file when first asked (IpcReadOptions'
                             included_fields: the other columns are never decompressed), kept as
                             a numpy array; a column with no value at all is kept as its count
        .records             a LazyRecords: len() and index like a list, but a Record exists only
                             while it is looked at (built a block of BLOCK at a time from the
                             columns, then dropped)
    select(mask) ─► a selection over the same arrays (its .records again a LazyRecords)
Memory: the columns analysis asks for (8 bytes a record each; text as one shared str per
distinct value) and the chunk array (16 bytes a chunk), never a Python object per record. What
the metrics ask for goes through the columns (analysis.metrics.figures.field: a column's
values); a metric that walks the records still works, a block at a time.
"""
from __future__ import annotations

import ctypes
from itertools import repeat
from pathlib import Path
from typing import Iterator, Optional

import msgspec
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.contract.columnar import FIELDS, SCHEMA, _JSON_FIELDS, _np, batches
from analysis.contract.record import Record, ServerTiming
from analysis.contract.record_in import RecordList
from analysis.contract.records import ChunkView, RecordTable

try:
    _LIBC = ctypes.CDLL("libc.so.6")
except OSError:                                 # not Linux / glibc
    _LIBC = None
BLOCK = 4096                     # Records built at once while a LazyRecords is walked
_TIMING = msgspec.json.Decoder(ServerTiming).decode
_LOG = msgspec.json.Decoder(list[tuple[Optional[int], int, Optional[int], Optional[str]]]).decode


def _bits(buf: Optional[pa.Buffer], offset: int, n: int) -> np.ndarray:
    """A little-endian bitmap (validity, or bool values) as n bools; no buffer: all True."""
    if buf is None:
        return np.ones(n, bool)
    return np.unpackbits(np.frombuffer(buf, np.uint8), count=offset + n,
                         bitorder="little")[offset:].astype(bool)


def _valid(a: pa.Array) -> np.ndarray:
    return _bits(a.buffers()[0], a.offset, len(a)) if a.null_count else np.ones(len(a), bool)


def _fits(v: np.ndarray, dtype) -> bool:
    info = np.iinfo(dtype)
    return not v.size or (info.min <= int(v.min()) and int(v.max()) <= info.max)


def _release() -> None:
    """Give freed memory back: arrow's pool keeps its buffers, and glibc the heap pages of
    freed column arrays, otherwise (RSS, not use)."""
    pa.default_memory_pool().release_unused()
    try:
        _LIBC.malloc_trim(0)
    except AttributeError:                      # not glibc
        pass


_TEXT = frozenset(f for f in FIELDS if f != "chunks" and f not in _JSON_FIELDS
                  and SCHEMA.field(f).type == pa.string())


class _Text:
    """A text column as codes into its distinct words (words[-1] is None)."""
    __slots__ = ("words", "codes")

    def __init__(self, words: np.ndarray, codes: np.ndarray):
        self.words, self.codes = words, codes

    def __getitem__(self, sel) -> np.ndarray:
        return self.words[self.codes[sel]]

    def __len__(self) -> int:
        return len(self.codes)


class _Pairs(ChunkView):
    """A record's chunks as ``[arrival_ns, n_tokens]`` lists, from the table's two arrays."""
    __slots__ = ()

    def array(self) -> np.ndarray:
        a = self._a
        return np.column_stack((a.t[self._lo:self._hi], a.n[self._lo:self._hi].astype(np.int64)))

    def __iter__(self):
        return iter(self.array().tolist())

    def __getitem__(self, i):
        return self.array().tolist()[i]


class ArrowTable(RecordTable):
    """A records.arrow file as columns (see the module docstring)."""
    columnar = True

    def __init__(self, path: str | Path):
        self.path = Path(path)
        rows = [b.num_rows for b in batches(self.path, pa.ipc.IpcReadOptions(
            included_fields=[SCHEMA.get_field_index("id")]))]     # the count first: ids only
        self._len = n = sum(rows)
        counts = np.zeros(n, np.int64)
        ts, ns = [], []                                # every chunk's arrival_ns, n_tokens
        vals: dict[str, np.ndarray] = {}               # field ─► its values, filled in place
        oks = {f: np.zeros(n, bool) for f in SCHEMA.names[2:]}
        words: dict[str, dict] = {f: {} for f in _TEXT}     # text: the run's distinct values
        lo = 0
        for b in batches(self.path):                   # then every column, a batch at a time
            k, ct = b.num_rows, b.column("chunks_t")
            if lo + k > n:                             # grew since counted (being written)
                break
            counts[lo:lo + k] = np.diff(_np(ct.offsets, np.int32))
            ts.append(_np(ct.flatten(), np.int64).copy())
            ns.append(_np(b.column("chunks_n").flatten(), np.int64).astype(np.int32))
            for f, ok in oks.items():
                a = b.column(f)
                if a.null_count == k:
                    continue
                v = self._decode(a, f, words.get(f))
                if v.dtype == np.int64 and not f.endswith("_ns"):     # counts: int32 if they fit
                    v = v.astype(np.int32) if _fits(v, np.int32) else v
                got = vals.get(f)
                if got is None:
                    got = vals[f] = np.full(n, -1 if f in _TEXT else None if v.dtype == object
                                            else 0, v.dtype)
                elif got.dtype != v.dtype and got.dtype.itemsize < v.dtype.itemsize:
                    got = vals[f] = got.astype(v.dtype)        # a count past int32: widen
                got[lo:lo + k] = v
                ok[lo:lo + k] = _valid(a)
            lo += k
        if lo < n:                                     # fewer than counted (truncated since)
            self._len = n = lo
            counts = counts[:n]
            vals = {f: v[:n] for f, v in vals.items()}
            oks = {f: ok[:n] for f, ok in oks.items()}
        self.offsets = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=self.offsets[1:])
        del counts
        self.t = np.concatenate(ts) if ts else np.zeros(0, np.int64)
        del ts
        self.n = np.concatenate(ns) if ns else np.zeros(0, np.int32)
        del ns
        m = len(self.t)
        if m and self.n.min() >= -(1 << 15) and self.n.max() < 1 << 15:
            self.n = self.n.astype(np.int16)
        self._raw: dict[str, object] = {f: self._join(f, vals.pop(f, None), oks.pop(f),
                                                      words.get(f)) for f in list(oks)}
        _release()
        self._cols: dict[str, object] = {}
        self.records = LazyRecords(self, None)

    def __len__(self) -> int:
        return self._len

    @staticmethod
    def _join(name: str, v: Optional[np.ndarray], ok: np.ndarray, one: Optional[dict]):
        """A field as (values, present mask or None: all there), or None: no value at all;
        text as codes into its words (None last), counts in the narrowest integer type."""
        if v is None:
            return None
        if one is not None:
            w = np.empty(len(one) + 1, object)
            w[:-1] = list(one)
            w[-1] = None
            v[v < 0] = len(one)
            v = _Text(w, v.astype(np.uint8 if len(one) < 255 else np.int32))
        elif v.dtype.kind == "i" and not name.endswith("_ns") and v.size:
            for t in (np.int8, np.int16, np.int32):        # the narrowest that holds them
                if t(0).itemsize < v.dtype.itemsize and _fits(v, t):
                    v = v.astype(t)
                    break
        return v, (None if ok.all() else ok)

    # ---- one field -----------------------------------------------------------------------
    def raw(self, name: str) -> Optional[tuple[np.ndarray, Optional[np.ndarray]]]:
        """Field ``name`` as (values, present mask or None when every value is there); None
        when no record has a value. Values: narrow integer / float64 / bool arrays, a _Text
        (codes into the distinct texts), or an object array of decoded JSON."""
        return self._raw[name]

    @staticmethod
    def _decode(col: pa.Array, name: str, one: dict) -> np.ndarray:
        """One batch's values of field ``name`` (absent ones: 0 / False / None)."""
        t = col.type
        if name in _JSON_FIELDS:
            dec = _TIMING if name == "server_timing" else (lambda s: [tuple(a) for a in _LOG(s)])
            vals = np.empty(len(col), object)
            vals[:] = [None if v is None else dec(v) for v in col.to_pylist()]
            return vals
        if t == pa.string():                 # codes of the run's distinct texts (-1: none)
            enc = pc.dictionary_encode(col)
            code = np.array([one.setdefault(w, len(one)) for w in enc.dictionary.to_pylist()]
                            + [-1], np.int32)
            idx = np.frombuffer(enc.indices.buffers()[1], np.int32, len(col), 4 * enc.indices.offset)
            return code[np.where(_valid(enc.indices), idx, len(code) - 1)]
        if t == pa.bool_():
            return _bits(col.buffers()[1], col.offset, len(col))
        dtype = np.float64 if t == pa.float64() else np.int64
        return np.frombuffer(col.buffers()[1], dtype, len(col), 8 * col.offset).copy()

    def column(self, name: str, dtype=object) -> np.ndarray:
        """Field ``name`` of every record (cached): ``float`` with None as NaN, else objects
        (None where absent), as RecordTable.column."""
        key = f"{name}:{np.dtype(dtype).str}"
        got = self._cols.get(key)
        if got is None:
            got = self._cols[key] = self._column(name, dtype)
        return got

    def _column(self, name: str, dtype) -> np.ndarray:
        raw = self.raw(name)
        if dtype is float:
            if raw is None:
                return np.full(self._len, np.nan)
            vals, ok = raw
            out = vals.astype(float)
            if ok is not None:
                out[~ok] = np.nan
            return out
        out = np.empty(self._len, object)
        if raw is not None:
            vals, ok = raw
            out[:] = vals[:] if isinstance(vals, _Text) else \
                vals if vals.dtype == object else vals.tolist()
            if ok is not None:
                out[~ok] = None
        return out

    def stamp(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """An integer field as (int64 values, present mask); absent values are 0."""
        raw = self.raw(name)
        if raw is None:
            return np.zeros(self._len, np.int64), np.zeros(self._len, bool)
        vals, ok = raw
        return vals.astype(np.int64, copy=False), (np.ones(self._len, bool) if ok is None else ok)

    def values(self, name: str, lo: int = 0, hi: Optional[int] = None, idx=None) -> list:
        """Field ``name`` of records lo..hi (or of the indices ``idx``) as Python values."""
        raw = self.raw(name)
        n = (hi if hi is not None else self._len) - lo if idx is None else len(idx)
        if raw is None:
            return [None] * n
        vals, ok = raw
        sel = slice(lo, hi) if idx is None else idx
        out = vals[sel].tolist()
        if ok is not None:
            miss = np.flatnonzero(~ok[sel])
            for k in miss.tolist():
                out[k] = None
        return out

    # ---- Records, a block at a time ------------------------------------------------------
    def build(self, idx: np.ndarray) -> list[Record]:
        """The Records at indices ``idx`` (built now; nobody keeps them)."""
        cols = []
        for f in FIELDS:
            if f == "chunks":
                cols.append(map(_Pairs, repeat(self), self.offsets[idx].tolist(),
                                self.offsets[idx + 1].tolist(), idx.tolist()))
            elif f in self._raw and self._raw[f] is None:
                cols.append(repeat(None))
            else:
                cols.append(self.values(f, idx=idx))
        return list(map(Record, *cols))

    def select(self, mask: np.ndarray) -> "RecordTable":
        return _ArrowSub(self, np.flatnonzero(mask))


class _ArrowSub(RecordTable):
    """Some records of an ArrowTable (a selection), over its arrays: ``idx`` a slice when they
    are one run of records (the measured ones after the warm-up: views, nothing copied), else
    their indices."""
    columnar = True

    def __init__(self, parent: ArrowTable, idx: np.ndarray):
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
        return _ArrowSub(self.parent, self._rows()[np.flatnonzero(mask)])

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


class LazyRecords(RecordList):
    """The records of an ArrowTable (or of a selection: ``idx``) as a read-only list whose
    Records are built when looked at (a block of BLOCK while walked) and not kept."""
    __slots__ = ("_src", "_idx")

    def __init__(self, src: ArrowTable, idx, table=None):
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
