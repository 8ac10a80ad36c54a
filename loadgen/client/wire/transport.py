"""``client.Client``'s transport for plain ``http://`` targets: the wire pool, one request at a time.

    send(data, headers, rec, tally)
        pool.request (the hot path: kernel-stamped reads, nothing parsed but HTTP framing)
        ─► pool.fill (sliced: SSE, JSON, token tally ─► rec) ─► back to Client (request.finish)
    cancelled while the request is in flight: what was read fills ``rec`` at once (the response
    says ``cancelled``), then CancelledError; cancelled while filling: the filler finishes it.
"""
from __future__ import annotations

import asyncio
from typing import Optional

from loadgen.client.sse import StreamTally
from loadgen.client.wire.fill import drive, fill_steps
from loadgen.client.wire.http1 import WireResponse
from loadgen.client.wire.pool import WirePool
from loadgen.record import Record


class WireTransport:
    name = "wire"

    def __init__(self, url: str, max_connections: int, timeout_s: float,
                 connect_timeout_s: Optional[float], stream: bool):
        self.url, self.stream = url, stream
        self.pool = WirePool(limit=max_connections, timeout_s=timeout_s,
                             connect_timeout_s=connect_timeout_s, stop_reuse_after_retry=True)
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

    async def send(self, data: bytes, headers: dict, rec: Record, tally: StreamTally) -> None:
        """One POST into ``rec`` (all but ``request.finish``); raises only CancelledError."""
        resp = WireResponse()
        try:
            await self.pool.request("POST", self.url, headers, data, resp=resp,
                                    on_headers=self._on_headers)
        except asyncio.CancelledError:
            drive(fill_steps(resp, rec, tally, self.stream, 0))
            raise
        await self.pool.fill(resp, rec, tally, stream=self.stream)
