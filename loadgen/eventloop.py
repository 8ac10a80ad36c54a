"""The event loop the native engine runs on: uvloop where installed, else asyncio's own.

uvloop (libuv) roughly halves the per-read cost of a streamed chunk, which is what bounds how many
concurrent streams one client core can stamp on time. ``LOADGEN_EVENT_LOOP=asyncio`` forces the
standard loop (to compare, or to rule uvloop out). ``loop_name()`` goes into meta.json.
"""
from __future__ import annotations

import asyncio
import os
from typing import Any, Coroutine


def _uvloop():
    if os.environ.get("LOADGEN_EVENT_LOOP", "").lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop


def loop_name() -> str:
    mod = _uvloop()
    return f"uvloop {mod.__version__}" if mod else "asyncio"


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """asyncio.run on the chosen loop."""
    mod = _uvloop()
    if mod is None or not hasattr(asyncio, "Runner"):  # Runner: Python 3.11+
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=mod.new_event_loop) as runner:
        return runner.run(coro)
