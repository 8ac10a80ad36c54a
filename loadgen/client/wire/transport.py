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
from typing import Optional

from loadgen.client.http1.policy import parses_inline
from loadgen.client.http1.redirects import Hops
from loadgen.client.sse import StreamTally
from loadgen.client.stream_step import DEFAULT_LIMITS, Limits, StreamStep
from loadgen.client.wire.record_fill import catch_up_steps, drive, fill_steps
from loadgen.client.http1.message import WireResponse
from loadgen.client.wire.pool import WirePool
from loadgen.record import Record


class WireTransport:
    name = "wire"

    def __init__(self, url: str, max_connections: int, timeout_s: float,
                 connect_timeout_s: Optional[float], stream: bool, limits: Limits = DEFAULT_LIMITS,
                 follow_redirects: str = "never"):
        self.url, self.stream, self.limits = url, stream, limits
        self.follow_redirects = follow_redirects
        self.pool = WirePool(limit=max_connections, timeout_s=timeout_s,
                             connect_timeout_s=connect_timeout_s, stop_reuse_after_retry=True)
        self.pool.filler.limits = limits
        self.first_response_headers: Optional[dict] = None   # of the first answer (sut.json)

    async def open(self) -> None:
        self.pool.open()                 # probes kernel stamping (<= 0.2 s once), measures the clock

    async def close(self) -> None:
        self.pool.close()

    @property
    def retries(self) -> int:
        return self.pool.retries

    @property
    def reuse_connections(self) -> bool:
        return self.pool.reuse_connections

    def describe(self) -> dict:
        return self.pool.describe()

    def _on_headers(self, resp: WireResponse) -> None:
        if self.first_response_headers is None:
            self.first_response_headers = dict(resp.raw_headers)   # names as sent, like aiohttp's

    def _response(self, rec: Record, tally: StreamTally, hangup=None) -> WireResponse:
        resp = WireResponse(max_header_bytes=self.limits.max_header_bytes,
                            max_body_bytes=self.limits.max_body_bytes, stream=self.stream)
        filler, limits = self.pool.filler, self.limits
        if hangup is not None:                   # load.cancel (loadgen.client.hangup)
            resp.hangup = hangup
            if parses_inline(hangup):            # the stream parsed inline: tokens counted
                resp.inline_step = lambda r: StreamStep(
                    rec, tally, limits, r.headers.get("content-encoding"), hangup)

        def spill(r: WireResponse, then) -> None:
            filler.submit(catch_up_steps(r, rec, tally, limits, filler.every), then)

        resp.on_spill = spill
        return resp

    async def send(self, data: bytes, headers: dict, rec: Record, tally: StreamTally,
                   hangup=None) -> None:
        """One POST into ``rec`` (all but ``request.finish``); raises only CancelledError.
        Hops (loadgen.client.http1.redirects) decides whether an answer leads to another send
        (``follow_redirects``); the last answer is filled."""
        hops = Hops(self.url, self.follow_redirects)
        while True:
            resp = self._response(rec, tally, hangup)
            try:
                await self.pool.request("POST", hops.url, headers, data, resp=resp,
                                        on_headers=self._on_headers)
            except asyncio.CancelledError:
                drive(fill_steps(resp, rec, tally, self.stream, 0, self.limits))
                raise
            if not hops.follow(resp.status, resp.headers.get("location")):
                break
        await self.pool.fill(resp, rec, tally, stream=self.stream)
