"""The pieces ArrowTable (columnar_table.py) reads records.arrow with (issue 42: analysis in
bounded memory).

    records.arrow ─► _groups(path, n): about GROUP rows at a time (many writer batches at once,
        never past the n rows counted first)
        ─► per field: _Field pieces (values narrowed by _narrow, presence by _valid / _bits)
        ─► _Field.join: one array a field, its pieces freed as they are copied in
    text of one value a record (trace ids) ─► _Wide: presence only, the text left in the file
    _lean() once a process (the system allocator; glibc's big blocks as their own mappings) and
    _release() after a table is read: RSS follows what is in use.
"""
from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Optional

import numpy as np
import pyarrow as pa

from analysis.contract.columnar import FIELDS, SCHEMA, _JSON_FIELDS, batches

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


M_MMAP_THRESHOLD = -3      # glibc's mallopt parameter
_LEAN = False


def _lean() -> None:
    """Once a process that reads a run's columns: arrow's buffers from the system allocator and
    glibc's blocks of 128 KiB and more as their own mappings, so that a freed array goes back
    to the system (mimalloc and glibc's self-raising mmap threshold otherwise keep the freed
    pieces of a big table: ~100 MB at a million requests). RSS then follows what is in use."""
    global _LEAN
    if _LEAN:
        return
    _LEAN = True
    pa.set_memory_pool(pa.system_memory_pool())
    mallopt = getattr(_LIBC, "mallopt", None)
    if mallopt is not None:                     # glibc
        mallopt(M_MMAP_THRESHOLD, 128 << 10)


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


WIDE = 0.5      # a text column with more distinct values than this share of a group's rows
GROUP = 1 << 16  # rows read and converted at once (the writer's batches are a few thousand)


class _Wide:
    """A text column of (nearly) one value a record (trace ids), left in the file: read (that
    column only) when a reader asks for it, never held with the table."""
    __slots__ = ("path", "name", "ok")

    def __init__(self, path: Path, name: str, ok: Optional[np.ndarray]):
        self.path, self.name, self.ok = path, name, ok

    def arrow(self, n: int) -> pa.Array:
        """The column's first n values as one arrow array."""
        opts = pa.ipc.IpcReadOptions(included_fields=[SCHEMA.get_field_index(self.name)])
        parts = [b.column(0) for b in batches(self.path, opts)]
        got = pa.concat_arrays(parts) if parts else pa.nulls(0, pa.string())
        return got[:n]

    def decode(self, n: int) -> tuple[np.ndarray, Optional[np.ndarray]]:
        out = np.empty(n, object)
        out[:] = self.arrow(n).to_pylist()
        return out, (None if self.ok is None else self.ok[:n])


def _groups(path: Path, n: int):
    """(first row, table of about GROUP rows) of the file's first n rows, in order: many
    writer batches converted at once (a column joined into one array only when it has
    values)."""
    pend, rows, lo = [], 0, 0
    for b in batches(path):
        pend.append(b)
        rows += b.num_rows
        if rows >= GROUP or lo + rows >= n:
            g = pa.Table.from_batches(pend)
            g = g.slice(0, n - lo) if lo + rows > n else g     # grew since counted
            yield lo, g
            lo += g.num_rows
            pend, rows = [], 0
            if lo >= n:
                return
    if pend:
        yield lo, pa.Table.from_batches(pend)


def _narrow(v: np.ndarray, least=np.int8) -> np.ndarray:
    """Integers in the narrowest type (from ``least`` up) that holds them."""
    for t in (np.int8, np.int16, np.int32):
        if np.dtype(least).itemsize <= np.dtype(t).itemsize < v.dtype.itemsize and _fits(v, t):
            return v.astype(t)
    return v


class _Field:
    """One field's pieces, a group at a time, joined into one array at the end."""
    __slots__ = ("pieces", "holes")

    def __init__(self):
        self.pieces: list = []          # (first row, values, present mask | None)
        self.holes = False              # a group without a value, or with nulls

    def add(self, lo: int, v: np.ndarray, ok: Optional[np.ndarray]) -> None:
        self.holes |= ok is not None
        self.pieces.append((lo, v, ok))

    def join(self, n: int, fill) -> tuple[np.ndarray, Optional[np.ndarray]]:
        dtype = np.result_type(*[v.dtype for _, v, _ in self.pieces])
        holes = self.holes or sum(len(v) for _, v, _ in self.pieces) < n
        out = np.full(n, fill, dtype) if holes else np.empty(n, dtype)
        ok = np.zeros(n, bool) if holes else None
        while self.pieces:                          # freed piece by piece
            lo, v, got = self.pieces.pop(0)
            out[lo:lo + len(v)] = v
            if ok is not None:
                ok[lo:lo + len(v)] = True if got is None else got
        if ok is not None:
            out[~ok] = fill
        return out, (None if ok is None or ok.all() else ok)
