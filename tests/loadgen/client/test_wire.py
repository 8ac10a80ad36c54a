"""The wire transport (loadgen/client/wire.py, kstamp.py) against real servers on 127.0.0.1.

The calibration server (``calib_server``) for the OpenAI streams and faults; small raw asyncio
servers for what it cannot do (Connection: close, read-until-close, bad HTTP, a socket that only
drops). Records are compared field by field with the aiohttp client's on the same answers. No
timing is asserted: only causality (sent <= stamps <= after the call) and order.
"""
import asyncio
import socket
import struct

import pytest

from loadgen.client import kstamp
from loadgen.client.client import Client, ClientConfig, RequestSpec, build_base_body
from loadgen.client.request import request_body, request_headers
from loadgen.client.wire import RecordFiller, WirePool, WireResponse, fill_record
from loadgen.record import Record, now_ns

HAVE_KSTAMP = kstamp.StampKeeper().active
_ids = iter(range(10**6))


# ------------------------------------------------------------------------ helpers
def cfg(server, calib=None, **kw):
    extra = dict(kw.pop("extra_body", {}))
    if calib is not None:
        extra["calib"] = calib
    return ClientConfig(base_url=server.url, model="calib-model", extra_body=extra, **kw)


def spec(max_tokens=8):
    i = next(_ids)
    return RequestSpec(id=i, phase="measured", prompt=f"wire-{i} hello world", prompt_tokens=3,
                       max_tokens=max_tokens)


def url_of(c: ClientConfig) -> str:
    return c.base_url + ("/v1/chat/completions" if c.endpoint == "chat" else "/v1/completions")


async def wire_one(c: ClientConfig, s: RequestSpec, pool: WirePool = None):
    """One request through the wire transport, the body and headers built as Client builds them."""
    own = pool is None
    pool = pool or WirePool(limit=4, timeout_s=c.timeout_s)
    if own:
        await pool.__aenter__()
    try:
        body = request_body(build_base_body(c), c.endpoint == "chat", s.prompt, s.max_tokens)
        resp = await pool.request("POST", url_of(c), request_headers(c, c.api_key), body)
    finally:
        if own:
            await pool.__aexit__()
    rec = Client.new_record(s)
    fill_record(resp, rec, stream=c.stream, continuous=c.continuous_usage,
                workload_prompt_tokens=s.prompt_tokens)
    return resp, rec


async def aiohttp_one(c: ClientConfig, s: RequestSpec):
    async with Client(c, 2) as client:
        return await client.execute(s)


def shape(rec: Record) -> dict:
    """Everything a record says but the times and the wording of a connection error."""
    d = dict(rec.__dict__)
    for k in ("id", "sent_at_ns", "first_chunk_at_ns", "first_token_at_ns", "end_at_ns",
              "first_sent_at_ns", "retry_error", "coalesced_reads"):
        d.pop(k, None)
    d["chunks"] = [n for _, n in rec.chunks]
    if rec.error_kind in ("connection", "timeout", "malformed"):
        d.pop("error")
    return d


class RawServer:
    """asyncio.start_server on 127.0.0.1 with a per-test handler; counts connections and EOFs."""

    def __init__(self, handler):
        self.handler = handler
        self.connections = 0
        self.eof = asyncio.Event()

    async def __aenter__(self):
        async def wrapped(reader, writer):
            self.connections += 1
            try:
                await self.handler(self, reader, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()
        self.server = await asyncio.start_server(wrapped, "127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc):
        self.server.close()

    async def wait_eof(self, reader):
        """Read until the client closes (sets ``eof``)."""
        while await reader.read(65536):
            pass
        self.eof.set()


async def read_request(reader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    n = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            n = int(line.split(b":")[1])
    return head + await reader.readexactly(n)


SSE_BODY = (b'data: {"choices":[{"index":0,"text":" a","finish_reason":null}]}\n\n'
            b'data: {"choices":[{"index":0,"text":" b","finish_reason":"length"}]}\n\n'
            b'data: [DONE]\n\n')


# ------------------------------------------------------------------------ the clock (pure)
def test_clock_conversion_on_fixed_numbers():
    samples = [(1_000, 5_000_000_700, 1_900),      # width 900
               (2_000, 5_000_001_350, 2_100),      # width 100: kept; midpoint 2_050
               (3_000, 5_000_002_000, 3_400),
               (4_000, 1, 3_999)]                  # mono went backwards: ignored
    off, width = kstamp.best_bracket(samples)
    assert (off, width) == (5_000_001_350 - 2_050, 100)
    cm = kstamp.ClockMap(off, width, 4, 0, "test")
    assert cm.to_mono(5_000_001_350) == 2_050 and cm.to_mono(5_000_011_350) == 12_050
    ts = struct.pack("qq", 1_700_000_000, 123_456_789)
    assert kstamp.realtime_ns(ts) == 1_700_000_000_123_456_789
    anc = [(socket.SOL_SOCKET, 99, b"x" * 16), (socket.SOL_SOCKET, kstamp.SCM_TIMESTAMPNS, ts)]
    assert kstamp.stamp_of(anc) == 1_700_000_000_123_456_789
    assert kstamp.stamp_of([]) is None
    with pytest.raises(ValueError):
        kstamp.best_bracket([])


def test_measure_takes_the_tightest_bracket_of_injected_clocks():
    mono = iter(range(0, 10_000, 10)).__next__          # +10 per call
    rt = iter(range(1_000_000, 2_000_000, 1_000)).__next__
    cm = kstamp.measure(5, mono=mono, realtime=rt)
    assert cm.width_ns == 10 and cm.samples == 5 and "tightest of 5" in cm.method
    assert cm.offset_ns == 1_000_000 - 5                 # first sample: (0, 1_000_000, 10)


def test_real_clock_offset_is_consistent():
    cm = kstamp.measure()
    import time
    m = now_ns()
    r = time.time_ns()
    assert cm.width_ns >= 0 and abs(cm.to_mono(r) - m) < 50_000_000   # same clock, any load


# ------------------------------------------------------------------------ streams
@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_chunked_sse_is_read_whole_and_split_into_stamped_pieces(calib_server, endpoint):
    c = cfg(calib_server, {"ttft_ms": 20, "itl_ms": 5}, endpoint=endpoint)
    s = spec(max_tokens=8)
    before = now_ns()
    async with WirePool(limit=2) as pool:
        resp, rec = await wire_one(c, s, pool)
        info = pool.describe()
    after = now_ns()
    assert resp.status == 200 and resp.complete and resp.error_kind is None
    assert resp.headers["transfer-encoding"] == "chunked"
    assert resp.headers["content-type"].startswith("text/event-stream")
    assert dict(resp.raw_headers)["Content-Type"] == resp.headers["content-type"]
    assert len(resp.reads) >= 8 and resp.n_reads >= 8            # the stream came in pieces
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
    if HAVE_KSTAMP:
        assert resp.stamp_source == "kernel" and resp.kernel_reads == resp.n_reads
        assert info["stamp_source"] == "kernel" and info["clock"]["bracket_ns"] >= 0
        assert info["future_stamps"] == 0
        assert info["read_lag_ns"]["max"] >= 0                     # the loop reads after the kernel


async def test_user_stamps_when_asked(calib_server):
    c = cfg(calib_server, {"itl_ms": 2})
    async with WirePool(stamps="user") as pool:
        resp, rec = await wire_one(c, spec(4), pool)
        assert pool.describe()["stamp_source"] == "user" and pool.clock is None
    assert rec.status == "ok" and resp.stamp_source == "user" and resp.kernel_reads == 0


@pytest.mark.parametrize("endpoint,calib,kw", [
    ("completions", {"itl_ms": 2}, {}),
    ("chat", {"itl_ms": 2, "reasoning_tokens": 2}, {}),
    ("chat", {"tokens_per_chunk": 3, "itl_ms": 1}, {"continuous_usage": True}),
    ("completions", {"usage": False}, {}),
    ("completions", {"tokens_per_chunk": 2}, {}),
    ("completions", {"fault": "http500"}, {}),
    ("completions", {"fault": "http429"}, {}),
    ("completions", {"fault": "drop", "itl_ms": 2}, {}),
    ("completions", {"fault": "malformed", "itl_ms": 2}, {}),
    ("completions", {"fault": "bad_json", "itl_ms": 2}, {}),
    ("chat", {"fault": "error_event", "itl_ms": 2}, {}),
    ("completions", {"fault": "no_done", "itl_ms": 2}, {}),
    ("completions", {"fault": "noise", "fault_at": 1, "itl_ms": 2}, {}),
    ("completions", {"fault": "stall", "stall_s": 3}, {"timeout_s": 0.5}),
    ("completions", {"ttft_ms": 10, "itl_ms": 2}, {"stream": False}),
    ("completions", {}, {}),                                       # the whole answer in one write
])
async def test_records_match_the_aiohttp_client_field_by_field(calib_server, endpoint, calib, kw):
    c = cfg(calib_server, calib, endpoint=endpoint, **kw)
    rec_a = await aiohttp_one(c, spec(6))
    _, rec_w = await wire_one(c, spec(6))
    assert shape(rec_w) == shape(rec_a)
    assert rec_w.end_at_ns >= rec_w.sent_at_ns


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
    rec = Record(id=0, phase="measured", scheduled_at_ns=None)
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
    rec = Record(id=0, phase="measured", scheduled_at_ns=None)
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
    assert bad.error_kind == "malformed" and bad.retries == 0
    assert cut.error_kind == "connection" and cut.status == 200 and not cut.complete
    rec = Record(id=0, phase="measured", scheduled_at_ns=None)
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
    rec = Record(id=0, phase="measured", scheduled_at_ns=None)
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


def test_coalesced_reads_are_counted():
    ev = [b'data: {"choices":[{"index":0,"text":" t","finish_reason":null}]}\n\n'] * 4
    resp = WireResponse(status=200, headers={"content-type": "text/event-stream"}, complete=True,
                        sent_at_ns=0, end_at_ns=40,
                        reads=[(10, ev[0]), (20, ev[1] + ev[2]),              # one read, two tokens
                               (30, ev[3][:20]), (40, ev[3][20:] + b"data: [DONE]\n\n")])
    rec = Record(id=0, phase="measured", scheduled_at_ns=None)
    rec.coalesced_reads = None                        # the field the integration adds to Record
    fill_record(resp, rec, stream=True)
    assert rec.status == "ok" and rec.chunks == [[10, 1], [20, 1], [20, 1], [40, 1]]
    assert rec.coalesced_reads == resp.coalesced_reads == 1 and rec.end_at_ns == 40


def _long_stream(n: int, t0: int) -> WireResponse:
    ev = b'data: {"choices":[{"index":0,"text":" t","finish_reason":null}]}\n\n'
    last = b'data: {"choices":[{"index":0,"text":" t","finish_reason":"length"}]}\n\ndata: [DONE]\n\n'
    reads = [(t0 + 10 * i, ev) for i in range(n - 1)] + [(t0 + 10 * n, last)]
    return WireResponse(status=200, headers={"content-type": "text/event-stream"}, complete=True,
                        sent_at_ns=t0, end_at_ns=t0 + 10 * n, reads=reads)


async def test_record_filler_gives_the_same_records_in_slices():
    filler = RecordFiller(budget_ns=1, every=4)       # the smallest slices: many loop turns
    resps = [_long_stream(40 + i, 1000 * i) for i in range(20)]
    direct = []
    for r in resps:
        rec = Record(id=0, phase="measured", scheduled_at_ns=None)
        fill_record(r, rec, stream=True)
        direct.append(rec)
    sliced = [Record(id=0, phase="measured", scheduled_at_ns=None) for _ in resps]
    await asyncio.gather(*(filler.fill(r, rec, stream=True) for r, rec in zip(resps, sliced)))
    assert [x.__dict__ for x in sliced] == [x.__dict__ for x in direct]
    assert sliced[0].status == "ok" and sliced[0].output_tokens == 40


async def test_record_filler_cancelled_still_fills_the_record():
    filler = RecordFiller(budget_ns=1, every=2)
    blockers = [filler.fill(_long_stream(200, 0), Record(id=0, phase="measured", scheduled_at_ns=None),
                            stream=True) for _ in range(3)]
    busy = asyncio.ensure_future(asyncio.gather(*blockers))
    rec = Record(id=1, phase="measured", scheduled_at_ns=None)
    task = asyncio.ensure_future(filler.fill(_long_stream(30, 0), rec, stream=True))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert rec.status == "ok" and rec.chunk_output_tokens == 30
    await busy


async def test_a_stepped_wall_clock_is_adopted_and_listed():
    async with WirePool() as pool:
        if pool.clock is None:
            pytest.skip("no kernel timestamps here")
        true = pool.clock.offset_ns
        pool.clock.offset_ns = true + 10_000_000          # as if REALTIME had been stepped by -10 ms
        moved = pool.check_clock()
        assert abs(moved + 10_000_000) < 1_000_000
        assert abs(pool.clock.offset_ns - true) < 1_000_000
        assert len(pool.clock_steps) == 1 and pool.describe()["clock_steps"] == pool.clock_steps
        assert abs(pool.check_clock()) < 500_000 and len(pool.clock_steps) == 1
