"""Where a run's files go, and how they are written so that a full disk never tears them.

    output.dir ─► check_output_dir()   before anything starts: a directory (made if absent) that
                                       takes a file; else ScenarioError, one line, exit 2
    records.jsonl ─► LineWriter        each line one write() on an unbuffered file; a write that
                                       fails (ENOSPC, EIO, EFBIG...) is cut back to the last whole
                                       line and raises StorageError; every later write refuses
    meta.json, summary.json, sut.json ─► atomic_write_text()   temp file + fsync + os.replace: the
                                       old file or the new one, never half of one (analysis.atomic)
    StorageError ─► the CLI prints one line and exits 1 (the run is not complete on disk)
"""
from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path
from typing import Optional

# StorageError, STORAGE_ERRNOS and the atomic write are analysis.atomic's (the one way a run
# file is written whole); loadgen's own files go through atomic_write_text (secrets redacted)
from analysis.atomic import STORAGE_ERRNOS, StorageError, write_text  # noqa: F401
from analysis.atomic import why as _why
from loadgen.redact import redact
from loadgen.scenario.strict import ScenarioError


def check_output_dir(path: str | Path) -> Path:
    """``output.dir`` exists (or is made) as a directory in which a file can be created."""
    d = Path(path)
    if d.exists() and not d.is_dir():
        raise ScenarioError(f"output.dir: {d} is not a directory")
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ScenarioError(f"output.dir: cannot create {d} ({_why(e)})") from None
    try:
        fd, name = tempfile.mkstemp(prefix=".loadgen-probe-", dir=d)
        os.close(fd)
        os.unlink(name)
    except OSError as e:
        raise ScenarioError(f"output.dir: {d} is not writable ({_why(e)})") from None
    return d


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temp file in the same directory, fsync and os.replace
    (analysis.atomic.write_text), so a reader (or a crash, or a full disk) sees the old file or
    the new one, never a torn one; StorageError when the disk fails."""
    write_text(path, redact(text))      # no secret reaches a run file, whatever echoed it


class LineWriter:
    """Appends whole lines to a binary file object opened without buffering (``write`` may write
    less than asked; ``truncate`` cuts). A failed write leaves the file ending at the last whole
    line and raises StorageError; so does every write after it."""

    def __init__(self, f, name: str = "records.jsonl"):
        self.f, self.name = f, name
        self.size = f.seek(0, os.SEEK_END)
        self.lines = 0
        self.failed: Optional[StorageError] = None

    @classmethod
    def open(cls, path: str | Path) -> "LineWriter":
        try:
            return cls(open(path, "ab", buffering=0), Path(path).name)
        except OSError as e:
            raise StorageError(e.errno, f"{path}: cannot open ({_why(e)})") from None

    def write(self, data: bytes) -> int:
        """Write ``data`` (one or more lines, each ending in a newline); returns the lines kept."""
        if self.failed is not None:
            raise self.failed
        view, done = memoryview(data), 0
        try:
            while done < len(data):
                n = self.f.write(view[done:])
                if not n:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                done += n
        except OSError as e:
            keep = data.rfind(b"\n", 0, done) + 1        # the whole lines that made it
            kept = data.count(b"\n", 0, keep)
            self.size += keep
            self.lines += kept
            try:
                self.f.truncate(self.size)
            except OSError:
                pass
            self.failed = StorageError(
                e.errno, f"{self.name}: write failed ({_why(e)}) after {self.lines} lines; the "
                "file ends at the last whole line")
            raise self.failed from None
        self.size += len(data)
        n = data.count(b"\n")
        self.lines += n
        return n

    def fsync(self) -> None:
        if self.failed is None:
            os.fsync(self.f.fileno())

    def close(self) -> None:
        if not self.f.closed:
            try:
                self.f.close()
            except OSError:
                pass

    @property
    def closed(self) -> bool:
        return self.f.closed
