"""What real servers do to the client (issue 11): stale keep-alive sockets, their SSE dialects.

Stale connections come from the calibration server's ``close_after`` (llama.cpp's llama-server
closes the socket after a stream it announced as keep-alive); SSE dialects from small scripted
servers (tests/loadgen/client/fakes.py) replaying the shapes in the field notes.
"""
import asyncio
import json
import subprocess
import sys
from pathlib import Path

import aiohttp
import pytest
from aiohttp.http_parser import RawResponseMessage

from loadgen.client.aiohttp_transport import stale_connection_error
from loadgen.client.http_client import Client, ClientConfig, RequestSpec
from loadgen.scenario.workload import PromptSpec
from tests.loadgen.client.fakes import FakeOpenAI, chat_chunk, cmpl_chunk, sse, usage

_ids = iter(range(10**6))


@pytest.fixture(params=["wire", "aiohttp"])
def transport(request, monkeypatch):
    """The transport every Client of the test picks (LOADGEN_HTTP, as a user would set it)."""
    monkeypatch.setenv("LOADGEN_HTTP", request.param)
    return request.param


def cfg(url, calib=None, **kw):
    extra = {"calib": calib} if calib is not None else {}
    return ClientConfig(base_url=url, model="calib-model", extra_body=extra, timeout_s=10, **kw)


def spec(max_tokens=4, scheduled_at_ns=None):
    i = next(_ids)
    s = RequestSpec.of(PromptSpec(f"stale-{i} hello", 2, max_tokens), i)
    s.scheduled_at_ns = scheduled_at_ns
    return s


async def sequential(c, n, max_connections=1):
    async with Client(c, max_connections) as client:
        recs = []
        for _ in range(n):
            recs.append(await client.execute(spec(scheduled_at_ns=1)))
        return recs, client.describe()


# -- stale keep-alive connections -------------------------------------------------------------

@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_a_stale_pooled_connection_is_retried_once_on_a_fresh_one(calib_server, endpoint, transport):
    # "next": the server keeps the socket after the stream and drops the next request on it
    # unanswered, every time: the 2nd request meets a stale pooled connection deterministically
    recs, info = await sequential(cfg(calib_server.url, {"close_after": "next", "itl_ms": 1},
                                      endpoint=endpoint), 4)
    assert [r.status for r in recs] == ["ok"] * 4, [r.error for r in recs]
    assert [r.retries for r in recs] == [0, 1, 0, 0]
    r = recs[1]
    assert r.first_sent_at_ns is not None and r.first_sent_at_ns < r.sent_at_ns
    assert r.scheduled_at_ns == 1                        # unchanged: from-scheduled carries it
    assert "disconnected" in r.retry_error.lower() or "reset" in r.retry_error.lower()
    assert r.output_tokens == 4 and r.first_token_at_ns > r.sent_at_ns
    assert all(x.first_sent_at_ns is None and x.retry_error is None for x in recs if not x.retries)
    # after one stale socket the client stops reusing connections: no second retry
    assert info == {"stale_connection_retries": 1, "reuse_connections": False}
    seen = [e["prompt"] for e in calib_server.log() if e["prompt"].startswith("stale-")]
    for rec in recs:   # the server answered each request once (the dropped attempt unlogged)
        assert seen.count(f"stale-{rec.id} hello") == 1


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_a_server_that_closes_after_each_stream_loses_no_request(calib_server, endpoint, transport):
    # like llama-server: "Keep-Alive: timeout=5" and then the socket closes after the stream;
    # a bare pooled client fails about every second request here
    recs, info = await sequential(cfg(calib_server.url, {"close_after": True, "itl_ms": 1},
                                      endpoint=endpoint), 12)
    assert [r.status for r in recs] == ["ok"] * 12, [r.error for r in recs if r.error]
    assert all(r.output_tokens == 4 for r in recs)
    for r in recs:
        assert r.retries in (0, 1)
        if r.retries:
            assert r.first_sent_at_ns < r.sent_at_ns and r.retry_error
    assert info["stale_connection_retries"] == sum(r.retries for r in recs) <= 1


async def test_a_fresh_connection_that_fails_is_not_retried(transport):
    accepted = []

    async def slam(reader, writer):         # reads the request, closes without a byte
        accepted.append(1)
        await reader.read(100)
        writer.close()
    server = await asyncio.start_server(slam, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        recs, info = await sequential(cfg(f"http://127.0.0.1:{port}"), 1)
    finally:
        server.close()
        await server.wait_closed()
    r = recs[0]
    assert (r.status, r.error_kind, r.retries, r.first_sent_at_ns) == ("error", "connection", 0, None)
    assert len(accepted) == 1 and info["stale_connection_retries"] == 0


async def test_a_drop_mid_stream_is_not_retried(calib_server, transport):
    # on a reused connection, but the answer had begun: never sent twice
    c = cfg(calib_server.url, {"itl_ms": 1})
    async with Client(c, 1) as client:
        first = await client.execute(spec())
        client.shape.base = {**client.shape.base, "calib": {"fault": "drop", "fault_at": 1, "itl_ms": 1}}
        dropped = await client.execute(spec())
    assert first.status == "ok"
    assert (dropped.status, dropped.error_kind, dropped.retries) == ("error", "connection", 0)
    assert dropped.chunk_output_tokens == 1


def test_which_errors_mean_a_stale_connection():
    class Key:
        host, port, ssl = "127.0.0.1", 1, None
    assert stale_connection_error(aiohttp.ServerDisconnectedError())
    assert stale_connection_error(aiohttp.ClientOSError(None, "Can not write request body"))
    assert stale_connection_error(aiohttp.ClientOSError(104, "Connection reset by peer"))
    partial = RawResponseMessage(version=(1, 1), code=200, reason="OK", headers={}, raw_headers=(),
                                 should_close=False, compression=None, upgrade=False,
                                 chunked=True)
    assert not stale_connection_error(aiohttp.ServerDisconnectedError(partial))
    assert not stale_connection_error(aiohttp.ClientConnectorError(Key(), ConnectionRefusedError(
        111, "refused")))
    assert not stale_connection_error(aiohttp.ClientPayloadError("truncated"))
    assert not stale_connection_error(asyncio.TimeoutError())


# -- the real servers' SSE dialects -----------------------------------------------------------

async def run_script(pieces, endpoint="chat", **kw):
    with FakeOpenAI(stream=pieces) as srv:
        c = ClientConfig(base_url=srv.url, model="fake-model", endpoint=endpoint, timeout_s=10, **kw)
        async with Client(c, 1) as client:
            return await client.execute(spec(max_tokens=4))


async def test_llama_server_chat_stream(transport):
    # role chunk with "content": null; the last chunk carries finish_reason, usage and timings
    last = chat_chunk({}, "length", usage(4))
    last["timings"] = {"predicted_n": 4, "predicted_ms": 12.5}
    rec = await run_script(sse(chat_chunk({"role": "assistant", "content": None}),
                               *[chat_chunk({"content": w}) for w in (" a", " b", " c", " d")],
                               last))
    assert rec.status == "ok", rec.error
    assert [n for _, n in rec.chunks] == [0, 1, 1, 1, 1, 0]
    assert rec.first_token_at_ns == rec.chunks[1][0]
    assert (rec.output_tokens, rec.token_count_mismatch, rec.finish_reason) == (4, False, "length")


async def test_transformers_serve_stream_no_done_usage_on_finish_merged_pieces(transport):
    # no "data: [DONE]", usage rides on the finish chunk, byte-level pieces merged (chunks != tokens)
    rec = await run_script(sse(chat_chunk({"role": "assistant", "content": ""}),
                               chat_chunk({"content": " ab"}),
                               chat_chunk({"content": " cd"}, "length", usage(4)), done=False))
    assert rec.status == "ok", rec.error
    assert rec.end_at_ns is not None and rec.end_at_ns >= rec.chunks[-1][0]
    assert (rec.output_tokens, rec.output_tokens_source, rec.chunk_output_tokens) == (4, "usage", 2)
    assert rec.token_count_mismatch is True          # flagged, usage wins


async def test_ping_comments_crlf_and_several_events_per_write(transport):
    events = sse(*[cmpl_chunk(f" {w}") for w in "abc"], cmpl_chunk(" d", "length"),
                 {"choices": [], "usage": usage(4)}, sep=b"\r\n\r\n")
    pieces = [b": ping - 2026-12-02 10:00:00.000000+00:00\r\n\r\n", events[0] + events[1],
              b": ping\n\nevent: ping\ndata: 2026-12-02\n\n", b"".join(events[2:])]
    rec = await run_script(pieces, endpoint="completions")
    assert rec.status == "ok", rec.error
    assert [n for _, n in rec.chunks] == [1, 1, 1, 1, 0]
    assert rec.chunks[0][0] == rec.chunks[1][0]       # one read, one stamp
    assert (rec.output_tokens, rec.token_count_mismatch) == (4, False)


async def test_vllm_special_tokens_with_continuous_usage_are_counted(transport):
    # vLLM streams special tokens as "content": "" and its running usage still counts them
    u = usage
    rec = await run_script(sse(chat_chunk({"role": "assistant", "content": ""}, usage=u(0)),
                               chat_chunk({"content": ""}, usage=u(1)),     # e.g. <think>
                               chat_chunk({"content": " a"}, usage=u(2)),
                               chat_chunk({"content": " b c"}, usage=u(4)),
                               chat_chunk({"content": ""}, "stop", usage=u(5)),  # EOS
                               {"id": "c", "choices": [], "usage": u(5)}),
                           continuous_usage=True)
    assert rec.status == "ok", rec.error
    assert [n for _, n in rec.chunks] == [0, 1, 1, 2, 1, 0]
    assert (rec.output_tokens, rec.chunk_output_tokens, rec.token_count_mismatch) == (5, 5, False)


async def test_stream_ending_without_done_or_finish_reason_is_still_incomplete(transport):
    rec = await run_script(sse(chat_chunk({"content": " a"}), done=False))
    assert (rec.status, rec.error_kind) == ("error", "incomplete")


async def test_request_body_drops_the_fields_the_probe_found_rejected(transport):
    with FakeOpenAI() as srv:
        c = ClientConfig(base_url=srv.url, model="fake-model", continuous_usage=True,
                         extra_body={"min_tokens": 2, "temperature": 0},
                         drop_fields=("ignore_eos", "min_tokens",
                                      "stream_options.continuous_usage_stats"))
        async with Client(c, 1) as client:
            rec = await client.execute(spec())
        body = srv.bodies[-1]
    assert rec.status == "ok"
    assert "ignore_eos" not in body and "min_tokens" not in body and body["temperature"] == 0
    assert body["stream_options"] == {"include_usage": True}
    assert json.dumps(body)  # plain JSON


LOCUST_SCRIPT = r"""
import json, sys
from gevent import monkey; monkey.patch_all()
from loadgen.client.gevent_wire.client import GWire, execute
from loadgen.record import Record
from loadgen.client.sse import StreamTally
wire = GWire(sys.argv[1] + "/v1/completions", 5, 5)     # one Locust user's client
out = []
for i in range(3):
    body = json.dumps({"model": "calib-model", "prompt": f"locust-stale-{i}", "max_tokens": 3,
                       "stream": True, "calib": {"close_after": "next", "itl_ms": 1}}).encode()
    rec = Record(id=i, phase="measured", scheduled_at_ns=0)
    execute(wire, {"Content-Type": "application/json"}, body, True, rec, StreamTally())
    out.append(rec.__dict__)
print(json.dumps(out))
"""


def test_the_locust_user_retries_a_stale_socket_the_same_way(calib_server):
    root = Path(__file__).resolve().parents[3]
    r = subprocess.run([sys.executable, "-c", LOCUST_SCRIPT, calib_server.url], cwd=root,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    recs = json.loads(r.stdout.strip().splitlines()[-1])
    assert [x["status"] for x in recs] == ["ok"] * 3, [x["error"] for x in recs]
    assert [x["retries"] for x in recs] == [0, 1, 0]     # then no reuse: the native rule
    assert all(x["first_sent_at_ns"] < x["sent_at_ns"] and "closed" in x["retry_error"]
               for x in recs[1:2])
