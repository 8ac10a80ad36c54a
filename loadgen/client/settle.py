"""How one HTTP/1.1 exchange settles its record: the rules every wire-like transport shares. Pure.

    WireResponse (status, headers, stamped body pieces, the end or the failure)
        begin            sent_at_ns, retries (a stale keep-alive connection's second attempt)
        status_failure   3xx: ``redirect`` (its Location); 429: ``rate_limited``; other non-2xx:
                         ``http`` (a body snippet); a 429/503's Retry-After ─► retry_after_s
                         (one that is not RFC 9110's: ignored, its reason in the error)
        stream_end       the stream step's end (ok | incomplete) and its coalesced reads
        whole_body       a non-streamed body: gzip/deflate, ``too_large``, request.apply_body
        ending           the exchange's own failure (timeout | connection | protocol |
                         too_large | cancelled | aborted: load.cancel's timer), unless the body
                         already settled the record

The settling half of the one HTTP/1.1 exchange (exchange.py reads, this decides). Used by
``fill.fill_steps`` (the asyncio wire transport, off the stamping path), by
``loadgen.client.gevent_wire.client`` (the Locust users, gevent) and by the aiohttp transport (status,
redirect, whole body over what aiohttp read): no I/O here, so every transport settles a record by
the same lines.
"""
from __future__ import annotations

import zlib
from typing import Optional

from loadgen.client.http1.redirects import REDIRECTS, redirect_message
from loadgen.client.hangup import abort
from loadgen.client.request import SNIPPET, apply_body, fail
from loadgen.client.retry import retry_after_checked
from loadgen.client.sse import StreamTally
from loadgen.client.stream_step import Limits, StreamStep, body_too_large, decoder
from loadgen.client.http1.message import WireResponse
from loadgen.record import Record, now_ns

CANCELLED = "the run was interrupted before the request ended"


def begin(resp: WireResponse, rec: Record) -> None:
    """The send time and the stale-connection retry, from the exchange."""
    if resp.sent_at_ns is not None:
        rec.sent_at_ns = resp.sent_at_ns
    if resp.retries:
        rec.retries, rec.first_sent_at_ns, rec.retry_error = (
            resp.retries, resp.first_sent_at_ns, (resp.retry_error or "")[:SNIPPET])


def error_body(status: int) -> bool:
    """An answer whose body is read as the error snippet: not 2xx, not a redirect."""
    return not 200 <= status < 300 and status not in REDIRECTS


def status_failure(resp: WireResponse, rec: Record) -> bool:
    """``http_status``; True when the status alone failed the request (redirect, non-2xx)."""
    status = rec.http_status = resp.status
    t_end = resp.end_at_ns if resp.end_at_ns is not None else resp.headers_at_ns
    if status in REDIRECTS:
        fail(rec, "redirect", redirect_message(status, resp.headers.get("location")), t_end)
        return True
    if status >= 300 or status < 200:
        snippet = resp.body()[:SNIPPET].decode("utf-8", "replace")
        ignored = None                   # a Retry-After that is not RFC 9110's: why
        if status in (429, 503):
            rec.retry_after_s, ignored = retry_after_checked(resp.headers.get("retry-after"))
        fail(rec, "rate_limited" if status == 429 else "http",
             f"HTTP {status}: {' '.join(snippet.split())}" + (f" ({ignored})" if ignored else ""),
             t_end)
        return True
    return False


def stream_end(resp: WireResponse, rec: Record, step: StreamStep) -> None:
    """A stream fed to its end: ok or incomplete (unless already settled), coalesced reads."""
    if (resp.complete or step.done) and not step.settled:   # done: [DONE], the body left open
        step.end(resp.end_at_ns if resp.end_at_ns is not None else rec.end_at_ns)
    resp.coalesced_reads = rec.coalesced_reads = step.coalesced


def whole_body(resp: WireResponse, rec: Record, tally: StreamTally, limits: Limits) -> None:
    """A complete non-streamed body (JSON), decoded as its Content-Encoding says."""
    rec.end_at_ns = resp.end_at_ns
    raw = resp.body()
    enc = resp.headers.get("content-encoding")
    try:
        z = decoder(enc)
        if z is not None:
            raw = z.decompress(raw, limits.max_body_bytes + 1) + (b"" if z.unconsumed_tail else z.flush())
    except (ValueError, zlib.error) as e:
        return fail(rec, "protocol", f"bad compressed body ({enc}): {e}", resp.end_at_ns)
    too = body_too_large(len(raw), limits)
    if too:
        return fail(rec, "too_large", too, resp.end_at_ns)
    apply_body(rec, tally, raw, resp.end_at_ns)


def ending(resp: WireResponse, rec: Record) -> None:
    """The exchange's own failure, unless the body already settled the record."""
    kind = resp.error_kind
    if kind == "cancelled":
        if rec.status != "ok":                        # complete before the interrupt: stays ok
            rec.status, rec.error_kind, rec.error = "cancelled", "cancelled", CANCELLED
        if rec.end_at_ns is None:
            rec.end_at_ns = resp.end_at_ns if resp.end_at_ns is not None else now_ns()
    elif kind == "aborted":                           # load.cancel's timer: what came stays
        if rec.status == "pending":
            abort(rec, resp.error or kind, resp.end_at_ns)
    elif kind is not None and (rec.status == "pending" or (
            kind in ("too_large", "protocol") and rec.status == "ok" and not resp.complete)):
        # after [DONE] the message must still end well: a trailer flood, bad framing fail it
        fail(rec, kind, resp.error or kind, resp.end_at_ns)
    elif rec.status == "pending" and resp.status is not None:
        fail(rec, "incomplete", "the response ended without a complete body", resp.end_at_ns)
    if resp.coalesced_reads is None:
        resp.coalesced_reads = rec.coalesced_reads = 0


def settle(resp: WireResponse, rec: Record, tally: StreamTally, step: Optional[StreamStep],
           limits: Limits) -> None:
    """All of it for an exchange whose stream (if any) was already fed to ``step``."""
    begin(resp, rec)
    if resp.status is not None and not status_failure(resp, rec):
        if step is not None:
            stream_end(resp, rec, step)
        elif resp.complete:
            whole_body(resp, rec, tally, limits)
    ending(resp, rec)
