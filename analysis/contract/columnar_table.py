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
from analysis.contract.columnar_pieces import (WIDE, _Field, _Text, _TEXT, _Wide, _bits,
                                              _groups, _lean, _narrow, _release, _str_dtype,
                                              _valid)


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
        _lean()
        counts, ns = [], []                            # first the chunk counts and n_tokens
        for b in batches(self.path, pa.ipc.IpcReadOptions(
                included_fields=[SCHEMA.get_field_index("chunks_n")])):
            cn = b.column(0)
            counts.append(np.diff(_np(cn.offsets, np.int32)))
            ns.append(_narrow(_np(cn.flatten(), np.int64), np.int16))
        n = sum(map(len, counts))
        self.offsets = np.zeros(n + 1, np.int64)
        np.cumsum(np.concatenate(counts) if counts else [], out=self.offsets[1:])
        self.n = np.concatenate(ns) if ns else np.zeros(0, np.int32)
        del counts, ns
        self.t = np.empty(len(self.n), np.int64)      # every chunk's arrival_ns, filled below
        fields = {f: _Field() for f in SCHEMA.names[2:]}
        words: dict[str, dict] = {f: {} for f in _TEXT}     # text: the run's distinct values
        wide: set[str] = set()                         # text of a value a record: presence only
        read = 0
        for lo, g in _groups(self.path, n):            # then every column, a group at a time
            k = g.num_rows
            self.t[self.offsets[lo]:self.offsets[lo + k]] = _np(
                g.column("chunks_t").combine_chunks().flatten(), np.int64)
            for f, got in fields.items():
                a = g.column(f)
                if a.null_count == k:
                    continue
                a = a.combine_chunks()
                ok = _valid(a) if a.null_count else None
                if f in wide or (f in _TEXT and not got.pieces and
                                 pc.count_distinct(a).as_py() > WIDE * k):
                    wide.add(f)
                    got.add(lo, np.ones(k, bool) if ok is None else ok, None)
                    continue
                v = self._decode(a, f, words.get(f))
                if v.dtype.kind == "i" and not f.endswith("_ns") and f not in _TEXT:
                    v = _narrow(v)                     # counts: the narrowest type that holds them
                got.add(lo, v, ok)
            read = lo + k
        if read < n:                                   # fewer than counted (truncated since)
            self.offsets = self.offsets[:read + 1]
            self.t, self.n = self.t[:self.offsets[-1]], self.n[:self.offsets[-1]]
        self._len = n = read
        if not self.n.size:
            self.n = self.n.astype(np.int32)
        self._raw: dict[str, object] = {f: self._join(f, fields.pop(f), n, words.get(f), wide)
                                        for f in list(fields)}
        self._alias_stamps()
        _release()
        self._cols: dict[str, object] = {}
        self.records = LazyRecords(self, None)

    def __len__(self) -> int:
        return self._len

    def _alias_stamps(self) -> None:
        """A stamp column equal to an earlier one (first_chunk_at = first_token_at =
        first_answer_at when every first chunk carries a token) is held once, read-only."""
        kept: list = []
        for f, got in self._raw.items():
            if not f.endswith("_ns") or got is None or isinstance(got, _Wide):
                continue
            v, ok = got
            v.flags.writeable = False
            for w, wok in kept:
                if (ok is None) == (wok is None) and (ok is None or np.array_equal(ok, wok)) \
                        and np.array_equal(v, w):
                    self._raw[f] = (w, wok)
                    break
            else:
                kept.append(got)

    def _join(self, name: str, got: _Field, n: int, one: Optional[dict], wide: set):
        """A field as (values, present mask or None: all there), or None: no value at all;
        text as codes into its words (None last); a wide text left in the file (_Wide)."""
        if not got.pieces:
            return None
        if name in wide:                               # its pieces: which records have one
            present = got.join(n, False)[0]
            return _Wide(self.path, name, None if present.all() else present)
        sample = got.pieces[0][1]
        fill = -1 if one is not None else None if sample.dtype == object else 0
        v, ok = got.join(n, fill)
        if one is not None:
            w = np.empty(len(one) + 1, object)
            w[:-1] = list(one)
            w[-1] = None
            v[v < 0] = len(one)
            v = _Text(w, v.astype(np.uint8 if len(one) < 255 else np.int32))
        return v, ok

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
        """Field ``name`` of every record: ``float`` with None as NaN (made anew from the narrow
        column each time: cheap, and not held), else objects (None where absent; cached), as
        RecordTable.column."""
        if dtype is float:
            return self._column(name, float)
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
        if ok is None and vals.dtype.kind in "bf":     # bools / floats, none absent: the
            return vals[sel]                 # dtype pandas infers from their list
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
