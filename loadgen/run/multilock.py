"""The directory locks: a run directory's (loadgen/run/rundir.py claim()) and a multi-run
directory's (a sweep, a search, a ``--repeat`` series): one process at a time, both through ``lock``.

    lock(d, target, flags, busy) ─► d made if absent ─► target opened, flock(LOCK_EX | LOCK_NB)
        taken   ─► the open fd (closing it, or the process's end, kill -9 included, frees it)
        refused ─► ScenarioError, one line: "output.run_name: D is in use by another loadgen "
                   + busy() (who holds it), exit 2; cannot create ─► the same, naming target
    hold(dir, what) ─► lock(dir, dir/.loadgen.lock) ─► "<pid> <what>" written into the file (a
        stale file is simply taken over); refused: the holder's pid read from the file
A run directory is locked on the directory itself; a multi-run directory holds run directories
(each claimed by its own run), so its lock is a file whose text names who holds it.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Callable

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


def lock(d: Path, target: Path, flags: int, busy: Callable[[], str]) -> int:
    """Take ``target`` (``d`` itself or a file in it, opened with ``flags``) for this process;
    returns the fd that holds it. ``busy()``: who holds it, for the one-line refusal."""
    try:
        d.mkdir(parents=True, exist_ok=True)
        fd = os.open(target, flags | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise ScenarioError(f"output.run_name: cannot create {target} "
                            f"({e.strerror or type(e).__name__})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise ScenarioError(f"output.run_name: {d} is in use by another loadgen {busy()}") from None
    return fd


def hold(d: Path, what: str) -> int:
    """Take ``d`` for this process (``what``: sweep, search, repeat); returns the fd to release."""
    d = Path(d)
    path = d / LOCK_NAME
    fd = lock(d, path, os.O_RDWR | os.O_CREAT,
              lambda: f"{_holder(path)}; wait for it to end or choose another output.run_name")
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
