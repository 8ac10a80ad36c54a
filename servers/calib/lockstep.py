"""Lockstep decoding: a continuous-batching server's decode loop, one global step clock.

    DecodeClock(itl_ns): ticks on a fixed grid epoch + k*itl_ns (epoch = the first join)
        join(stream, first_token_ns) ─► pending until the first tick at or after first_token_ns
        each tick ─► the next content chunk of EVERY running stream, written back to back
        a tick that wakes late runs at once and the grid skips the missed ticks (a slow step)
        every tick logged as [k, planned_ns, start_ns, end_ns, streams] ─► GET /calib/clock
"""
from __future__ import annotations

import asyncio
import collections
from typing import Optional

from servers.calib.chunks import Builder, now_ns


async def sleep_until(deadline_ns: int) -> None:
    d = deadline_ns - now_ns()
    if d > 0:
        await asyncio.sleep(d / 1e9)


class Stream:
    """One lockstep response: what the clock writes for it, tick by tick."""

    __slots__ = ("resp", "b", "n_chunks", "k", "j", "start_k", "reasoning", "continuous", "log",
                 "fut", "dead")

    def __init__(self, resp, b: Builder, n_chunks: int, reasoning: int, continuous: bool,
                 log: list, fut: asyncio.Future):
        self.resp, self.b, self.n_chunks, self.k = resp, b, n_chunks, b.k
        self.reasoning, self.continuous, self.log, self.fut = reasoning, continuous, log, fut
        self.j, self.start_k, self.dead = 0, 0, False


class DecodeClock:
    """One step every ``itl_ns`` on a fixed grid; each step writes the next content chunk of every
    running stream back to back. Runs only while streams wait or run; the grid stays."""

    def __init__(self, itl_ns: int, stats_max: int = 200_000):
        self.itl = int(itl_ns)
        self.epoch: Optional[int] = None
        self.k_next = 0                          # the next grid tick that may run
        self.pending: list[Stream] = []          # joined, first tick not reached yet
        self.running: list[Stream] = []
        self.task: Optional[asyncio.Task] = None
        self.ticks: collections.deque = collections.deque(maxlen=stats_max)

    def tick_at_or_after(self, t_ns: int) -> int:
        return max(0, -(-(t_ns - self.epoch) // self.itl))

    def join(self, s: Stream, first_token_ns: int) -> None:
        if self.epoch is None:
            self.epoch = now_ns()
        s.start_k = self.tick_at_or_after(first_token_ns)
        self.pending.append(s)
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while self.pending or self.running:
            k = self.k_next
            if not self.running:                 # idle: sleep to the first waiting stream's tick
                k = max(k, min(s.start_k for s in self.pending))
            planned = self.epoch + k * self.itl
            await sleep_until(planned)
            start = now_ns()
            if self.pending:
                still = []
                for s in self.pending:
                    (self.running if s.start_k <= k else still).append(s)
                self.pending = still
            n = 0
            for s in self.running:
                if s.dead:
                    continue
                n += 1
                await self._write(s)
            self.running = [s for s in self.running if not s.dead]
            end = now_ns()
            self.ticks.append([k, planned, start, end, n])
            self.k_next = max(k + 1, self.tick_at_or_after(end))   # late step: skip missed ticks

    @staticmethod
    async def _write(s: Stream) -> None:
        j = s.j
        last = j == s.n_chunks - 1
        data = s.b.content("length" if last else None, j < s.reasoning,
                           (j + 1) * s.k if s.continuous else None)
        s.log.append([now_ns(), s.k])
        try:
            await s.resp.write(data)
        except (ConnectionError, RuntimeError) as e:
            s.dead = True
            if not s.fut.done():
                s.fut.set_exception(ConnectionResetError(str(e)))
            return
        s.j = j + 1
        if last:
            s.dead = True
            if not s.fut.done():
                s.fut.set_result(None)

    def describe(self, clear: bool = False) -> dict:
        out = {"itl_ns": self.itl, "epoch_ns": self.epoch, "running": len(self.running),
               "pending": len(self.pending), "ticks": list(self.ticks)}
        if clear:
            self.ticks.clear()
        return out
