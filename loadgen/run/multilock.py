"""The lock of a multi-run directory (a sweep, a search, a ``--repeat`` series): one process at a
time, like a run directory (loadgen/run/rundir.py claim()).

    hold(dir, what) ─► dir made if absent ─► dir/.loadgen.lock opened, flock(LOCK_EX | LOCK_NB)
        taken   ─► "<pid> <what>" written into it; the open fd is the lock (release(fd) or the
                   process's end, kill -9 included, frees it: a stale file is simply taken over)
        refused ─► ScenarioError, one line naming the holder's pid (read from the file), exit 2
A run directory is locked on the directory itself; a multi-run directory holds run directories
(each claimed by its own run), so its lock is a file whose text names who holds it.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from loadgen.scenario.model import ScenarioError

LOCK_NAME = ".loadgen.lock"


def _holder(path: Path) -> str:
    try:
        parts = path.read_text(encoding="utf-8", errors="replace").split()
    except OSError:
        parts = []
    pid = parts[0] if parts and parts[0].isdigit() else "?"
    what = parts[1] if len(parts) > 1 else "run"
    return f"{what} (pid {pid})"


def hold(d: Path, what: str) -> int:
    """Take ``d`` for this process (``what``: sweep, search, repeat); returns the fd to release."""
    d = Path(d)
    path = d / LOCK_NAME
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise ScenarioError(f"output.run_name: cannot create {path} "
                            f"({e.strerror or type(e).__name__})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise ScenarioError(f"output.run_name: {d} is in use by another loadgen "
                            f"{_holder(path)}; wait for it to end or choose another "
                            "output.run_name") from None
    with contextlib.suppress(OSError):        # who holds it, for the next one's message
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {what}\n".encode(), 0)
    return fd


def release(fd: int) -> None:
    """End the hold (the lock file stays: the next holder overwrites it)."""
    with contextlib.suppress(OSError):
        os.close(fd)


@contextlib.contextmanager
def held(d: Path, what: str):
    fd = hold(d, what)
    try:
        yield fd
    finally:
        release(fd)
