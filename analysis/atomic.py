"""The one way a run file is written after the load: whole, or not at all.

    text / bytes ─► write_text / write_bytes(path, data)
        temp file in the same directory ─► write ─► flush ─► fsync ─► os.replace(temp, path)
        a reader (or a crash, a full disk, a file-size limit) sees the old file or the new one,
        never a torn one; on failure the temp file is removed and StorageError is raised
    StorageError (an OSError; ``str()`` is one line naming the file and the cause) ─► the CLI
        prints it and exits 1 (loadgen/cli.py); STORAGE_ERRNOS: the errors that say the disk,
        not loadgen, failed (ENOSPC, EDQUOT, EIO, EROFS, EFBIG, EACCES, EPERM)

Used by the reports (analysis/report), summary.json (analysis.metrics.summary) and loadgen's own
JSON files (loadgen.run.storage.atomic_write_text, which redacts secrets first). Pure I/O; imports
nothing of loadgen.
"""
from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path
from typing import Optional

STORAGE_ERRNOS = frozenset(getattr(errno, n) for n in (
    "ENOSPC", "EDQUOT", "EIO", "EROFS", "EFBIG", "EACCES", "EPERM") if hasattr(errno, n))


class StorageError(OSError):
    """A run file could not be written; ``str()`` is one line for the user."""

    def __str__(self) -> str:                  # StorageError(errno, message) or (message)
        return str(self.strerror or (self.args[0] if self.args else "storage error"))


def why(e: BaseException) -> str:
    """An OSError's cause in a few words ("File too large"), else its type's name."""
    return getattr(e, "strerror", None) or type(e).__name__


def write_bytes(path: str | Path, data: bytes) -> Path:
    """``data`` into ``path`` atomically (module docstring); StorageError naming ``path``."""
    p = Path(path)
    tmp: Optional[str] = None
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
        tmp = None
    except OSError as e:
        raise StorageError(e.errno, f"{p}: could not be written ({why(e)})") from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return p


def write_text(path: str | Path, text: str) -> Path:
    """``text`` (UTF-8) into ``path`` atomically; StorageError naming ``path``."""
    return write_bytes(path, text.encode("utf-8"))
