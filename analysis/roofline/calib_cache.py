"""This host's calibration cache (``~/.cache/loadgen/calibration.json``), shared by every process.

    lock(path)         an exclusive fcntl.flock on ``path`` + ".lock" (a bounded wait, then
                       CacheBusy): runs that end together take turns deciding and calibrating,
                       so no run calibrates while another one's copy loop shares the host
    save(spec, path)   under the lock: ``meta["cache"]`` = {version (previous + 1), saved_at,
                       saved_by_pid, host, path}; written to a temporary file and os.replace'd, so a
                       reader sees the old file or the new one, never half of one
    provenance(spec)   what a run's device.json records of the calibration it used: path,
                       version, when and by which pid it was saved, when measured, the host's load
                       then (busy or not, and why)

Issue 29 item 11: the cache was rewritten in place while other runs read it, and a run took
another process's busy-host spec without saying so. Standard library only (fcntl: POSIX; where
it is missing the lock is a no-op and the write still atomic).
"""
from __future__ import annotations

import contextlib
import datetime as _dt
import json
import os
import socket
import tempfile
import time
from pathlib import Path
from typing import Optional

from analysis.contract.device import CacheSave, HostLoad, SpecMeta

try:
    import fcntl
except ImportError:          # not POSIX: no lock, the write is still atomic
    fcntl = None

LOCK_WAIT_S = 600.0          # the longest a run waits for another's calibration (~10-60 s)


class CacheBusy(RuntimeError):
    """Another process held the cache's lock for longer than the wait allowed."""


@contextlib.contextmanager
def lock(path: str | Path, timeout_s: float = LOCK_WAIT_S, poll_s: float = 0.05):
    """Hold the cache's exclusive lock (``path`` + ".lock") inside the block; CacheBusy after
    ``timeout_s`` without it."""
    p = Path(path).expanduser()
    p.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(str(p) + ".lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise CacheBusy(f"{p}: another process held its lock for more than "
                                        f"{timeout_s:g} s") from None
                    time.sleep(poll_s)
        yield p
    finally:
        os.close(fd)             # closing the descriptor releases the lock


def _version(p: Path) -> int:
    try:
        return int(((json.loads(p.read_text(encoding="utf-8")).get("meta") or {})
                    .get("cache") or {}).get("version") or 0)
    except (OSError, ValueError, TypeError, AttributeError):
        return 0


def write_atomic(p: Path, text: str) -> None:
    """``text`` into ``p`` through a temporary file in the same directory and os.replace."""
    fd, tmp = tempfile.mkstemp(prefix=p.name + ".", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save(spec, path: str | Path, locked: bool = False) -> Path:
    """Save a DeviceSpec into the cache at ``path``, versioned and atomically (module docstring);
    ``locked``: the caller already holds lock(path)."""
    p = Path(path).expanduser()
    p.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.nullcontext() if locked else lock(p):
        spec.meta["cache"] = {
            "version": _version(p) + 1, "path": str(p), "saved_by_pid": os.getpid(),
            "saved_on": socket.gethostname(),
            "saved_at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}
        write_atomic(p, json.dumps(spec.to_dict(), indent=2) + "\n")
    return p


def provenance(spec, by_this_run: bool) -> Optional[dict]:
    """device.json ``calibration``: which calibration the run used, or None for a spec that is
    not a calibration (catalogue, spec file)."""
    meta = getattr(spec, "meta", None) or {}
    if "host_load" not in meta and "cache" not in meta:
        return None
    sm = SpecMeta.read(meta)
    cache, load = sm.cache or CacheSave(), sm.host_load or HostLoad()
    return {"by_this_run": by_this_run, "path": cache.path, "version": cache.version,
            "saved_at": cache.saved_at, "saved_by_pid": cache.saved_by_pid,
            "measured_at": sm.date, "measured_on": sm.host,
            "evidence": sm.evidence, "busy": load.busy,
            "busy_reasons": load.reasons, "loadavg_1m": load.loadavg_1m,
            "other_cpus": load.other_cpus, "steal_fraction": load.steal_fraction}
