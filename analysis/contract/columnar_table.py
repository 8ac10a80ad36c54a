"""records.arrow as a RecordTable that holds columns, not Records (issue 42: analysis in bounded
memory).

    records.arrow ─► ArrowTable(path): the ids' column first (the row count), then ONE pass over
        the record batches, a batch at a time (a plain file read: no memory map in the RSS)
        .t / .n / .offsets   every chunk's arrival_ns (int64) / n_tokens (int16 unless one is
                             huge) and each record's span of them (chunks_t / chunks_n)
        .raw(name)           a field as (values, present mask | None), or None when no record
                             has one: stamps (*_ns) int64; counts in the narrowest integer type
                             that holds them (int8 for 4-token answers); text as a _Text, codes
                             into the run's distinct values; JSON text decoded
        .column(name, dtype) / .stamp(name) / .values(name)   as RecordTable's, from raw
        .records             a LazyRecords (columnar_lazy.py): indexes and walks like a list,
                             a Record exists only while it is looked at
    select(mask) ─► columnar_lazy.ArrowSub over the same arrays (a view where one run)
Memory: about 60 bytes a 4-token request (5 stamps, the chunks, a few narrow counts), never a
Python object per record: the metrics ask the columns (analysis.metrics.figures.field,
analysis.contract.sanity); a metric that walks the records still works, a block at a time.
"""
from __future__ import annotations

import ctypes
from itertools import repeat
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from analysis.contract.columnar import FIELDS, SCHEMA, _JSON_FIELDS, _np, _values, batches
from analysis.contract.record import Record
from analysis.contract.columnar_lazy import ArrowSub, LazyRecords
from analysis.contract.record_table import ChunkView, RecordTable

try:
    _LIBC = ctypes.CDLL("libc.so.6")
except OSError:                                 # not Linux / glibc
    _LIBC = None


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


def _str_dtype():
    """pandas' inferred dtype of a column of text (its str dtype from pandas 3; None when it
    keeps objects)."""
    global _STR
    if _STR is False:
        import pandas as pd
        dt = pd.Series(["x", None]).dtype
        _STR = dt if isinstance(dt, pd.StringDtype) else None
    return _STR


_STR = False


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


WIDE = 0.5      # a text column with more distinct values than this share of a batch's rows


class _Wide:
    """A text column of (nearly) one value a record (trace ids): its batches' arrow arrays,
    kept as read (a Python str each only when a reader asks for the column)."""
    __slots__ = ("parts", "ok")

    def __init__(self, parts: list, ok: Optional[np.ndarray]):
        self.parts, self.ok = parts, ok

    def arrow(self, n: int) -> pa.Array:
        """The column as one arrow array of n values (null where a batch had none)."""
        out, at = [], 0
        for lo, a in self.parts:
            if lo > at:
                out.append(pa.nulls(lo - at, pa.string()))
            out.append(a)
            at = lo + len(a)
        if at < n:
            out.append(pa.nulls(n - at, pa.string()))
        return pa.concat_arrays(out)[:n] if out else pa.nulls(n, pa.string())

    def decode(self, n: int) -> tuple[np.ndarray, Optional[np.ndarray]]:
        out = np.full(n, None, object)
        for at, a in self.parts:
            if at < n:
                out[at:at + len(a)] = a.to_pylist()[:n - at]
        return out, (None if self.ok is None else self.ok[:n])


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
        wide: dict[str, list] = {}                     # text of a value a record: (at, arrow)
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
                if f in wide or (f in _TEXT and f not in vals and
                                 pc.count_distinct(a).as_py() > WIDE * k):
                    wide.setdefault(f, []).append((lo, a))     # ids of a kind: kept as arrow
                    ok[lo:lo + k] = _valid(a)
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
        self._raw: dict[str, object] = {
            f: _Wide(wide[f], None if oks[f].all() else oks[f]) if f in wide else
            self._join(f, vals.pop(f, None), oks[f], words.get(f)) for f in list(oks)}
        del oks
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
        got = self._raw[name]
        if isinstance(got, _Wide):                     # decoded the first time it is asked
            got = self._raw[name] = got.decode(self._len)
        return got

    @staticmethod
    def _decode(col: pa.Array, name: str, one: dict) -> np.ndarray:
        """One batch's values of field ``name`` (absent ones: 0 / False / None)."""
        t = col.type
        if name in _JSON_FIELDS:                 # decoded as the batch reader decodes them
            vals = np.empty(len(col), object)
            vals[:] = _values(col, name)
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

    def frame_column(self, name: str, integer: bool, sel=slice(None)):
        """Field ``name`` (of the records ``sel``) as open_run's DataFrame takes it, the JSON
        reader's way: an integer field as int64 (with an absent value: float, NaN), else
        objects (None where absent); a field absent everywhere: objects, all None."""
        got = self._raw[name]
        if isinstance(got, _Wide) and _str_dtype() is not None:   # arrow text, to pandas as is
            import pandas as pd
            arr = got.arrow(self._len)
            arr = arr[sel] if isinstance(sel, slice) else arr.take(pa.array(sel))
            if not arr.null_count < len(arr):
                return np.full(len(arr), None, object)
            return pd.array(arr.cast(pa.large_string()), dtype=_str_dtype())
        raw = self.raw(name)
        n = len(range(self._len)[sel]) if isinstance(sel, slice) else len(sel)
        if raw is None:
            return np.full(n, None, object)
        vals, ok = raw
        ok = None if ok is None else ok[sel]
        if ok is not None and not ok.any():  # none among these: objects, as the JSON's
            return np.full(n, None, object)
        if integer and not isinstance(vals, _Text) and vals.dtype.kind in "iu":
            v = vals[sel]
            if ok is None and (not v.size or int(np.abs(v).max()) < 2 ** 53):
                return v.astype(np.int64)
            out = v.astype(float)            # (as the JSON reader's: NaN where absent)
            if ok is not None:
                out[~ok] = np.nan
            return out
        if isinstance(vals, _Text) and _str_dtype() is not None:   # pandas' str: from arrow
            import pandas as pd
            codes = vals.codes[sel]
            none = len(vals.words) - 1
            arr = pa.DictionaryArray.from_arrays(
                pa.array(codes.astype(np.int32), mask=codes == none),
                pa.array(list(vals.words[:-1]), pa.string())).cast(pa.large_string())
            return pd.array(arr, dtype=_str_dtype())
        out = vals[sel].tolist()             # a list: pandas infers as from the JSON's
        if ok is not None:
            for k in np.flatnonzero(~ok).tolist():
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
        return ArrowSub(self, np.flatnonzero(mask))
