"""One hop rule for every driver (loadgen.client.http1.redirects.Hops): a same-host 307 loop is
followed ``MAX_HOPS`` times, then the last answer fails the request as ``redirect`` — on the
asyncio wire transport and on aiohttp alike (real sockets, a raw server)."""
from __future__ import annotations

import asyncio

import pytest

from loadgen.client.http1.redirects import MAX_HOPS
from loadgen.client.http_client import Client
from tests.loadgen.client.wire.support import RawServer, cfg, read_request, spec


@pytest.mark.parametrize("transport", ["wire", "aiohttp"])
def test_a_redirect_loop_stops_at_the_hop_limit(transport):
    async def handler(srv, reader, writer):
        while True:
            await read_request(reader)
            srv.requests = getattr(srv, "requests", 0) + 1
            writer.write(b"HTTP/1.1 307 Temporary Redirect\r\nLocation: /v1/again\r\n"
                         b"Content-Length: 0\r\n\r\n")
            await writer.drain()

    async def run():
        async with RawServer(handler) as srv:
            c = cfg(srv, follow_redirects="same-host")
            async with Client(c, 2, transport=transport) as client:
                rec = await asyncio.wait_for(client.execute(spec(4)), 10)
            return rec, srv.requests

    rec, requests = asyncio.run(run())
    assert requests == MAX_HOPS + 1
    assert (rec.status, rec.error_kind, rec.http_status) == ("error", "redirect", 307)
    assert "/v1/again" in rec.error
