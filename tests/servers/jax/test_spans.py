"""The JAX server's own spans (servers/jax/spans.py, servers/otlp.py): the attributes from its
stamps, and, in-process over the FakeOrchestrator, one span per traced request landing in
loadgen's real OTLP receiver in the caller's trace — none for an untraced or malformed header."""
from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp.test_utils import TestClient, TestServer

from analysis.server.otlp_receiver import Receiver
from servers.jax.api import create_app
from servers.jax.metrics import RequestTiming
from servers.jax.serve import build_parser, check_args
from servers.jax.spans import attributes
from servers.jax.tokenizer import ByteTokenizer
from servers.otlp import parse_traceparent
from tests.servers.jax.fakes import FakeOrchestrator

MS = 1_000_000
TRACE = "0af7651916cd43dd8448eb211c80319c"


def test_attributes_are_the_phases_between_the_stamps_in_seconds():
    t = RequestTiming(arrival_ns=1_000 * MS, scheduled_ns=1_004 * MS, first_token_ns=1_010 * MS,
                      last_token_ns=1_050 * MS, end_ns=1_051 * MS)
    a = attributes(t)
    assert a == pytest.approx({"gen_ai.latency.time_in_queue": 0.004,
                               "gen_ai.latency.time_in_model_prefill": 0.006,
                               "gen_ai.latency.time_to_first_token": 0.010,
                               "gen_ai.latency.time_in_model_decode": 0.040,
                               "gen_ai.latency.e2e": 0.051})


def test_a_phase_whose_stamp_is_missing_is_left_out_never_zero():
    a = attributes(RequestTiming(arrival_ns=0, end_ns=7 * MS))     # aborted before a slot
    assert a == pytest.approx({"gen_ai.latency.e2e": 0.007})


@pytest.mark.parametrize("value", [None, "", "00-" + "0" * 32 + "-b7ad6b7169203331-01",
                                   "01-" + TRACE + "-b7ad6b7169203331-01", "00-" + TRACE + "-xyz-01",
                                   "00-" + TRACE + "-b7ad6b7169203331-01" + "0" * 200])
def test_an_invalid_traceparent_gives_no_context(value):
    assert parse_traceparent(value) is None


def test_the_flag_takes_an_http_url_only():
    ap = build_parser()
    assert check_args(ap.parse_args(["--otlp-traces-endpoint", "http://127.0.0.1:4318/v1/traces"])) is None
    assert check_args(ap.parse_args(["--otlp-traces-endpoint", "localhost:4318"])).startswith(
        "--otlp-traces-endpoint:")


async def test_one_span_per_traced_request_in_the_callers_trace():
    rx = Receiver(0).start()
    orch = FakeOrchestrator(slots=1, max_queue=8)
    orch.start()
    app = create_app(orch, ByteTokenizer(258), {"preset": "fake"}, model_name="fake",
                     max_model_len=orch.max_model_len, ready=True, otlp_traces_endpoint=rx.endpoint)
    client = TestClient(TestServer(app, host="127.0.0.1"))
    await client.start_server()
    try:
        body = {"model": "fake", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
                "stream": True}
        headers = [{"traceparent": f"00-{TRACE}-b7ad6b7169203331-01"},
                   {"traceparent": f"00-{'1' * 32}-b7ad6b7169203331-01"},
                   {}, {"traceparent": "garbage"}]

        async def send(h):
            r = await client.post("/v1/chat/completions", json=body, headers=h)
            assert r.status == 200
            await r.read()
        await asyncio.gather(*(send(h) for h in headers))     # one slot: the others queue
        deadline = time.monotonic() + 30
        while len(rx.snapshot()["timings"]) < 2 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
    finally:
        await client.close()          # the app's cleanup waits for the posts in flight
        orch.stop()
        rx.stop()
    snap = rx.snapshot()
    assert set(snap["timings"]) == {TRACE, "1" * 32}
    assert snap["bad_spans"] == {} and snap["refused_bodies"] == {} and snap["foreign_spans"] == 0
    for t in snap["timings"].values():
        assert t["queue_ms"] >= 0 and t["prefill_ms"] >= 0 and t["decode_ms"] >= 0
        assert t["queue_ms"] + t["prefill_ms"] == pytest.approx(t["server_ttft_ms"], abs=1e-6)
        assert t["server_ttft_ms"] + t["decode_ms"] <= t["server_e2e_ms"] + 1e-6
        assert t["scheduler_ms"] is None               # not measured by this server
