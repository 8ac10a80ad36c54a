"""The senders' parts ─► one records.arrow (output.records: arrow, issue 42): merge.py's rules,
record batch by record batch.

    part K      sender K's records.arrow part (a ColumnarWriter's: a killed process leaves the
                batches it flushed, at most its last second of records is gone) or, for a Locust
                worker on another host, the JSON lines the coordinator wrote for it (part_of)
    owed[K]     as in merge.py: the ids sender K owes a record, each with what its cancelled
                record keeps
        ─► merged across processes in end time order (heapq.merge of the parts' rows, one
           batch of each part held), each id once (the first; later ones counted as duplicates;
           the ids seen: one bit each, idset.IdSet), like merge.merge's lines
        ─► owed ids with no record: "cancelled" records (engine/core/cancelled.py), worker="K",
           after the rest, in owed order
        ─► analysis.contract.columnar_parts.Joiner ─► records.arrow (whole batches of 4,096)
The counts returned are merge.merge's (meta.json). Pure file work, like merge.py.
"""
from __future__ import annotations

import heapq
from pathlib import Path
from typing import Iterable, Iterator, Optional

import msgspec

from analysis.contract.columnar_parts import Joiner, part_rows
from loadgen.engine.core import cancelled as cancelled_mod
from loadgen.engine.core import merge as merge_mod
from loadgen.engine.core.idset import IdSet
from loadgen.record import Record
from loadgen.redact import redact

_RECORD = msgspec.json.Decoder(Record)


def part_of(stem: Path) -> Path:
    """A Locust worker's part in the master's directory: ``stem``.jsonl when the coordinator
    wrote one (a remote worker's forwarded lines: the master's own copy, whole when the master
    ends), else ``stem``.arrow (a local worker's; records.worker-1: the suffix is added)."""
    jsonl = stem.with_name(stem.name + ".jsonl")
    return jsonl if jsonl.is_file() else stem.with_name(stem.name + ".arrow")


def _rows(path: Path, k: int) -> Iterator[tuple]:
    """(end key, k, n, id, batch or None, row or the line's Record) of part ``path``."""
    if path.suffix == ".arrow":
        yield from part_rows(path, k)
        return
    for end, k_, n, rid, line in merge_mod._part_lines(path, k):
        try:
            rec = _RECORD.decode(line)
        except msgspec.DecodeError:
            continue
        yield (end, k_, n, rid, None, rec)


def merge(parts: list[Path], owed: list[Iterable[merge_mod.Owed]], why: list[str],
          out_path: Path, end_ns: Optional[int]) -> dict:
    """Write ``out_path`` (records.arrow) from the parts; merge.merge's arguments and counts."""
    seen = IdSet()
    dup = copied = 0
    by_process = [0] * len(parts)
    made = [0] * len(parts)
    with Joiner(out_path) as out:
        for _end, k, _n, rid, b, i in heapq.merge(*(_rows(Path(p), k)
                                                    for k, p in enumerate(parts))):
            if rid in seen:
                dup += 1
                continue
            seen.add(rid)
            if b is None:
                out.records([i])                 # a JSON line's Record, redacted already
            else:
                out.row(b, i)
            copied += 1
            by_process[k] += 1
        for k, items in enumerate(owed):
            for o in items:
                if o.id in seen:
                    continue
                seen.add(o.id)
                out.records([cancelled_mod.record(o, why[k], str(k), end_ns)], redact)
                made[k] += 1
    return {"records": copied + sum(made), "from_processes": copied,
            "written_by_process": by_process,
            "cancelled_unwritten": sum(made), "cancelled_by_process": made,
            "duplicates_dropped": dup}
