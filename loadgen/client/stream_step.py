"""The one stream step: stamped body bytes ─► SSE events ─► the Record. Pure, incremental.

    StreamStep(rec, tally, limits, encoding)
        feed(t, bytes)   one read's body bytes, stamped t (kernel or user time of that read)
            [gzip | deflate: zlib, output bounded per call] ─► sse.SSEParser (linear, event cap)
            ─► every data event: StreamTally.add_bytes (msgspec typed decode; generic parse
               when it does not fit) ─► rec.chunks.append([t, n]); past ``max_chunk_stamps``
               stamps (MAX_CHUNK_STAMPS, docs/limits.md) a chunk is counted, not kept:
               rec.chunks_unstamped / chunks_unstamped_tokens (per read: the list never holds
               more than the cap + one read's events)
            ─► [DONE]: rec ok, end_at_ns; nothing after it is counted (``done``); error event / error object: ``server_error``;
               not SSE / bad JSON: ``protocol``; an event over ``max_event_bytes`` or more events
               than ``max_events``: ``too_large``; the hang-up's ``token_limit`` output tokens in:
               ``aborted`` (load.cancel, loadgen.client.hangup: the driver closes the socket)
        end(t)           the body ended (message complete): the pending event, then ok | incomplete
        settled          True once the record is decided by the stream (failed): stop feeding

Every transport calls this and nothing else to turn a streamed body into a record: the wire
transport over its stamped reads (off the stamping path, in bounded slices), the aiohttp transport
per read, the Locust users per recv. So the three fill the same fields by the same rules.
``coalesced_reads`` counts reads (stamps) that carried more than one token chunk.
No I/O here: bytes in, fields of ``rec`` out.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass
from typing import Any, Optional

from loadgen.client.hangup import abort
from loadgen.client.request import end_stream, fail
from loadgen.client.sse import (DONE, MAX_EVENT_BYTES, NamedEvent, SSEParser, StreamTally, TooLarge,
                                error_message)
from loadgen.record import Record

MAX_HEADER_BYTES = 64 * 2**10
MAX_BODY_BYTES = 32 * 2**20
EVENTS_PER_TOKEN = 4
EVENTS_SLACK = 1024
# stamps kept per request: ~100 B each in memory, ~25 B in records.jsonl (6.5 MB / 1.6 MB at
# the cap); every answer up to 16,384 tokens at 4 events a token keeps all of them
MAX_CHUNK_STAMPS = 65_536


@dataclass(frozen=True)
class Limits:
    """What one response may cost the client (``api.limits``); exceeding one fails the request
    as ``too_large``. ``max_events``: data events per streamed response, ``events_per_token`` ×
    max_tokens + ``EVENTS_SLACK`` (a server that streams far more events than it was asked for
    tokens is broken or hostile). ``max_chunk_stamps``: [t, n] stamps kept per request; the
    chunks past it are counted (``Record.chunks_unstamped``), so memory per stream is bounded
    whatever ``max_tokens`` allows."""

    max_header_bytes: int = MAX_HEADER_BYTES     # status line + headers
    max_event_bytes: int = MAX_EVENT_BYTES       # one SSE event (or line) not yet finished
    max_body_bytes: int = MAX_BODY_BYTES         # a non-streamed body (JSON) held whole
    events_per_token: int = EVENTS_PER_TOKEN
    max_chunk_stamps: int = MAX_CHUNK_STAMPS

    def max_events(self, max_tokens: Optional[int]) -> int:
        return self.events_per_token * max(max_tokens or 0, 1) + EVENTS_SLACK

    @classmethod
    def from_api(cls, limits: Any) -> "Limits":
        """From a scenario ``api.limits`` (anything with these attributes), or the defaults."""
        if limits is None:
            return cls()
        return cls(limits.max_header_bytes, limits.max_event_bytes, limits.max_body_bytes,
                   limits.events_per_token,
                   getattr(limits, "max_chunk_stamps", MAX_CHUNK_STAMPS))


DEFAULT_LIMITS = Limits()


def decoder(encoding: Optional[str]):
    """A zlib decompressor for a Content-Encoding (gzip | deflate | x-gzip), None for identity;
    raises ValueError for anything else."""
    enc = (encoding or "identity").strip().lower()
    if enc in ("", "identity"):
        return None
    if enc in ("gzip", "x-gzip"):
        return zlib.decompressobj(16 + zlib.MAX_WBITS)
    if enc == "deflate":
        return zlib.decompressobj(zlib.MAX_WBITS)    # zlib-wrapped; raw deflate is tried on error
    raise ValueError(f"unsupported Content-Encoding {encoding!r}")


class _HangUp(Exception):
    """Raised by StreamStep._counting_append once load.cancel's token limit is in."""


class StreamStep:
    """One streamed response into ``rec`` (see module doc). ``feed`` returns ``settled``."""

    __slots__ = ("rec", "tally", "parser", "settled", "done", "coalesced", "_last_t", "_tok_in_read",
                 "_max_events", "_zip", "_raw_deflate", "_chunk_cap", "_pfeed", "_add", "_append",
                 "_chunks", "hangup", "_hang_at", "_got", "_cap", "_lim", "_unstamped")

    def __init__(self, rec: Record, tally: StreamTally, limits: Limits = DEFAULT_LIMITS,
                 encoding: Optional[str] = None, hangup: Any = None):
        self.rec, self.tally = rec, tally
        self.hangup = hangup                     # load.cancel (client.hangup.Hangup) or None
        at = None if hangup is None else hangup.token_limit
        self._hang_at = at
        self._got = 0                            # output tokens of the chunks so far (hangup)
        self.parser = SSEParser(limits.max_event_bytes)
        self.settled = False
        self.done = False
        self.coalesced = 0
        self._last_t: Optional[int] = None
        self._tok_in_read = 0
        self._max_events = limits.max_events(rec.requested_output_tokens)
        self._cap = max(limits.max_chunk_stamps, 1)      # stamps kept; the rest counted
        self._lim = min(self._cap, self._max_events)     # a read past it: _over
        self._unstamped = 0
        self._chunk_cap = max(limits.max_event_bytes, 1 << 16)
        self._raw_deflate = (encoding or "").strip().lower() == "deflate"
        self._pfeed, self._add = self.parser.feed, tally.add_bytes       # bound once: the hot path
        self._chunks = rec.chunks
        # load.cancel's token hang-up: only such a request counts its tokens as it goes (a
        # counting append that raises _HangUp); every other request keeps the plain append
        self._append = rec.chunks.append if at is None else self._counting_append
        try:
            self._zip = decoder(encoding)
        except ValueError as e:
            self._zip = None
            self._fail("protocol", str(e), None)

    # ------------------------------------------------------------------ input
    def feed(self, t: int, data: bytes) -> bool:
        if self.settled or self.done or not data:        # [DONE] ended the record: the rest is not
            return self.settled
        if self._zip is not None:
            return self._inflate(t, data)
        events = self._pfeed(data)
        return self._events(events, t) if events else False

    def feed_reads(self, reads: list, i: int, stop: int) -> int:
        """``reads[i:stop]`` (``(stamp, bytes)`` pieces) in one call — the wire transport's
        finished responses; returns the index after the last piece fed (early when settled;
        ``stop`` once [DONE] came: the rest is not counted)."""
        if self.done:
            return stop
        if self._zip is not None or self.settled:
            while i < stop and not self.settled and not self.done:
                t, piece = reads[i]
                i += 1
                self.feed(t, piece)
            return stop if self.done else i
        return self._run(reads, i, stop, self._pfeed)

    def _events(self, events: list, t: int) -> bool:
        """Every event of one read (stamped ``t``) into the record; returns ``settled``."""
        self._run(((t, events),), 0, 1, None)
        return self.settled

    def _run(self, reads, i: int, stop: int, pfeed) -> int:
        """THE event rules, one inline loop (the hot path: names bound once per call, not per
        event). ``reads[j]`` is ``(stamp, bytes)`` parsed here by ``pfeed``, or, ``pfeed`` None,
        ``(stamp, events)`` already parsed. Data events: ``add`` ─► [t, n] (n > 0 a token chunk,
        0 none, < 0 an error object: ``server_error``); bad JSON: ``protocol``; any other event
        (``_other``: [DONE], a named event, a refused line) may settle or end it; more chunks
        than ``max_events`` (kept or counted): ``too_large``; past ``max_chunk_stamps`` kept,
        counted (``_spill``). Returns the index after the last read it took."""
        add, append, chunks, other = self._add, self._append, self._chunks, self._other
        most = self._lim
        last_t, tin = self._last_t, self._tok_in_read    # coalescing: token chunks per read
        j = i
        ev: Any = None
        try:
            for j in range(i, stop):
                t, evs = reads[j]
                if pfeed is not None:
                    evs = pfeed(evs)
                if not evs:
                    continue
                if t != last_t:                          # pieces of one read share its stamp
                    if tin > 1:
                        self.coalesced += 1
                    last_t, tin = t, 0
                for ev in evs:
                    if ev.__class__ is bytes:
                        if not ev:                       # "data:" with nothing: not a chunk
                            continue
                        n = add(ev)
                        if n > 0:
                            append([t, n])
                            tin += 1
                            continue
                        append([t, 0])
                        if n < 0:                        # an error object inside the 200 stream
                            self._fail("server_error", error_message(self.tally.error), t)
                            return j + 1
                    elif other(ev, t):                   # settled, or [DONE]: nothing more counts
                        return stop if self.done and not self.settled else j + 1
                if len(chunks) > most:                   # once a read: the cap, the bound
                    self._spill()
                    if len(chunks) + self._unstamped > self._max_events:
                        self._too_many(t)
                        return j + 1
            return stop
        except _HangUp:                                  # load.cancel: the token limit is in
            tin += 1                                     # the chunk was appended: it counts
            self.settled = True
            abort(self.rec, self.hangup.message(self._got), t)
            return j + 1
        except ValueError as e:                          # sse.loads / a chunk that is not an object
            what = ev[:120] if isinstance(ev, bytes) else ev
            self._fail("protocol", f"bad JSON in stream ({str(e)[:120]}): {what!r}", t)
            return j + 1
        finally:
            self._last_t, self._tok_in_read = last_t, tin
            if len(chunks) > self._cap:                  # a return inside a read ([DONE], ...)
                self._spill()

    def _spill(self) -> None:
        """The chunks past the cap out of ``rec.chunks``, counted (module doc)."""
        chunks, cap, rec = self._chunks, self._cap, self.rec
        extra = chunks[cap:]
        if not extra:
            return
        del chunks[cap:]
        self._unstamped += len(extra)
        rec.chunks_unstamped = self._unstamped
        rec.chunks_unstamped_tokens = (rec.chunks_unstamped_tokens or 0) + sum(
            n for _, n in extra if n > 0)

    def _counting_append(self, chunk: list) -> None:
        """``rec.chunks.append`` for a request that hangs up after N tokens (load.cancel)."""
        self._chunks.append(chunk)
        self._got += chunk[1]
        if self._got >= self._hang_at:
            raise _HangUp

    def end(self, t: int) -> None:
        """The body is complete: dispatch what is pending, then ok or ``incomplete``."""
        self._read_done()
        if self.settled:
            return
        if self.done:                                   # [DONE] came: what follows is not counted
            return end_stream(self.rec, self.tally, True, t)
        if self._zip is not None:
            try:
                rest = self._zip.flush()
            except zlib.error as e:
                return self._fail("protocol", f"bad compressed body: {e}", t)
            if rest:
                self._events(self._pfeed(rest), t)
                if self.settled:
                    return
        self._events(self.parser.finish(), t)
        if not self.settled:
            end_stream(self.rec, self.tally, self.done, t)

    def _inflate(self, t: int, data: bytes) -> bool:
        z = self._zip
        try:
            while data and not self.settled and not self.done:
                out = z.decompress(data, self._chunk_cap)    # bounded output per call (bombs)
                data = z.unconsumed_tail
                if out:
                    self._events(self._pfeed(out), t)
        except zlib.error as e:
            if self._raw_deflate and not self.rec.chunks:
                self._raw_deflate = False                    # some servers send raw deflate
                self._zip = zlib.decompressobj(-zlib.MAX_WBITS)
                return self._inflate(t, data)
            self._fail("protocol", f"bad compressed body: {e}", t)
        return self.settled

    # ------------------------------------------------------------------ events
    def _other(self, ev: Any, t: int) -> bool:
        """[DONE], a named event, a refused line: True when it settles the record."""
        if ev is DONE:                                  # the record's end: nothing after it counts
            self.done = True
            self.rec.end_at_ns, self.rec.status = t, "ok"
            return True
        if ev.__class__ is NamedEvent:
            if ev.event == "error":
                self._append([t, 0])
                self._fail("server_error", ev.data.decode("utf-8", "replace"), t)
                return True
            n = self._add(ev.data)                          # ValueError: the caller's
            self._append([t, max(n, 0)])
            if n < 0:      # an error object in a named event (responses: response.failed)
                self._fail("server_error", error_message(self.tally.error), t)
                return True
            return False
        if ev.__class__ is TooLarge:
            self._fail("too_large", f"a stream event longer than {ev.limit} bytes "
                       "(api.limits.max_event_bytes)", t)
        else:
            self._fail("protocol", f"not server-sent events: {ev.line!r}", t)
        return True

    def _read_done(self) -> None:
        if self._tok_in_read > 1:
            self.coalesced += 1
        self._tok_in_read = 0
        self._last_t = None

    def _too_many(self, t: int) -> None:
        self._fail("too_large", f"more than {self._max_events} stream events for max_tokens "
                   f"{self.rec.requested_output_tokens} (api.limits.events_per_token)", t)

    def _fail(self, kind: str, msg: str, t: Optional[int]) -> None:
        self.settled = True
        fail(self.rec, kind, msg, t)


def body_too_large(n: int, limits: Limits = DEFAULT_LIMITS) -> Optional[str]:
    """The ``too_large`` message for a non-streamed body of ``n`` bytes, or None if it fits."""
    if n > limits.max_body_bytes:
        return f"response body over {limits.max_body_bytes} bytes (api.limits.max_body_bytes)"
    return None
