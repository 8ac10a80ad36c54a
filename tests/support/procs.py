"""Process helpers for the tests that start and stop servers."""
from __future__ import annotations

import os


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie, which still answers kill(0), is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"
