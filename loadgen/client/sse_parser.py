"""Server-sent events, parsed incrementally: bytes in (any split), events out. Pure, linear.

    socket reads ─► SSEParser.feed() ─► events (bytes | DONE | NamedEvent | Malformed | TooLarge)
    one event's JSON ─► loads() (ValueError on anything malformed, too deep included)

``SSEParser.feed(data)`` returns a list whose items are one of:
  * ``bytes``        the data of one event (several ``data:`` lines joined by ``b"\\n"``),
  * ``DONE``         the ``data: [DONE]`` sentinel of the OpenAI protocol,
  * ``NamedEvent``   an event with an ``event:`` type other than ``message`` (e.g. ``error``),
  * ``Malformed``    a line that is neither a comment nor a known field (data/event/id/retry).
Lines may end in ``\\r\\n``, ``\\n`` or ``\\r``; comments (``:`` first) are skipped.
``finish()`` dispatches an event left pending when the stream ends without a blank line
(lenient: some servers end with ``data: [DONE]\\n``). Keep-alive events named in
``IGNORED_EVENTS`` (``event: ping``) are dropped like comments (``: ping``).
A leading UTF-8 BOM is stripped (the SSE spec). Imported through ``loadgen.client.sse`` (which
re-exports every name here) by the stream step and the tests.
"""
from __future__ import annotations

import json
from typing import Any, Optional, Union

_scan = json.JSONDecoder().scan_once    # the C scanner json.loads uses, without its wrapper


class _Done:
    __slots__ = ()

    def __repr__(self) -> str:
        return "DONE"


DONE = _Done()


class Malformed:
    """A line of the stream that is not valid SSE; ``line`` holds (a prefix of) it."""

    __slots__ = ("line",)

    def __init__(self, line: bytes):
        self.line = line[:200]

    def __repr__(self) -> str:
        return f"Malformed({self.line!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Malformed) and other.line == self.line


class NamedEvent:
    """An event whose ``event:`` field is set to something other than ``message``."""

    __slots__ = ("event", "data")

    def __init__(self, event: str, data: bytes):
        self.event = event
        self.data = data

    def __repr__(self) -> str:
        return f"NamedEvent({self.event!r}, {self.data!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, NamedEvent) and (other.event, other.data) == (self.event, self.data)


Event = Union[bytes, _Done, NamedEvent, Malformed, "TooLarge"]
_KNOWN = (b"event", b"id", b"retry")
IGNORED_EVENTS = (b"ping", b"keepalive", b"keep-alive", b"heartbeat")   # keep-alives, not data


class TooLarge:
    """An event (or one line) longer than the parser's ``max_event_bytes``: the stream is refused."""

    __slots__ = ("size", "limit")

    def __init__(self, size: int, limit: int):
        self.size, self.limit = size, limit

    def __repr__(self) -> str:
        return f"TooLarge({self.size}, {self.limit})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TooLarge) and (other.size, other.limit) == (self.size, self.limit)


MAX_EVENT_BYTES = 8 * 2**20     # default cap on one unfinished event (lines of one block)


class SSEParser:
    """Bytes in, events out. Keeps the unfinished block between calls as a list of pieces that is
    joined once, when its blank line arrives: linear in the input whatever the line length (a
    50 MB line costs one join, not one re-scan per read). An unfinished block longer than
    ``max_event_bytes`` yields one ``TooLarge`` and nothing more is parsed."""

    __slots__ = ("_tail", "_pend", "_plen", "_data", "_event", "_cr", "max_event_bytes",
                 "overflow", "_first")

    def __init__(self, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self._tail = b""
        self._pend: list = []                # pieces of the unfinished block after _tail
        self._plen = 0                       # bytes in _pend (the tail's are len(_tail))
        self._cr = False                     # the last read ended in \r: a leading \n is its LF
        self._data: Optional[list] = None    # data lines of the event being built
        self._event: Optional[bytes] = None  # its event type, when given
        self.max_event_bytes = max_event_bytes
        self.overflow = False                # a TooLarge was returned: the parser is spent
        self._first = True                   # nothing fed yet: a leading UTF-8 BOM is dropped

    def feed(self, chunk: bytes) -> list:
        if self.overflow or not chunk:
            return []
        if self._first:
            self._first = False
            if chunk[:3] == b"\xef\xbb\xbf":       # the SSE spec strips one leading BOM
                chunk = chunk[3:]
                if not chunk:
                    return []
        if self._cr:
            self._cr = False
            if chunk[:1] == b"\n":            # the second half of a \r\n split across reads
                chunk = chunk[1:]
                if not chunk:
                    return []
        if b"\r" in chunk:
            # a trailing \r ends its line now (the event it completes is returned in this read);
            # a \n opening the next read is then dropped as its LF
            self._cr = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        tail = self._tail
        if tail and not (b"\n\n" in chunk or (chunk[:1] == b"\n" and
                                               (self._pend[-1] if self._pend else tail)[-1:] == b"\n")):
            # the block is still unfinished: keep the piece, scan nothing again
            self._pend.append(chunk)
            self._plen += len(chunk)
            return self._check()
        if self._pend:
            self._pend.append(chunk)
            buf = tail + b"".join(self._pend)
            self._pend, self._plen = [], 0
        else:
            buf = tail + chunk if tail else chunk
        # Fast path, the usual stream: nothing but "data: <one line>" blocks. Then the newlines
        # are exactly two per block end, and splitting on the separators yields the payloads.
        end = buf.rfind(b"\n\n")
        if end >= 0 and buf.startswith(b"data: "):
            payloads = buf[6:end].split(b"\n\ndata: ")
            if buf.count(b"\n", 0, end) == 2 * len(payloads) - 2:
                tail = self._tail = buf[end + 2:]
                if b"[DONE]" in payloads:
                    return [DONE if e == b"[DONE]" else e for e in payloads]
                return payloads + self._check() if len(tail) > self.max_event_bytes else payloads
        # General path. The state is clean at every block start (each block ends in a dispatch
        # and a tail is re-split whole).
        blocks = buf.split(b"\n\n")         # every block but the last ends with a blank line
        tail = self._tail = blocks.pop()
        out = []
        line = self._line
        for blk in blocks:
            for ln in blk.split(b"\n"):
                line(ln, out)
            line(b"", out)
        if len(tail) > self.max_event_bytes:
            out += self._check()
        return out

    def _check(self) -> list:
        size = len(self._tail) + self._plen
        if size > self.max_event_bytes:
            self.overflow = True
            self._tail, self._pend, self._plen = b"", [], 0
            return [TooLarge(size, self.max_event_bytes)]
        return []

    def finish(self) -> list:
        """End of stream: the pending tail line and a pending event are dispatched."""
        out: list = []
        if self.overflow:
            return out
        tail = self._tail + b"".join(self._pend) if self._pend else self._tail
        self._tail, self._pend, self._plen = b"", [], 0
        for ln in tail.split(b"\n"):               # feed() left it with \n line ends only
            if ln:
                self._line(ln, out)
        self._line(b"", out)
        return out

    def _line(self, line: bytes, out: list) -> None:
        if not line:                                   # blank line: dispatch
            data = self._data
            if data is not None:
                payload = data[0] if len(data) == 1 else b"\n".join(data)
                event = self._event
                self._data = None
                self._event = None
                if event is not None and event != b"message":
                    if event not in IGNORED_EVENTS:
                        out.append(NamedEvent(event.decode("utf-8", "replace"), payload))
                elif payload == b"[DONE]":
                    out.append(DONE)
                else:
                    out.append(payload)
            else:
                self._event = None
            return
        if line.startswith(b"data:"):
            value = line[6:] if line[5:6] == b" " else line[5:]
            if self._data is None:
                self._data = [value]
            else:
                self._data.append(value)
            return
        if line[0] == 58:                              # b":" comment / keep-alive
            return
        name, sep, value = line.partition(b":")
        if sep and name in _KNOWN:
            if name == b"event":
                self._event = value[1:] if value[:1] == b" " else value
            return                                     # id / retry: accepted, not needed
        out.append(Malformed(line))


def loads(data: bytes) -> Any:
    """``json.loads`` for one event: the C scanner directly when the payload is plain UTF-8 JSON
    with no surrounding whitespace (the common case, ~2x faster); else ``json.loads`` itself,
    which accepts what it accepts and raises ``ValueError`` on what it rejects."""
    try:
        s = data.decode()
        obj, end = _scan(s, 0)
        if end == len(s):
            return obj
    except (StopIteration, ValueError):
        pass
    except RecursionError:                 # a 100k-deep array: the server's fault, not ours
        raise ValueError("JSON nested too deeply") from None
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
