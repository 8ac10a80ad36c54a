"""The one way a run file is written after the load: whole, or not at all.

    text / bytes ─► write_text / write_bytes(path, data); write_all([(path, data), ...]): all
        temps first, then the renames, so a failed write replaces none of them
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
    return write_all([(path, data)])[0]


def write_all(files: list[tuple[str | Path, bytes]]) -> list[Path]:
    """Several files as one: every temp file written and fsync'd first, then each renamed into
    place; when any write fails, none of them is replaced (all temps removed) and StorageError
    names the file that failed."""
    done: list[tuple[str, Path]] = []          # (temp, final) written whole
    p = Path(".")
    try:
        for path, data in files:
            p = Path(path)
            fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
            done.append((tmp, p))
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        while done:
            tmp, p = done[0]
            os.replace(tmp, p)
            done.pop(0)
    except OSError as e:
        raise StorageError(e.errno, f"{p}: could not be written ({why(e)})") from None
    finally:
        for tmp, _ in done:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return [Path(path) for path, _ in files]


def write_text(path: str | Path, text: str) -> Path:
    """``text`` (UTF-8) into ``path`` atomically; StorageError naming ``path``."""
    return write_bytes(path, text.encode("utf-8"))
