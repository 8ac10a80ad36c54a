"""A wire exchange's stamped body pieces ─► the Record, off the stamping path, in bounded slices.

    WireResponse (status, headers, stamped body pieces, the end or the failure)
        ─► fill_steps: settle.py's rules (status, redirect, whole body, the exchange's failure),
           streamed: the pieces through stream_step.StreamStep (the one stream step every
           transport uses: SSE, JSON, tally, Record.chunks [[stamp, n], ...], limits)
    catch_up_steps the same StreamStep over the pieces read SO FAR of a response still in flight,
                   started by the connection when it holds more than ``HOLD_BYTES`` (reading pauses
                   until it is done): memory per response stays bounded whatever the server sends
                   (an endless stream of comments is parsed and dropped, never kept); also run
                   by the pool's sweep (a stream quiet for pool.SWEEP_S, without pausing): one
                   that settled, or had its [DONE], on a socket left open ends its exchange
    RecordFiller   these generators on ONE task, at most ``budget_ns`` of them between two turns
                   of the event loop: 256 lockstep streams that end together are ~200 ms of JSON,
                   which in one go would hold every socket's next read up for 20 decode steps

Both generators consume ``resp.reads`` through one cursor (``resp.consumed``; the catch-up drops
what it consumed before it yields), so a piece is parsed exactly once whoever gets to it.
``coalesced_reads``: reads whose pieces carried more than one token chunk.
"""
from __future__ import annotations

import asyncio
import collections
from typing import Callable, Optional

from loadgen.client.sse import StreamTally
from loadgen.client.stream_step import DEFAULT_LIMITS, Limits, StreamStep, body_too_large
from loadgen.client import settle
from loadgen.client.http1.message import WireResponse
from loadgen.record import Record, now_ns


def fill_record(resp: WireResponse, rec: Record, *, stream: bool, continuous: bool = False,
                want_text: bool = False, workload_prompt_tokens: Optional[int] = None,
                tally: Optional[StreamTally] = None, limits: Limits = DEFAULT_LIMITS) -> StreamTally:
    """Fill ``rec`` from one exchange at once, then ``request.finish``; returns the tally."""
    from loadgen.client.request import finish
    tally = tally if tally is not None else StreamTally(continuous, want_text)
    drive(fill_steps(resp, rec, tally, stream, 0, limits))
    finish(rec, tally, workload_prompt_tokens)
    return tally


def drive(gen) -> None:
    """Run a ``fill_steps`` generator to its end."""
    for _ in gen:
        pass


def is_stream(resp: WireResponse, stream: bool) -> bool:
    """The body is an SSE stream to parse as it comes (a streamed request answered 2xx, not JSON)."""
    return stream and resp.sse_body()


def _step(resp: WireResponse, rec: Record, tally: StreamTally, limits: Limits) -> StreamStep:
    if resp.step is None or resp.step.rec is not rec:     # (a finished response filled anew)
        resp.step = StreamStep(rec, tally, limits, resp.headers.get("content-encoding"))
        resp.consumed = 0
    return resp.step


def _consume(resp: WireResponse, step: StreamStep, every: int, upto: Optional[int] = None,
             drop: bool = False):
    """Feed unconsumed pieces (up to index ``upto`` of the list as it was) to ``step``, yielding
    every ``every`` pieces; ``drop``: consumed pieces are dropped before each yield and at the
    end (a response in flight; a finished one keeps its pieces for the caller). The cursor
    ``resp.consumed`` is current at every yield (another generator may go on from it)."""
    reads, feed_reads = resp.reads, step.feed_reads
    stop = len(reads) if upto is None else upto
    while True:
        i = resp.consumed
        end = min(stop, len(reads))
        if i >= end or step.settled:
            break
        nxt = min(end, i + every) if every else end
        resp.consumed = feed_reads(reads, i, nxt)
        if every and resp.consumed < end and not step.settled:
            if drop:
                stop -= _drop(resp)
            yield
    if drop:
        _drop(resp)


def _drop(resp: WireResponse) -> int:
    n = resp.consumed
    if n:
        resp.held -= sum(len(p) for _, p in resp.reads[:n])
        del resp.reads[:n]
        resp.consumed = 0
    return n


def catch_up_steps(resp: WireResponse, rec: Record, tally: StreamTally, limits: Limits, every: int,
                   abort: Optional[Callable] = None, finish: Optional[Callable] = None):
    """The pieces read so far of a response in flight through its StreamStep (see module doc);
    a response that is not a stream and holds over ``max_body_bytes`` is failed ``too_large``.
    ``abort(kind, msg)`` / ``finish()``: the connection's (wire.conn.Conn), no-ops once over."""
    if is_stream(resp, True):
        step = _step(resp, rec, tally, limits)
        yield from _consume(resp, step, every, len(resp.reads), drop=True)
        if step.settled and abort is not None:
            abort(rec.error_kind or "protocol", rec.error or "")   # stop reading it
        elif step.done and finish is not None:
            finish()                              # [DONE]: the message end, briefly awaited
    elif resp.held > limits.max_body_bytes and abort is not None:
        abort("too_large", body_too_large(resp.held, limits) or "response too large")


def fill_steps(resp: WireResponse, rec: Record, tally: StreamTally, stream: bool, every: int,
               limits: Limits = DEFAULT_LIMITS):
    """Fill ``rec`` (all but ``request.finish``) as a generator that yields every ``every`` body
    pieces (0: never): ``settle``'s rules, the stream fed here in slices."""
    settle.begin(resp, rec)
    if resp.status is not None and not settle.status_failure(resp, rec):
        if is_stream(resp, stream):
            step = _step(resp, rec, tally, limits)
            yield from _consume(resp, step, every)
            settle.stream_end(resp, rec, step)
        elif resp.complete:
            settle.whole_body(resp, rec, tally, limits)
    settle.ending(resp, rec)


class RecordFiller:
    """Fill generators on ONE task, at most ``budget_ns`` of parsing between two turns of the
    event loop: a burst of streams that end together (lockstep) never holds the socket reads up
    (a held-up read coalesces segments, and all but the last get its stamp).
    ``await filler.fill(resp, rec, tally, stream=...)``; cancelled, it fills the record
    synchronously and re-raises. ``submit(gen, then)`` runs a catch-up in the background.
    ``request.finish`` is the caller's."""

    def __init__(self, budget_ns: int = 250_000, every: int = 8, limits: Limits = DEFAULT_LIMITS):
        self.budget_ns, self.every, self.limits = budget_ns, every, limits
        self._q: collections.deque = collections.deque()
        self._task: Optional[asyncio.Task] = None

    def _enqueue(self, gen, fut: asyncio.Future) -> None:
        self._q.append((gen, fut))
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run())

    def submit(self, gen, then: Callable[[], None]) -> None:
        fut = asyncio.get_running_loop().create_future()
        fut.add_done_callback(lambda f: (f.cancelled() or f.exception(), then()))
        self._enqueue(gen, fut)

    async def fill(self, resp: WireResponse, rec: Record, tally: StreamTally, *, stream: bool) -> None:
        gen = fill_steps(resp, rec, tally, stream, self.every, self.limits)
        if not (stream and (resp.reads or resp.spilling)):
            return drive(gen)                         # nothing to slice (nor a catch-up to follow)
        fut = asyncio.get_running_loop().create_future()
        self._enqueue(gen, fut)
        try:
            await fut
        except asyncio.CancelledError:
            if fut.cancelled():                       # the worker skips it from now on
                drive(gen)
            raise

    async def _run(self) -> None:
        q = self._q
        while q:
            end = now_ns() + self.budget_ns
            while q:                                  # at least one step per turn
                gen, fut = q[0]
                if fut.done():
                    q.popleft()
                    continue
                try:
                    next(gen)
                except StopIteration:
                    q.popleft()
                    fut.set_result(None)
                except BaseException as e:        # noqa: B902 - handed to the waiter
                    q.popleft()
                    fut.set_exception(e)
                if now_ns() >= end:
                    break
            await asyncio.sleep(0)
