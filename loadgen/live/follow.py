"""Follow a run directory's records as they are written: each record once, as a dict.

    run_dir/records.jsonl            one process: the Ledger appends a line per finished request
    run_dir/procs/records.K.jsonl    client.processes > 1: each sender's part, during the run;
                                     merged into records.jsonl (appended) at the end, then deleted
    run_dir/locust/records.worker-i.jsonl   --engine locust: each worker's ledger (on the
                                     master's clock), merged into records.jsonl at the end
        (output.records: arrow: the same files as .arrow, and run_dir/records.arrow)
        ─► Tail per file (offset, partial last line kept, truncation or replacement: from 0;
           an .arrow file: ArrowTail, a record batch at a time, each row as its line's dict)
        ─► each id once per run (a bitmap: the merged file repeats the parts' records)
        ─► new record dicts, in file order

A line that is not a JSON object (torn by a crash, a bug) is skipped and counted in ``skipped``.
Reads are bounded per poll (MAX_READ bytes a file), so a big backlog is caught up over polls.
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Optional

MAX_READ = 8 << 20
MAX_ID = 1 << 31            # larger ids (never written by loadgen) are counted, not deduplicated


class Tail:
    """One growing file, read from where the last read stopped."""

    def __init__(self, path: Path):
        self.path = path
        self.f = None
        self.ino: Optional[int] = None
        self.offset = 0
        self.partial = b""
        self.gone = False
        self.bytes_read = 0

    def _open(self) -> bool:
        try:
            self.f = open(self.path, "rb")
        except OSError:
            return False
        self.ino, self.offset, self.partial = os.fstat(self.f.fileno()).st_ino, 0, b""
        return True

    def read_lines(self) -> list[bytes]:
        """Whole new lines (a last line without its newline waits for the next read)."""
        try:
            st = os.stat(self.path)
        except OSError:
            st = None
        if self.f is None:
            if st is None or not self._open():
                self.gone = st is None          # listed again by the follower once it exists
                return []
        if st is not None and st.st_ino == self.ino and st.st_size >= self.offset:
            return self._read()
        lines = self._drain()                   # deleted or replaced: the rest of the old one
        self.close()
        if st is None:
            self.gone = True
        elif self._open():                      # replaced, or cut short: read again from 0
            lines += self._read()
        return lines

    def _drain(self) -> list[bytes]:
        out: list[bytes] = []
        while True:
            got = self._read()
            if not got and self.f.tell() >= os.fstat(self.f.fileno()).st_size:
                return out
            out += got

    def _read(self) -> list[bytes]:
        self.f.seek(self.offset)
        data = self.f.read(MAX_READ)
        if not data:
            return []
        self.offset += len(data)
        self.bytes_read += len(data)
        *lines, self.partial = (self.partial + data).split(b"\n")
        return lines

    def close(self) -> None:
        if self.f is not None:
            with contextlib.suppress(OSError):
                self.f.close()
            self.f = None


class ArrowTail:
    """A records.arrow part or store (output.records: arrow) as Tail: its new record batches
    (analysis.contract.columnar_parts.Tail, a message at a time) as record dicts."""

    def __init__(self, path: Path):
        from analysis.contract.columnar_parts import Tail as BatchTail   # pyarrow: if asked
        self.path, self._t, self.gone, self.bytes_read = path, BatchTail(path), False, 0

    def read_lines(self) -> list[dict]:
        from analysis.contract.columnar_parts import rows
        out = [r for b in self._t.poll() for r in rows(b)]
        self.bytes_read, self.gone = self._t.pos, not self.path.exists()
        return out

    def close(self) -> None:
        pass


class RecordFollower:
    """``poll()`` ─► the records written since the last poll, each id once."""

    def __init__(self, run_dir: str | Path):
        self.dir = Path(run_dir)
        self.tails: dict[Path, Tail] = {}
        self.seen = bytearray()
        self.records = 0
        self.skipped = 0
        self.moved = False      # the last poll read bytes (a backlog may remain)

    def _paths(self) -> list[Path]:
        """The senders' parts and the run's store, records.jsonl (there or not) then the same
        files as .arrow (output.records: arrow; those there now)."""
        out = []
        for ext in ("jsonl", "arrow"):
            if (self.dir / "procs").is_dir():   # --procs N: each sender's part
                out += sorted(self.dir.glob(f"procs/records.*.{ext}"))
            if (self.dir / "locust").is_dir():  # --engine locust: the workers' ledgers
                out += sorted(self.dir.glob(f"locust/records.worker-*.{ext}"))
            store = self.dir / f"records.{ext}"
            out += [store] if ext == "jsonl" or store.is_file() else []
        return out

    def _first_time(self, rid) -> bool:
        if not isinstance(rid, int) or isinstance(rid, bool) or not 0 <= rid < MAX_ID:
            return True
        byte, bit = divmod(rid, 8)
        if byte >= len(self.seen):
            self.seen.extend(bytes(byte + 1 - len(self.seen) + 4096))
        if self.seen[byte] >> bit & 1:
            return False
        self.seen[byte] |= 1 << bit
        return True

    def poll(self) -> list[dict]:
        out: list[dict] = []
        self.moved = False
        for p in self._paths():
            if p not in self.tails:
                self.tails[p] = ArrowTail(p) if p.suffix == ".arrow" else Tail(p)
        for p, tail in list(self.tails.items()):
            before = tail.bytes_read
            lines = tail.read_lines()
            self.moved = self.moved or tail.bytes_read != before
            for line in lines:
                if isinstance(line, dict):                # a records.arrow row (ArrowTail)
                    rec = line
                elif not line.strip():
                    continue
                else:
                    try:
                        rec = json.loads(line)
                    except ValueError:
                        rec = None
                if not isinstance(rec, dict):
                    self.skipped += 1
                elif self._first_time(rec.get("id")):
                    self.records += 1
                    out.append(rec)
            if tail.gone:
                del self.tails[p]
        return out

    def close(self) -> None:
        for t in self.tails.values():
            t.close()
        self.tails.clear()
