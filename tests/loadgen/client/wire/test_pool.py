"""loadgen/client/wire/pool.py (with conn.py, read_mux.py) against real servers on 127.0.0.1.

The calibration server (``calib_server``) for the OpenAI streams and faults; small raw asyncio
servers for what it cannot do. No timing is asserted: only causality (sent <= stamps <= after
the call) and order.
"""
import asyncio
import os
import select
import socket
import sys

import pytest

from loadgen.client import kernel_stamps
from loadgen.client.wire.record_fill import fill_record
from loadgen.client.http1.message import WireResponse
from loadgen.client.wire.pool import WirePool
from loadgen.record import now_ns
from tests.loadgen.client.wire.support import (SSE_BODY, RawServer, blank, cfg, read_request, spec,
                                               wire_one)

HAVE_KSTAMP = kernel_stamps.StampKeeper().active
# Linux stamps loopback reads in the kernel (SO_TIMESTAMPNS): there, a read without a stamp is a
# failure, not a reason to skip. Elsewhere (or a sandbox kernel without the option, said out loud
# with LOADGEN_TESTS_NO_KERNEL_STAMPS=1) user-space stamps are the expected ones.
KSTAMP_EXPECTED = sys.platform.startswith("linux") and not os.environ.get("LOADGEN_TESTS_NO_KERNEL_STAMPS")


def test_kernel_stamps_are_on_where_the_platform_has_them():
    if not KSTAMP_EXPECTED:
        pytest.skip("no kernel receive stamps expected on this platform")
    keeper = kernel_stamps.StampKeeper()
    try:
        assert keeper.active and keeper.probe() > 0      # a loopback read carried SCM_TIMESTAMPNS
    finally:
        keeper.close()


# ------------------------------------------------------------------------ streams
@pytest.mark.parametrize("endpoint,mux", [("completions", "epoll"), ("chat", "epoll"),
                                          ("completions", "loop")])
async def test_chunked_sse_is_read_whole_and_split_into_stamped_pieces(calib_server, endpoint, mux):
    c = cfg(calib_server, {"ttft_ms": 20, "itl_ms": 5}, endpoint=endpoint)
    s = spec(max_tokens=8)
    before = now_ns()
    async with WirePool(limit=2, mux=mux) as pool:
        resp, rec = await wire_one(c, s, pool)
        info = pool.describe()
    after = now_ns()
    assert resp.status == 200 and resp.complete and resp.error_kind is None
    assert info["mux"] == (mux if hasattr(select, "epoll") else "loop")   # gevent removes epoll
    assert info["responses"] == 1
    assert resp.headers["transfer-encoding"] == "chunked"
    assert resp.headers["content-type"].startswith("text/event-stream")
    assert dict(resp.raw_headers)["Content-Type"] == resp.headers["content-type"]
    # the stream came in pieces (at least the headers' read and one more; how many more depends
    # on the box's load: a late read coalesces segments)
    assert len(resp.reads) >= 1 and resp.n_reads >= 2
    stamps = [t for t, _ in resp.reads]
    assert stamps == sorted(stamps)
    assert before <= resp.sent_at_ns <= stamps[0] and stamps[-1] <= resp.end_at_ns <= after
    assert rec.status == "ok", rec.error
    assert rec.output_tokens == 8 and rec.chunk_output_tokens == 8 and rec.finish_reason == "length"
    assert all(resp.sent_at_ns <= t <= after for t, _ in rec.chunks)
    entry = [e for e in calib_server.log() if e["prompt"] == s.prompt][0]
    assert [n for _, n in rec.chunks] == [n for _, n in entry["chunks"]]
    for (tc, _), (ts, _) in zip(rec.chunks, entry["chunks"]):
        assert tc >= ts                                            # never before the server wrote it
    if KSTAMP_EXPECTED:
        assert resp.stamp_source == "kernel" and resp.kernel_reads == resp.n_reads
        assert info["stamp_source"] == "kernel" and info["clock"]["bracket_ns"] >= 0
        assert info["future_stamps"] == 0
        assert info["read_lag_ns"]["max"] >= 0                     # the loop reads after the kernel


async def test_user_stamps_when_asked(calib_server):
    c = cfg(calib_server, {"itl_ms": 2})
    async with WirePool(stamps="user") as pool:
        resp, rec = await wire_one(c, spec(4), pool)
        assert pool.describe()["stamp_source"] == "user" and pool.stamps.clock is None
    assert rec.status == "ok" and resp.stamp_source == "user" and resp.kernel_reads == 0


async def test_content_length_body(calib_server):
    c = cfg(calib_server, {"itl_ms": 1}, stream=False)
    resp, rec = await wire_one(c, spec(5))
    assert int(resp.headers["content-length"]) == len(resp.body()) > 0
    assert "transfer-encoding" not in resp.headers and resp.complete and resp.keep_alive
    assert rec.status == "ok" and rec.chunks == [] and rec.output_tokens == 5
    assert rec.end_at_ns == resp.end_at_ns >= resp.sent_at_ns


async def test_localhost_and_pooled_reuse(calib_server):
    c = cfg(calib_server, {"itl_ms": 1})
    c.base_url = c.base_url.replace("127.0.0.1", "localhost")
    async with WirePool(limit=3) as pool:
        for _ in range(3):
            recs = await asyncio.gather(*(wire_one(c, spec(3), pool) for _ in range(3)))
            assert all(r.status == "ok" for _, r in recs)
        assert pool.connections_opened <= 3 and pool.retries == 0
        assert pool.describe()["responses"] == 9


# ------------------------------------------------------------------------ connection handling
async def test_connection_close_is_honoured():
    async def handler(srv, reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n"
                     b"Content-Length: %d\r\n\r\n" % len(SSE_BODY) + SSE_BODY)
        await writer.drain()
        await srv.wait_eof(reader)                   # the server does NOT close: the client must

    async with RawServer(handler) as srv, WirePool() as pool:
        for _ in range(2):
            srv.eof.clear()
            resp = await pool.request("POST", srv.url + "/v1/completions", {}, b"{}")
            assert resp.complete and not resp.keep_alive and resp.retries == 0
            await asyncio.wait_for(srv.eof.wait(), 5)          # hang guard, not a timing
        assert srv.connections == 2 and pool.connections_opened == 2 and not pool._conns
    rec = blank()
    fill_record(resp, rec, stream=True)
    assert rec.status == "ok" and [n for _, n in rec.chunks] == [1, 1]


async def test_read_until_close_body():
    async def handler(srv, reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
        for piece in SSE_BODY.split(b"\n\n")[:-1]:
            writer.write(piece + b"\n\n")
            await writer.drain()
            await asyncio.sleep(0.002)
        writer.close()

    async with RawServer(handler) as srv, WirePool() as pool:
        resp = await pool.request("POST", srv.url + "/x", {}, b"{}")
    assert resp.complete and resp.error_kind is None and resp.body() == SSE_BODY
    rec = blank()
    fill_record(resp, rec, stream=True)
    assert rec.status == "ok" and rec.chunk_output_tokens == 2


async def test_stale_pooled_connection_is_retried_once_on_a_fresh_one(calib_server):
    c = cfg(calib_server, {"close_after": "next", "itl_ms": 1})
    async with WirePool(limit=1) as pool:
        first, rec1 = await wire_one(c, spec(3), pool)
        second, rec2 = await wire_one(c, spec(3), pool)       # pooled socket: the server drops it
        third, rec3 = await wire_one(c, spec(3), pool)
        info = pool.describe()
    assert rec1.status == rec2.status == rec3.status == "ok", (rec2.error, rec2.retry_error)
    assert (first.retries, second.retries, third.retries) == (0, 1, 0)
    assert rec2.retries == 1 and rec2.first_sent_at_ns < rec2.sent_at_ns and rec2.retry_error
    assert second.new_connection and third.new_connection   # no reuse after the first retry
    assert info["stale_connection_retries"] == 1 and info["reuse_connections"] is False
    assert rec1.retries == 0 and rec1.first_sent_at_ns is None


async def test_a_failure_on_a_fresh_connection_is_not_retried():
    answered = []

    async def handler(srv, reader, writer):
        await read_request(reader)
        if not answered:                              # the first request ever is answered
            answered.append(1)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
            await writer.drain()
            await read_request(reader)                # then every request is dropped unanswered
        writer.transport.abort()

    async with RawServer(handler) as srv, WirePool() as pool:
        ok = await pool.request("POST", srv.url + "/", {}, b"{}")
        reused = await pool.request("POST", srv.url + "/", {}, b"{}")    # stale, then fresh: fails
        fresh = await pool.request("POST", srv.url + "/", {}, b"{}")     # fresh from the start
    assert ok.complete and ok.status == 200
    assert (reused.error_kind, reused.retries) == ("connection", 1) and reused.first_sent_at_ns
    assert (fresh.error_kind, fresh.retries, fresh.first_sent_at_ns) == ("connection", 0, None)
    assert srv.connections == 3 and pool.retries == 1


async def test_connection_refused_and_https_are_records():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    async with WirePool() as pool:
        refused = await pool.request("POST", f"http://127.0.0.1:{port}/", {}, b"{}")
        tls = await pool.request("POST", "https://127.0.0.1/", {}, b"{}")
    assert refused.error_kind == "connection" and refused.retries == 0 and refused.sent_at_ns is None
    assert tls.error_kind == "client" and "http://" in tls.error


async def test_bad_http_and_cut_chunked_body():
    async def handler(srv, reader, writer):
        req = await read_request(reader)
        if b"/bad" in req:
            writer.write(b"SPDY/9 what\r\n\r\n")
        else:
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                         b"Transfer-Encoding: chunked\r\n\r\n10\r\ndata: {\"choi")
        await writer.drain()
        writer.close()

    async with RawServer(handler) as srv, WirePool() as pool:
        bad = await pool.request("POST", srv.url + "/bad", {}, b"{}")
        cut = await pool.request("POST", srv.url + "/cut", {}, b"{}")
    assert bad.error_kind == "protocol" and bad.retries == 0
    assert cut.error_kind == "connection" and cut.status == 200 and not cut.complete
    rec = blank()
    fill_record(cut, rec, stream=True)
    assert (rec.status, rec.error_kind, rec.http_status) == ("error", "connection", 200)


async def test_cancellation_closes_the_socket_and_keeps_what_was_read():
    async def handler(srv, reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                     b"Transfer-Encoding: chunked\r\n\r\n")
        ev = SSE_BODY.split(b"\n\n")[0] + b"\n\n"
        writer.write(b"%x\r\n%s\r\n" % (len(ev), ev))
        await writer.drain()
        await srv.wait_eof(reader)                    # stalls until the client goes

    async with RawServer(handler) as srv, WirePool() as pool:
        got = asyncio.Event()
        resp = WireResponse()
        task = asyncio.ensure_future(pool.request("POST", srv.url + "/", {}, b"{}", resp=resp,
                                                  on_headers=lambda r: got.set()))
        await asyncio.wait_for(got.wait(), 5)
        while not resp.reads:                         # the first event's read
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await asyncio.wait_for(srv.eof.wait(), 5)     # the server saw the client close
        assert not pool._conns and not pool._idle.get(("127.0.0.1", int(srv.url.rsplit(":", 1)[1])))
    assert resp.error_kind == "cancelled" and resp.end_at_ns >= resp.sent_at_ns
    rec = blank()
    fill_record(resp, rec, stream=True)
    assert (rec.status, rec.error_kind) == ("cancelled", "cancelled")
    assert [n for _, n in rec.chunks] == [1] and rec.first_token_at_ns is not None


async def test_idle_connection_closed_by_the_server_is_not_reused():
    async def handler(srv, reader, writer):
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
        await writer.drain()
        writer.close()                                # keep-alive said, then closed while idle
        srv.eof.set()

    async with RawServer(handler) as srv, WirePool() as pool:
        a = await pool.request("GET", srv.url + "/", {}, b"")
        await asyncio.wait_for(srv.eof.wait(), 5)
        for _ in range(50):                           # let the loop see the FIN
            if not pool._conns:
                break
            await asyncio.sleep(0.01)
        b = await pool.request("GET", srv.url + "/", {}, b"")
    assert a.complete and b.complete and b.retries == 0 and b.new_connection
