"""One HTTP/1.1 exchange, sans I/O: every rule of reading an answer, and nothing that reads.

    driver (asyncio wire.conn.Conn | gevent gevent_wire.conn.GConn): recvmsg ─► stamp t
        ─► Exchange.feed(t, bytes) ─► GOING | DONE | FAILED | SPILL        (EOF: .eof(t))
            httptools (C) framing ─► callbacks below ─► that read's body pieces joined ONCE
            ─► inline StreamStep (``step``: the gevent driver) or held in ``resp.reads`` for
               record_fill.py (the asyncio driver parses off the stamping path)
        the driver writes, waits, closes; it decides nothing about the answer

The rules (one copy for both engines):
  header bound   status line + headers over ``ask.max_header_bytes`` ─► ``too_large``; interim
                 1xx answers (skipped, RFC 9110 §15.2) count against the same bound (a 1xx storm
                 is ``too_large``), and so do trailers and any other bytes after the headers that
                 carry no body (an endless trailer section is ``too_large``, memory bounded)
  body bound     a body held whole (not a stream) whose Content-Length is over
                 ``ask.max_body_bytes`` ─► ``too_large`` at once; held over ``ask.hold_bytes``:
                 SPILL (the driver parses what is held) or, not a stream, ``too_large``
  framing / EOF  chunked, Content-Length, or until close (no length, no chunking: EOF ends it);
                 any other EOF is a ``connection`` failure; bad framing is ``protocol``
  one message    bytes after the answer's end (an unsolicited second response) are never read
                 into it, and the connection is not reused
  keep-alive     ``Connection: close`` / HTTP/1.0 end reuse; ``Keep-Alive: timeout=N`` gives
                 ``keepalive_s`` = N − 1 s (the driver's window is the smaller one)
  stale          a REUSED connection that failed before any byte of the answer (``resp.stale``):
                 never reached the server, the driver may send once more on a fresh one
  [DONE]         the stream step has the record's end (``step.done``); the message end is then
                 awaited at most ``policy.DONE_GRACE_S``, after which the driver ends the exchange
                 (not reused); a settled (failed) stream ends it at once
Status, redirects, whole bodies (gzip/deflate) and the exchange's own failure settle the record
in client/settle.py (pure), for every transport (aiohttp's too).
"""
from __future__ import annotations

from typing import Optional

import httptools

from loadgen.client.http1.message import DEFAULT_ASK, Ask, WireResponse

GOING, DONE, FAILED, SPILL = 0, 1, 2, 3        # what feed / eof answer (plain ints: per read)


class Exchange:
    """One request's answer (module doc), bounded as ``ask`` says (message.Ask: the settings,
    copied once into slots). ``step``: a stream step fed inline with each read's body (a
    streamed 2xx; made by ``make_step(resp)`` once the headers are in), or None.
    ``parser`` is dropped once the exchange is over: it and the exchange hold each other (its
    callbacks), a cycle that only the cyclic GC would free, which the client holds back while
    it stamps; every request's chunks would then stay in memory until a collection."""

    __slots__ = ("resp", "parser", "reused", "nbytes", "quiet", "t", "until_close", "keepalive_s",
                 "step", "make_step", "over", "_hdrs", "_pieces", "_piece", "stream", "hdr_cap",
                 "body_cap", "hold_cap")

    def __init__(self, resp: WireResponse, reused: bool = False, make_step=None,
                 ask: Ask = DEFAULT_ASK):
        self.resp, self.reused, self.make_step = resp, reused, make_step
        self.stream, self.hdr_cap, self.body_cap, self.hold_cap = (
            ask.stream, ask.max_header_bytes, ask.max_body_bytes, ask.hold_bytes)
        self.parser = httptools.HttpResponseParser(self)
        self.nbytes = self.quiet = self.t = 0
        self.until_close = False
        self.keepalive_s: Optional[float] = None
        self.step = None
        self.over = False                          # complete or failed: nothing more is read
        self._hdrs: list = []
        self._pieces: list = []
        self._piece = self._pieces.append

    # ---------------------------------------------------------------- input
    def feed(self, t: int, data: bytes) -> int:
        """One read's bytes, stamped ``t``."""
        resp = self.resp
        if self.parser is None:                    # over: bytes after the end are not ours
            resp.keep_alive = False
            return FAILED if resp.error_kind else DONE
        self.nbytes += len(data)
        resp.n_reads += 1
        self.t = t
        had_head = resp.headers_at_ns is not None
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._take(resp, t)
            return self.fail("protocol", "unexpected protocol upgrade", t)
        except httptools.HttpParserError as e:
            if self.over:                          # the error lies after the answer's end
                resp.keep_alive, self.parser = False, None
                return DONE if resp.complete else FAILED
            self._take(resp, t)
            return self.fail("protocol", f"bad HTTP response: {e}", t)
        p = self._pieces
        if p:                                      # this read's body: ONE stamped piece
            body = p[0] if len(p) == 1 else b"".join(p)
            p.clear()
            step = self.step
            if step is None:                       # held for record_fill.py (the asyncio driver)
                resp.reads.append((t, body))
                resp.held += len(body)
            elif step.feed(t, body):               # inline (gevent): settled, a limit, ...
                resp.keep_alive = False
                self.over, self.parser = True, None
                return FAILED if resp.error_kind else DONE
            self.quiet = 0
        elif had_head and not self.over:
            self.quiet += len(data)                # trailers, chunk framing: no body
            if self.quiet > self.hdr_cap:
                return self.fail("too_large", f"response trailers or framing over "
                                 f"{self.hdr_cap} bytes (api.limits.max_header_bytes)", t)
        if self.over:
            self.parser = None
            return FAILED if resp.error_kind else DONE
        if resp.headers_at_ns is None and self.nbytes > self.hdr_cap:
            # httptools has no header limit and builds a long value by concatenation
            return self.fail("too_large", f"response headers over {self.hdr_cap} "
                             "bytes (api.limits.max_header_bytes)", t)
        if resp.held > self.hold_cap:
            if not self.streamed():
                if resp.held > self.body_cap:
                    return self.fail("too_large", f"response body over {self.body_cap} "
                                     "bytes (api.limits.max_body_bytes)", t)
                return GOING
            return SPILL
        return GOING

    def _take(self, resp: WireResponse, t: int) -> None:
        """What a failing read brought before the failure, kept (as ``feed`` keeps it)."""
        p = self._pieces
        if p:
            body = b"".join(p)
            p.clear()
            if self.step is None:
                resp.reads.append((t, body))
                resp.held += len(body)
            else:
                self.step.feed(t, body)

    def eof(self, t: int) -> int:
        """The peer closed the socket."""
        resp = self.resp
        if self.over:
            return FAILED if resp.error_kind else DONE
        resp.keep_alive = False
        if resp.status is not None and self.until_close:
            resp.complete, resp.end_at_ns = True, t          # read-until-close body: EOF ends it
            self.over, self.parser = True, None
            return DONE
        what = "before the response was complete" if self.nbytes else "before the status line"
        return self.fail("connection", f"ServerDisconnected: the server closed the connection {what}", t)

    def fail(self, kind: str, msg: str, t: int) -> int:
        """The exchange failed (the first failure stays); the connection is not reused."""
        resp = self.resp
        if resp.error_kind is None and not self.over:
            resp.error_kind, resp.error, resp.end_at_ns = kind, msg, t
            resp.stale = self.reused and self.nbytes == 0 and kind == "connection"
        resp.keep_alive = False
        self.over, self.parser = True, None
        return FAILED

    def finish_after_done(self) -> int:
        """The stream had its [DONE] and the message did not end within DONE_GRACE_S: over,
        not reused (the record keeps [DONE]'s end)."""
        self.resp.keep_alive = False
        self.over, self.parser = True, None
        return DONE

    def streamed(self) -> bool:
        """The body is an SSE stream parsed as it comes (a streamed request answered 2xx, not
        JSON); ``ask.stream`` None (not said): maybe one, never held whole here."""
        return self.stream is not False and self.resp.sse_body()

    @property
    def done_seen(self) -> bool:
        """The stream step saw [DONE] while the message is still open."""
        return self.step is not None and self.step.done and not self.over

    # ---------------------------------------------------------------- httptools callbacks
    def on_message_begin(self) -> None:
        if self.over:                              # a second message on the socket: not ours
            self.resp.keep_alive = False

    def on_header(self, name: bytes, value: bytes) -> None:
        if self.resp.headers_at_ns is None:        # trailers: counted by feed (quiet), dropped
            self._hdrs.append((name, value))

    def on_headers_complete(self) -> None:
        resp = self.resp
        if self.over:
            return
        status = self.parser.get_status_code()
        if 100 <= status < 200 and status != 101:  # interim: skipped; its bytes count as header
            self._hdrs = []
            return
        resp.status = status
        h: dict = {}
        raw = resp.raw_headers = [(n.decode("latin-1"), v.decode("latin-1")) for n, v in self._hdrs]
        for n, v in raw:
            k = n.lower()
            h[k] = f"{h[k]}, {v}" if k in h else v
        resp.headers = h
        resp.headers_at_ns = self.t
        self.until_close = ("content-length" not in h and "chunked" not in h.get("transfer-encoding", "")
                            and status >= 200 and status not in (204, 304))
        ka = h.get("keep-alive")
        if ka:
            self._keep_alive_timeout(ka)
        if self.streamed():
            if self.make_step is not None and self.stream:
                self.step = resp.step = self.make_step(resp)
        elif "chunked" not in h.get("transfer-encoding", ""):
            cl = h.get("content-length", "")
            if cl.isdigit() and int(cl) > self.body_cap:
                self.fail("too_large", f"response body over {self.body_cap} bytes "
                          f"(api.limits.max_body_bytes): Content-Length {cl}", self.t)

    def _keep_alive_timeout(self, value: str) -> None:
        for part in value.split(","):
            k, _, v = part.strip().partition("=")
            if k.lower() == "timeout":
                try:
                    self.keepalive_s = max(float(v) - 1.0, 0.0)
                except ValueError:
                    pass

    def on_body(self, body: bytes) -> None:
        if not self.over:
            self._piece(body)          # joined once per read (chunked SSE: one call per event)

    def on_message_complete(self) -> None:
        resp = self.resp
        if self.over or resp.status is None:       # ours ended already / an interim 1xx
            return
        resp.complete = True
        resp.end_at_ns = self.t
        resp.keep_alive = self.parser.should_keep_alive() and not self.until_close
        self.over = True
