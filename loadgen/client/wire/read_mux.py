"""Read readiness for all of a pool's sockets, with as little loop machinery per read as possible.

    kind "epoll": the pool's own ``select.epoll``; ONE ``loop.add_reader`` on its fd. When it is
                  readable, one callback polls it (timeout 0) and calls every ready socket's
                  ``on_readable`` in turn: 256 lockstep streams cost one loop callback per step.
    kind "loop":  one ``loop.add_reader`` per socket (also where ``select.epoll`` is missing).

Level-triggered either way: a socket with bytes left after one read comes back on the next turn.
"""
from __future__ import annotations

import asyncio
import select
from typing import Callable, Optional

KINDS = ("epoll", "loop")


class ReadMux:
    """``watch(fd, on_readable)`` / ``unwatch(fd, on_readable)`` between ``open`` and ``close``."""

    def __init__(self, kind: str = "epoll"):
        if kind not in KINDS:
            raise ValueError(f"mux: 'epoll' or 'loop', got {kind!r}")
        self.kind = kind if hasattr(select, "epoll") else "loop"
        self._loop: Optional[asyncio.AbstractEventLoop] = None
        self._ep = None
        self._fdmap: dict = {}                    # fd -> on_readable (its current watcher)

    def open(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        if self.kind == "epoll" and self._ep is None:
            self._ep = select.epoll()
            loop.add_reader(self._ep.fileno(), self._on_epoll)

    def close(self) -> None:
        if self._ep is not None:
            self._loop.remove_reader(self._ep.fileno())
            self._ep.close()
            self._ep = None
            self._fdmap.clear()

    def watch(self, fd: int, on_readable: Callable[[], None]) -> None:
        if self._ep is not None:
            self._fdmap[fd] = on_readable
            self._ep.register(fd, select.EPOLLIN)
        else:
            self._fdmap[fd] = on_readable          # who watches it (unwatch checks)
            self._loop.add_reader(fd, on_readable)

    def unwatch(self, fd: int, on_readable: Callable[[], None]) -> None:
        """Stop watching ``fd`` if ``on_readable`` is what watches it (call before closing it:
        a number reused by a newer socket is never unwatched by the old one's late call)."""
        if self._ep is not None:
            if self._fdmap.get(fd) == on_readable:
                del self._fdmap[fd]
                try:
                    self._ep.unregister(fd)
                except OSError:
                    pass
        elif self._loop is not None and self._fdmap.get(fd) == on_readable:
            del self._fdmap[fd]
            self._loop.remove_reader(fd)

    def _on_epoll(self) -> None:
        """The epoll fd is readable: read every ready socket, in one loop callback."""
        get = self._fdmap.get
        for fd, _ev in self._ep.poll(0):
            cb = get(fd)
            if cb is not None:
                cb()
