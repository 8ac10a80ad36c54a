"""The senders' part files ─► one records.jsonl with exactly one record per owed request.
The one merge of both engines: --procs (procs/parent.py) and Locust (engine/core/journal.py).

    part K                  sender K's records, each line written whole as its request ended
                            (procs/records.K.jsonl, locust/records.worker-K.jsonl; a killed
                            process leaves at most a torn last line: not counted)
    owed[K]                 ids sender K owes a record: its warm-up ids it started, its whole
                            share of a planned run (offline, server, trace), its closed-loop
                            ids it started (--procs: the Counters say how many; Locust: the
                            send journal), each with what its cancelled record keeps
        ─► lines copied as they are (never parsed whole: only the id and end_at_ns at the
           line's head), merged across processes in end time order, like one process's file
        ─► owed ids with no line: "cancelled" records (engine/core/cancelled.py), error naming
           why (the process died, was stopped, or ended early: ``why[K]``, or the Owed's own),
           worker="K", after the rest
        ─► records.jsonl through storage.LineWriter (whole lines; a full disk: StorageError)

Pure file work: no loop, no processes; the parent calls it once every child has exited.
"""
from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Optional

from loadgen.record import Record
from loadgen.engine.core import cancelled as cancelled_mod
from loadgen.run.storage import LineWriter

BATCH = 1 << 20             # bytes per write of copied lines
_END = b'"end_at_ns":'


@dataclass(frozen=True)
class Owed:
    """A request a process owes a record for (what a cancelled record needs of it)."""
    id: int
    phase: str
    scheduled_at_ns: Optional[int] = None
    max_tokens: Optional[int] = None
    prompt_tokens: Optional[int] = None
    sent_at_ns: Optional[int] = None      # journaled: it was sent (its record never came)
    session_id: Optional[str] = None
    turn: Optional[int] = None
    why: Optional[str] = None             # this request's own reason (else the sender's)


def line_id(line: bytes) -> Optional[int]:
    """The ``id`` of one record line (Record.to_json puts it first); None for a bad line."""
    if line.startswith(b'{"id":'):
        end = line.find(b",", 6)
        try:
            return int(line[6:end])
        except ValueError:
            pass
    try:
        return int(json.loads(line)["id"])
    except (ValueError, KeyError, TypeError):
        return None


def line_end(line: bytes) -> Optional[int]:
    """``end_at_ns`` of a record line (before any free text in Record's field order)."""
    i = line.find(_END)
    if i < 0:
        return None
    j = line.find(b",", i)
    try:
        return int(line[i + len(_END):j])
    except ValueError:
        return None


def _part_lines(path: Path, k: int) -> Iterator[tuple]:
    """(end key, process, n, id, line) of each whole line of ``path``, in file order."""
    try:
        f = open(path, "rb")
    except FileNotFoundError:
        return
    last = 0
    with f:
        for n, line in enumerate(f):
            if not line.endswith(b"\n"):      # torn: the process died writing it
                return
            rid = line_id(line)
            if rid is None:
                continue
            end = line_end(line)
            last = end if end is not None else last
            yield (last, k, n, rid, line)


def cancelled(o: Owed, why: str, end_ns: Optional[int], worker: str) -> Record:
    """The record of an owed request no process wrote (Ledger.cancelled's fields)."""
    return cancelled_mod.record(o, why, worker, end_ns)


def merge(parts: list[Path], owed: list[Iterable[Owed]], why: list[str], out_path: Path,
          end_ns: Optional[int]) -> dict:
    """Write ``out_path`` from the part files; ``owed[k]`` and ``why[k]`` per process.
    Returns the counts for meta.json."""
    seen: set[int] = set()
    dup = copied = 0
    by_process = [0] * len(parts)
    out = LineWriter.open(out_path)
    try:
        buf: list[bytes] = []
        size = 0
        for _end, k, _n, rid, line in heapq.merge(*(_part_lines(p, k)
                                                      for k, p in enumerate(parts))):
            if rid in seen:
                dup += 1
                continue
            seen.add(rid)
            buf.append(line)
            size += len(line)
            copied += 1
            by_process[k] += 1
            if size >= BATCH:
                out.write(b"".join(buf))
                buf, size = [], 0
        if buf:
            out.write(b"".join(buf))
        made = [0] * len(parts)
        for k, items in enumerate(owed):
            lines = []
            make = cancelled_mod.Lines(str(k), end_ns).line     # one template per reason
            for o in items:
                if o.id in seen:
                    continue
                seen.add(o.id)
                lines.append(make(o, why[k]) + "\n")
                made[k] += 1
                if len(lines) >= 4096:
                    out.write("".join(lines).encode("utf-8"))
                    lines = []
            if lines:
                out.write("".join(lines).encode("utf-8"))
    finally:
        out.close()
    return {"records": copied + sum(made), "from_processes": copied,
            "written_by_process": by_process,
            "cancelled_unwritten": sum(made), "cancelled_by_process": made,
            "duplicates_dropped": dup}
