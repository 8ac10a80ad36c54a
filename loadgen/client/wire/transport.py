"""``client.Client``'s transport for plain ``http://`` targets: the wire pool, one request at a time.

    send(data, headers, rec, tally)
        pool.request (the hot path: kernel-stamped reads, nothing parsed but HTTP framing)
        ─► pool.fill (sliced: stream_step.StreamStep ─► rec) ─► back to Client (request.finish)
        a response holding over 1 MiB unparsed: reading pauses while fill.catch_up_steps parses
        what is held (memory bounded whatever the server sends), then resumes
    cancelled while the request is in flight: what was read fills ``rec`` at once (the response
    says ``cancelled``), then CancelledError; cancelled while filling: the filler finishes it.
"""
from __future__ import annotations

import asyncio
from functools import partial
from typing import Optional

from loadgen.client.http1.policy import PolicyCounts, parses_inline
from loadgen.client.http1 import redirects
from loadgen.client.sse import StreamTally
from loadgen.client.stream_step import DEFAULT_LIMITS, Limits, StreamStep
from loadgen.client.wire.record_fill import catch_up_steps, drive, fill_steps
from loadgen.client.http1.message import Ask, WireResponse
from loadgen.client.wire.pool import WirePool
from loadgen.record import Record


class WireTransport(PolicyCounts):
    name = "wire"

    def __init__(self, url: str, max_connections: int, timeout_s: float,
                 connect_timeout_s: Optional[float], stream: bool, limits: Limits = DEFAULT_LIMITS,
                 follow_redirects: str = "never"):
        self.url, self.stream, self.limits = url, stream, limits
        self.follow_redirects = follow_redirects
        self.pool = WirePool(limit=max_connections, timeout_s=timeout_s,
                             connect_timeout_s=connect_timeout_s, stop_reuse_after_retry=True)
        self.pool.filler.limits = limits
        self.ask = Ask(stream=stream, max_header_bytes=limits.max_header_bytes,
                       max_body_bytes=limits.max_body_bytes)
        self.first_response_headers: Optional[dict] = None   # of the first answer (sut.json)

    async def open(self) -> None:
        self.pool.open()                 # probes kernel stamping (<= 0.2 s once), measures the clock

    async def close(self) -> None:
        self.pool.close()

    @property
    def policy(self):
        """The pool's ConnPolicy (PolicyCounts: retries, reuse_connections)."""
        return self.pool.policy

    def describe(self) -> dict:
        return self.pool.describe()

    def _on_headers(self, resp: WireResponse) -> None:
        if self.first_response_headers is None:
            self.first_response_headers = dict(resp.raw_headers)   # names as sent, like aiohttp's

    def _exchange_args(self, rec: Record, tally: StreamTally, hangup=None) -> dict:
        """pool.request's ``ask``, ``spill`` and ``make_step`` for one request (Conn.begin)."""
        filler, limits, ask, make_step = self.pool.filler, self.limits, self.ask, None
        if hangup is not None:                   # load.cancel (loadgen.client.hangup)
            ask = Ask(self.stream, limits.max_header_bytes, limits.max_body_bytes, hangup=hangup)
            if parses_inline(hangup):            # the stream parsed inline: tokens counted
                make_step = partial(_inline_step, rec, tally, limits, hangup)

        def spill(r: WireResponse, then, abort, finish) -> None:
            filler.submit(catch_up_steps(r, rec, tally, limits, filler.every, abort, finish), then)

        return {"ask": ask, "spill": spill, "make_step": make_step}

    async def send(self, data: bytes, headers: dict, rec: Record, tally: StreamTally,
                   hangup=None) -> None:
        """One POST into ``rec`` (all but ``request.finish``); raises only CancelledError.
        loadgen.client.http1.redirects.route decides whether an answer leads to another send
        (``follow_redirects``); the last answer is filled."""
        hops = redirects.route(self.url, self.follow_redirects)
        args = self._exchange_args(rec, tally, hangup)
        for url in hops:
            resp = WireResponse()
            try:
                await self.pool.request("POST", url, headers, data, resp=resp,
                                        on_headers=self._on_headers, **args)
            except asyncio.CancelledError:
                drive(fill_steps(resp, rec, tally, self.stream, 0, self.limits))
                raise
            hops.answered(resp.status, resp.headers.get("location"))
        await self.pool.fill(resp, rec, tally, stream=self.stream)


def _inline_step(rec: Record, tally: StreamTally, limits: Limits, hangup, r: WireResponse) -> StreamStep:
    """The stream step made once the headers are in (Exchange.make_step): load.cancel's tokens."""
    return StreamStep(rec, tally, limits, r.headers.get("content-encoding"), hangup)
