"""records.arrow ⇄ records.jsonl, and records.arrow as a RecordTable (columnar.py's store read
through analysis.contract.records).

    read_table_arrow(path)  records.arrow ─► records.read_table ─► RecordTable
    export_jsonl(path, out) records.arrow ─► records.jsonl lines (Record.to_json: jq, pandas)
    from_jsonl(path, out)   records.jsonl's slices (records.py's reader) ─► records.arrow
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import msgspec

from analysis.contract.columnar import ColumnarWriter
from analysis.contract.records import SLICE_BYTES, _decode, _lines, read_table


def read_table_arrow(path: str | Path):
    """records.arrow as a RecordTable (whole batches only)."""
    p = Path(path)
    if p.suffix != ".arrow":
        raise ValueError(f"{p}: not a .arrow file")
    return read_table(p)


def export_jsonl(path: str | Path, out: str | Path) -> int:
    """records.arrow ─► ``out`` as records.jsonl lines (one Record.to_json each); the count."""
    n = 0
    with open(out, "w", encoding="utf-8") as f:
        for rec in read_table_arrow(path).records:
            rec = msgspec.structs.replace(rec, chunks=[list(c) for c in rec.chunks])
            f.write(rec.to_json() + "\n")
            n += 1
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
