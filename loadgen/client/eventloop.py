"""The event loop the native engine runs on: asyncio's own, or uvloop on request.

uvloop (libuv) roughly halves the per-read cost of a streamed chunk, which is what bounds how many
concurrent streams one client core can stamp on time (bench/client_capacity.py: TTFT error at 256
streams +0.8 ms mean with uvloop, +7.0 ms with asyncio's loop). It is opt-in,
``LOADGEN_EVENT_LOOP=uvloop`` (``pip install 'loadgen[uvloop]'``), because runs on it were seen to
hang at loop shutdown in this project's test suite (uvloop 0.23, Python 3.11); until that is
understood the default stays asyncio. ``loop_name()`` goes into meta.json.
"""
from __future__ import annotations

import asyncio
import os
from typing import Any, Coroutine


def _uvloop():
    if os.environ.get("LOADGEN_EVENT_LOOP", "asyncio").lower() != "uvloop":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    return uvloop


def loop_name() -> str:
    mod = _uvloop()
    return f"uvloop {mod.__version__}" if mod else "asyncio"


def _cancel_remaining(loop: asyncio.AbstractEventLoop) -> None:
    pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for t in pending:
        t.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """asyncio.run on the chosen loop."""
    mod = _uvloop()
    if mod is None:
        return asyncio.run(coro)
    loop = mod.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(coro)
    finally:
        try:
            _cancel_remaining(loop)
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()
