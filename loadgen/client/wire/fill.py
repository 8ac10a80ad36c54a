"""A finished (or failed, or cancelled) wire exchange ─► the Record, off the stamping path.

    WireResponse (status, headers, stamped body pieces, the end or the failure)
        ─► fill_steps: http_status; streamed: sse.SSEParser over the pieces, every data event
           parsed (sse.loads) and counted (StreamTally.add: tokens, reasoning vs answer, text),
           Record.chunks [[stamp, n], ...]; whole JSON: request.apply_body; then the failure
           (timeout | connection | malformed | cancelled | incomplete) ─► request.finish (caller)
    RecordFiller   the same generator on ONE task, at most ``budget_ns`` of it between two turns of
                   the event loop: 256 lockstep streams that end together are ~200 ms of JSON,
                   which in one go would hold every socket's next read up for 20 decode steps
                   (and a late read coalesces segments, all stamped with the last one's time)

The event rules are the aiohttp transport's (``aiohttp_transport.read_stream``), so both fill the
same fields the same way (tests compare them field by field). ``coalesced_reads``: reads whose
pieces carried more than one token chunk (every chunk of such a read but the last got a stamp
that may be late by the gap), on the record and on the response.
"""
from __future__ import annotations

import asyncio
import collections
from typing import Optional

from loadgen.client.request import SNIPPET, apply_body, end_stream, fail, finish
from loadgen.client.sse import DONE, NamedEvent, SSEParser, StreamTally, error_message, loads
from loadgen.client.wire.http1 import WireResponse
from loadgen.record import Record, now_ns

CANCELLED = "the run was interrupted before the request ended"


def fill_record(resp: WireResponse, rec: Record, *, stream: bool, continuous: bool = False,
                want_text: bool = False, workload_prompt_tokens: Optional[int] = None,
                tally: Optional[StreamTally] = None) -> StreamTally:
    """Fill ``rec`` from one exchange at once, then ``request.finish``; returns the tally."""
    tally = tally if tally is not None else StreamTally(continuous, want_text)
    drive(fill_steps(resp, rec, tally, stream, 0))
    finish(rec, tally, workload_prompt_tokens)
    return tally


def drive(gen) -> None:
    """Run a ``fill_steps`` generator to its end."""
    for _ in gen:
        pass


def fill_steps(resp: WireResponse, rec: Record, tally: StreamTally, stream: bool, every: int):
    """Fill ``rec`` (all but ``request.finish``) as a generator that yields every ``every`` body
    pieces (0: never) — ``aiohttp_transport.AiohttpTransport.send``'s fields and rules."""
    if resp.sent_at_ns is not None:
        rec.sent_at_ns = resp.sent_at_ns
    if resp.retries:
        rec.retries, rec.first_sent_at_ns, rec.retry_error = (
            resp.retries, resp.first_sent_at_ns, (resp.retry_error or "")[:SNIPPET])
    coalesced = 0
    if resp.status is not None:
        rec.http_status = resp.status
        if resp.status >= 300:
            snippet = resp.body()[:SNIPPET].decode("utf-8", "replace")
            fail(rec, "http", f"HTTP {resp.status}: {' '.join(snippet.split())}",
                 resp.end_at_ns if resp.end_at_ns is not None else resp.headers_at_ns)
        elif stream and resp.content_type() != "application/json":
            coalesced = yield from _stream_steps(resp, rec, tally, every)
        elif resp.complete:
            rec.end_at_ns = resp.end_at_ns
            apply_body(rec, tally, resp.body(), resp.end_at_ns)
    _ending(resp, rec)
    resp.coalesced_reads = rec.coalesced_reads = coalesced


def _ending(resp: WireResponse, rec: Record) -> None:
    """The exchange's own failure, unless the body already settled the record."""
    kind = resp.error_kind
    if kind == "cancelled":
        if rec.status != "ok":                        # complete before the interrupt: stays ok
            rec.status, rec.error_kind, rec.error = "cancelled", "cancelled", CANCELLED
        if rec.end_at_ns is None:
            rec.end_at_ns = resp.end_at_ns if resp.end_at_ns is not None else now_ns()
    elif kind is not None and rec.status == "pending":
        fail(rec, kind, resp.error or kind, resp.end_at_ns)
    elif rec.status == "pending" and resp.status is not None:
        fail(rec, "incomplete", "the response ended without a complete body", resp.end_at_ns)


def _stream_steps(resp: WireResponse, rec: Record, tally: StreamTally, every: int):
    """The stamped pieces through SSEParser into ``rec.chunks``; returns ``coalesced_reads``."""
    parser = SSEParser()
    feed, add, append = parser.feed, tally.add, rec.chunks.append
    done = False
    coalesced = tokens_in_read = 0
    last_t = ev = None
    t = resp.end_at_ns
    pieces = list(resp.reads)
    if resp.complete:
        pieces.append((resp.end_at_ns, None))        # None: the end of the body, parser.finish()
    try:
        for i, (t, piece) in enumerate(pieces):
            if every and i % every == every - 1:
                yield
            if t != last_t:                           # pieces of one read share its stamp
                if tokens_in_read > 1:
                    coalesced += 1
                last_t, tokens_in_read = t, 0
            for ev in (feed(piece) if piece is not None else parser.finish()):
                if ev.__class__ is bytes:
                    if not ev:                        # "data:" with nothing: not a chunk
                        continue
                    n = add(loads(ev))
                    if n < 0:                         # an error object inside the 200 stream
                        append([t, 0])
                        fail(rec, "server_error", error_message(tally.error), t)
                        return coalesced
                    append([t, n])
                    if n:
                        tokens_in_read += 1
                elif ev is DONE:
                    if not done:
                        done, rec.end_at_ns, rec.status = True, t, "ok"
                elif ev.__class__ is NamedEvent:
                    if ev.event == "error":
                        append([t, 0])
                        fail(rec, "server_error", ev.data.decode("utf-8", "replace"), t)
                        return coalesced
                    append([t, max(add(loads(ev.data)), 0)])
                else:
                    fail(rec, "malformed", f"not server-sent events: {ev.line!r}", t)
                    return coalesced
    except ValueError as e:
        what = ev[:120] if isinstance(ev, bytes) else ev
        fail(rec, "malformed", f"bad JSON in stream ({e}): {what!r}", t)
        return coalesced
    if tokens_in_read > 1:
        coalesced += 1
    if resp.complete:
        end_stream(rec, tally, done, resp.end_at_ns)
    return coalesced


class RecordFiller:
    """``fill_steps`` for finished responses on ONE task, at most ``budget_ns`` of parsing between
    two turns of the event loop: a burst of streams that end together (lockstep) never holds the
    socket reads up (a held-up read coalesces segments, and all but the last get its stamp).
    ``await filler.fill(resp, rec, tally, stream=...)``; cancelled, it fills the record
    synchronously and re-raises. ``request.finish`` is the caller's."""

    def __init__(self, budget_ns: int = 250_000, every: int = 8):
        self.budget_ns, self.every = budget_ns, every
        self._q: collections.deque = collections.deque()
        self._task: Optional[asyncio.Task] = None

    async def fill(self, resp: WireResponse, rec: Record, tally: StreamTally, *, stream: bool) -> None:
        gen = fill_steps(resp, rec, tally, stream, self.every)
        if not (stream and resp.reads):
            return drive(gen)                         # nothing to slice
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self._q.append((gen, fut))
        if self._task is None or self._task.done():
            self._task = loop.create_task(self._run())
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
