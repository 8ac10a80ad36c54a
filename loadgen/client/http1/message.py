"""HTTP/1.1 pieces of one exchange: where it goes (``Target``), what is sent (``request_head``),
what it is asked to bound (``Ask``: settings) and what came back, as it happened
(``WireResponse``: results only; the drivers' callbacks live in the drivers). No I/O here.

    url ─► Target (host, port, Host header, path; addresses resolved once by the pool)
    method, headers, body ─► request_head ─► bytes (Content-Length framing; ``Connection: close``
                                             once the pool stopped reusing connections)
    Ask (stream?, header / body / hold bounds, load.cancel's hangup) ─► exchange.Exchange, which
    fills a WireResponse: status, headers, stamped body pieces, the end or the failure
"""
from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import Optional
from urllib.parse import urlsplit

USER_AGENT = "loadgen-wire/1"
_FRAMING = ("host", "content-length", "connection", "transfer-encoding")   # the transport's own


@dataclass(frozen=True)
class Ask:
    """What one exchange is asked to bound and how its body is read (settings, not results)."""

    stream: Optional[bool] = None                    # the request asked for a stream (None: not said)
    max_header_bytes: int = 64 * 2**10               # also bounds 1xx answers and trailers
    max_body_bytes: int = 32 * 2**20                 # a body held whole (not a stream)
    hold_bytes: int = 1 << 20                        # held above this: spill (or too_large)
    hangup: Optional[object] = None                  # load.cancel (client.hangup.Hangup), or None


DEFAULT_ASK = Ask()


@dataclass
class WireResponse:
    """One exchange as it happened; times are perf_counter_ns."""

    status: Optional[int] = None
    headers: dict = field(default_factory=dict)      # lower-case name -> value (repeats joined ", ")
    raw_headers: list = field(default_factory=list)  # [(name as sent, value)] (sut.json: dict(raw_headers))
    reads: list = field(default_factory=list)        # body pieces [(stamp_ns, bytes)], one read's share one stamp
    sent_at_ns: Optional[int] = None                 # immediately before the send syscall (last attempt)
    first_sent_at_ns: Optional[int] = None           # the failed first attempt, when retried
    retries: int = 0
    retry_error: Optional[str] = None
    headers_at_ns: Optional[int] = None              # stamp of the read that completed the headers
    end_at_ns: Optional[int] = None                  # stamp of the last read, or the failure
    complete: bool = False                           # message complete (or EOF ending an until-close body)
    error_kind: Optional[str] = None                 # record.ERROR_KINDS: timeout | connection | protocol | too_large | cancelled
    error: Optional[str] = None
    n_reads: int = 0                                 # socket reads that returned bytes
    kernel_reads: int = 0                            # ... of which carried a kernel stamp
    lag_max_ns: int = 0                              # max (user time of the read − its kernel stamp)
    lag_sum_ns: int = 0
    future_stamps: int = 0                           # kernel stamps after the user time (clock step?)
    keep_alive: bool = False
    coalesced_reads: Optional[int] = None            # set by fill: reads with > 1 token chunk
    new_connection: bool = False                     # the attempt that answered ran on a fresh connection
    stale: bool = False                              # (internal) reused connection, failed before any byte
    # bounded memory (fill.catch_up_steps): body bytes held in ``reads``, the pieces consumed by the
    # stream step so far, the step itself (made by the exchange once the headers are in), and
    # whether a catch-up of what is held is under way
    held: int = 0
    consumed: int = 0
    step: Optional[object] = None                    # stream_step.StreamStep, once parsing began
    spilling: bool = False

    @property
    def stamp_source(self) -> str:
        """``kernel``, ``user``, ``mixed``, or ``none`` when nothing was read."""
        if not self.n_reads:
            return "none"
        if not self.kernel_reads:
            return "user"
        return "kernel" if self.kernel_reads == self.n_reads else "mixed"

    def retry_fresh(self) -> None:
        """The attempt failed on a stale pooled connection (never reached the server): keep
        why (``retries``, ``first_sent_at_ns``, ``retry_error``), clear the failure, go again."""
        self.retries += 1
        self.first_sent_at_ns, self.retry_error = self.sent_at_ns, self.error
        self.error_kind = self.error = self.end_at_ns = None
        self.stale = False

    @property
    def reusable(self) -> bool:
        """The answer ended whole and the connection may carry the next request."""
        return self.complete and self.keep_alive

    def body(self) -> bytes:
        return b"".join(p for _, p in self.reads)

    def content_type(self) -> str:
        """The MIME type as aiohttp's ``ClientResponse.content_type`` gives it."""
        ct = self.headers.get("content-type")
        return ct.split(";", 1)[0].strip().lower() if ct else "application/octet-stream"

    def sse_body(self) -> bool:
        """THE rule for a body parsed as a stream: a 2xx answer that is not JSON (the caller says
        whether the request asked for a stream)."""
        return (self.status is not None and 200 <= self.status < 300
                and self.content_type() != "application/json")


class Target:
    """An ``http://`` URL, parsed once: the pool key, the Host header, the request path."""

    __slots__ = ("key", "host", "port", "hostport", "path", "addrs")

    def __init__(self, url: str):
        u = urlsplit(url)
        if u.scheme != "http":
            raise ValueError(f"wire transport: only http:// URLs, got {url!r}")
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or 80
        self.key = (self.host, self.port)
        h = f"[{self.host}]" if ":" in self.host else self.host
        self.hostport = h if self.port == 80 else f"{h}:{self.port}"
        self.path = (u.path or "/") + (f"?{u.query}" if u.query else "")
        self.addrs: Optional[list] = None                 # resolved once, the one that worked first


def request_head(method: str, tg: Target, headers: Optional[dict], body: bytes,
                 close: bool = False) -> bytes:
    """The request's bytes: request line, Host, the caller's headers (framing ones dropped:
    the transport frames), User-Agent and Accept unless given, Content-Length, the body."""
    lines = [f"{method} {tg.path} HTTP/1.1", f"Host: {tg.hostport}"]
    have = set()
    for k, v in (headers or {}).items():
        lk = k.lower()
        if lk in _FRAMING:
            continue
        have.add(lk)
        lines.append(f"{k}: {v}")
    if "user-agent" not in have:
        lines.append(f"User-Agent: {USER_AGENT}")
    if "accept" not in have:
        lines.append("Accept: */*")
    if body or method not in ("GET", "HEAD"):
        lines.append(f"Content-Length: {len(body)}")
    if close:
        lines.append("Connection: close")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("utf-8") + body


def connect_failure(e: OSError) -> tuple:
    """(error_kind, message) of a failed connect: out of file descriptors (EMFILE / ENFILE) is
    loadgen's own fault (``client``), anything else the way to the server (``connection``)."""
    if getattr(e, "errno", None) in (errno.EMFILE, errno.ENFILE):
        return "client", (f"{type(e).__name__}: {e} (loadgen ran out of file descriptors: raise "
                          "the limit, `ulimit -n`, or spread the sockets over processes, --procs)")
    return "connection", f"{type(e).__name__}: {e}"
