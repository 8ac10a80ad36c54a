"""records.arrow ⇄ records.jsonl, and records.arrow as a RecordTable (columnar.py's store read
through analysis.contract.records).

    read_table_arrow(path)  records.arrow ─► records.read_table ─► RecordTable
    export_jsonl(path, out) records.arrow ─► a record batch at a time (columnar.read_columns)
                            ─► Record.to_json per record ─► records.jsonl lines (jq, pandas):
                            the bytes the JSONL writer would have written (the strings were
                            redacted on the way into records.arrow); `loadgen export`
    from_jsonl(path, out)   records.jsonl's slices (records.py's reader) ─► records.arrow
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import msgspec
import numpy as np

from analysis.contract.columnar import FIELDS, ColumnarWriter, read_columns
from analysis.contract.record import Record
from analysis.contract.records import SLICE_BYTES, _decode, _lines, read_table


def read_table_arrow(path: str | Path):
    """records.arrow as a RecordTable (whole batches only)."""
    p = Path(path)
    if p.suffix != ".arrow":
        raise ValueError(f"{p}: not a .arrow file")
    return read_table(p)


def export_jsonl(path: str | Path, out: str | Path) -> int:
    """records.arrow ─► ``out`` as records.jsonl lines (one Record.to_json each), one record
    batch at a time (never the whole table); the count."""
    p = Path(path)
    if p.suffix != ".arrow":
        raise ValueError(f"{p}: not a .arrow file")
    at = FIELDS.index("chunks")
    n = 0
    with open(out, "w", encoding="utf-8") as f:
        for cols, arr, cnt in read_columns(p):
            bounds = [0, *np.cumsum(cnt).tolist()]
            pairs = arr.tolist()
            cols[at] = [pairs[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
            del pairs
            f.write("".join(r.to_json() + "\n" for r in map(Record, *cols)))
            n += len(cnt)
    return n


def from_jsonl(path: str | Path, out: str | Path, clean: Optional[Callable] = None) -> int:
    """records.jsonl ─► ``out`` (records.arrow), a slice of lines at a time; the count."""
    chunks = msgspec.json.Decoder(list[tuple[int, int]]).decode
    p = Path(path)
    with ColumnarWriter(out, clean=clean, flush_s=1e9) as w:
        for first, body, last in _lines(p, SLICE_BYTES):
            for r in _decode(first, body, p.name, last):
                r.chunks = chunks(r.chunks)
                w.write(r)
    return w.count
