"""HTTP/1.1 exchanges and their SSE events, read off reassembled TCP streams (bench.wire.pcap).

    Connection.up   ─► requests, in order: request line, headers, Content-Length | chunked body
    Connection.down ─► responses, in order: status line, headers, Content-Length | chunked |
                       to end of stream; 1xx answers skipped
    i-th request ↔ i-th response on the connection (HTTP/1.1 without pipelining, as every client
    here sends)
    response body (de-chunked, each decoded byte mapped back to its wire offset) ─► SSE events:
        an event ends at the blank line after it; its time is the capture time of the packet that
        brought the first byte of that blank line's terminator (a client cannot dispatch it sooner)
        kind "token"  a data event whose JSON has output text (completions ``choices[i].text``,
                      chat ``delta.content`` / ``delta.reasoning_content``), n = tokens_of(obj)
             "done"   ``data: [DONE]``
             "other"  anything else (role-only, usage-only, comments are not events at all)

Times are the capture's clock (CLOCK_REALTIME on Linux); only differences are meaningful next
to a client's records.
"""
from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from typing import Callable, Optional

from bench.wire.pcap import Connection, HalfStream

_EOL = re.compile(rb"\r\n|\n|\r")


@dataclass
class Message:
    start: int                                  # stream offset of the first byte
    end: int                                    # one past the last byte
    first_line: str
    headers: dict                               # lower-case names
    body_pieces: list                           # [(wire_offset, length)] of the decoded body
    complete: bool = True

    def body(self, s: HalfStream) -> bytes:
        return b"".join(bytes(s.data[o:o + n]) for o, n in self.body_pieces)


@dataclass
class Event:
    t_ns: int
    kind: str                                   # token | done | other
    n: int                                      # tokens carried (0 unless kind == token)


@dataclass
class Exchange:
    conn: int                                   # index of the connection in the capture
    index: int                                  # position on that connection
    method: str
    path: str
    request_body: bytes
    request_first_ns: int                       # first request byte on the wire
    request_last_ns: int                        # last request byte on the wire
    status: Optional[int] = None
    response_first_ns: Optional[int] = None
    events: list = field(default_factory=list)  # [Event]
    complete: bool = False                      # the whole response was captured

    @property
    def token_events(self) -> list:
        return [e for e in self.events if e.kind == "token"]

    @property
    def first_token_ns(self) -> Optional[int]:
        return next((e.t_ns for e in self.events if e.kind == "token"), None)


def _parse_message(s: HalfStream, pos: int, is_response: bool) -> Optional[Message]:
    """The HTTP message starting at ``pos``, or None when its head is not all captured."""
    data = s.data
    he = data.find(b"\r\n\r\n", pos)
    if he < 0:
        return None
    lines = bytes(data[pos:he]).decode("latin-1").split("\r\n")
    headers = {}
    for ln in lines[1:]:
        k, _, v = ln.partition(":")
        headers[k.strip().lower()] = v.strip()
    b0 = he + 4
    if is_response:
        code = (lines[0].split(" ", 2) + [""])[1]
        if code.startswith("1") or code in ("204", "304"):
            return Message(pos, b0, lines[0], headers, [])      # never a body
    te = headers.get("transfer-encoding", "").lower()
    if "chunked" in te:
        pieces, p = [], b0
        while True:
            le = data.find(b"\r\n", p)
            if le < 0:
                return Message(pos, len(data), lines[0], headers, pieces, complete=False)
            size = int(bytes(data[p:le]).split(b";")[0].strip() or b"0", 16)
            d0 = le + 2
            if size == 0:                        # last chunk, then trailers up to a blank line
                tend = data.find(b"\r\n", d0)
                while tend >= 0 and tend != d0:
                    d0, tend = tend + 2, data.find(b"\r\n", tend + 2)
                if tend < 0:
                    return Message(pos, len(data), lines[0], headers, pieces, complete=False)
                return Message(pos, tend + 2, lines[0], headers, pieces)
            if d0 + size > len(data):
                pieces.append((d0, len(data) - d0))
                return Message(pos, len(data), lines[0], headers, pieces, complete=False)
            pieces.append((d0, size))
            p = d0 + size + 2
    if "content-length" in headers:
        n = int(headers["content-length"])
        end = min(b0 + n, len(data))
        return Message(pos, end, lines[0], headers, [(b0, end - b0)] if end > b0 else [],
                       complete=b0 + n <= len(data))
    if is_response:                              # delimited by the end of the connection
        return Message(pos, len(data), lines[0], headers,
                       [(b0, len(data) - b0)] if len(data) > b0 else [], complete=s.fin)
    return Message(pos, b0, lines[0], headers, [])


def messages(s: HalfStream, is_response: bool) -> list[Message]:
    out, pos = [], 0
    while pos < len(s.data):
        m = _parse_message(s, pos, is_response)
        if m is None:
            break
        code = m.first_line.split(" ", 2)[1] if is_response and m.first_line.count(" ") else ""
        if code.startswith("1") and m.end > pos:
            pos = m.end                           # 100 Continue and friends: not the answer
            continue
        out.append(m)
        if not m.complete or m.end <= pos:
            break
        pos = m.end
    return out


def default_tokens_of(obj) -> int:
    """Tokens in one chunk: 1 when it carries output text (the calibration server's default:
    one token per chunk), else 0."""
    return 1 if _has_text(obj) else 0


def _has_text(obj) -> bool:
    if not isinstance(obj, dict):
        return False
    for ch in obj.get("choices") or ():
        if not isinstance(ch, dict):
            continue
        if ch.get("text"):
            return True
        d = ch.get("delta")
        if isinstance(d, dict) and (d.get("content") or d.get("reasoning_content")):
            return True
    return False


def sse_events(s: HalfStream, m: Message, tokens_of: Callable = default_tokens_of) -> list[Event]:
    """The SSE events of a response body, each stamped when its terminating blank line arrived."""
    body = m.body(s)
    dec_starts, wire_starts, acc = [], [], 0
    for o, n in m.body_pieces:
        dec_starts.append(acc)
        wire_starts.append(o)
        acc += n

    def t_of(i: int) -> int:
        k = bisect.bisect_right(dec_starts, i) - 1
        return s.time_at(wire_starts[k] + i - dec_starts[k])

    out: list[Event] = []
    data_lines: list[bytes] = []
    pos = 0
    for mo in _EOL.finditer(body):
        line = body[pos:mo.start()]
        if not line:                              # blank line: dispatch
            if data_lines:
                out.append(_event(b"\n".join(data_lines), t_of(mo.start()), tokens_of))
                data_lines = []
        elif line.startswith(b"data:"):
            v = line[5:]
            data_lines.append(v[1:] if v.startswith(b" ") else v)
        pos = mo.end()
    return out


def _event(data: bytes, t: int, tokens_of: Callable) -> Event:
    if data.strip() == b"[DONE]":
        return Event(t, "done", 0)
    try:
        obj = json.loads(data)
    except ValueError:
        return Event(t, "other", 0)
    n = tokens_of(obj)
    return Event(t, "token", n) if n > 0 else Event(t, "other", 0)


def exchanges(conns: list[Connection], tokens_of: Callable = default_tokens_of) -> list[Exchange]:
    """Every request in the capture with its response and SSE events."""
    out = []
    for ci, c in enumerate(conns):
        reqs = messages(c.up, is_response=False)
        resps = messages(c.down, is_response=True)
        for i, rq in enumerate(reqs):
            if not rq.complete:
                continue
            method, _, rest = rq.first_line.partition(" ")
            ex = Exchange(conn=ci, index=i, method=method, path=rest.rsplit(" ", 1)[0],
                          request_body=rq.body(c.up), request_first_ns=c.up.time_at(rq.start),
                          request_last_ns=c.up.time_at(rq.end - 1))
            if i < len(resps):
                rs = resps[i]
                parts = rs.first_line.split(" ", 2)
                ex.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else None
                ex.response_first_ns = c.down.time_at(rs.start)
                ctype = rs.headers.get("content-type", "")
                if ctype.startswith("text/event-stream"):
                    ex.events = sse_events(c.down, rs, tokens_of)
                ex.complete = rs.complete
            out.append(ex)
    return out
