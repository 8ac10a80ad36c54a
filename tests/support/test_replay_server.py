"""The replay server serves the recorded bytes: status, headers in order, body, chunking, close-after-answer."""
from __future__ import annotations

import pytest

from bench.compat import wire
from tests.support.replay_server import ReplayServer, Transcripts, chunk_bytes, features, servers

SERVERS = servers()
FRAMING = {"transfer-encoding", "content-length"}
VOLATILE = {"date"}          # aiohttp keeps a recorded Date as given; listed for clarity only

pytestmark = pytest.mark.skipif(not SERVERS, reason="no recorded transcripts in tests/fixtures/servers")


def _cases(t: Transcripts) -> list[dict]:
    return [c for c in t.cases.values() if "exchanges" not in c]


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("server", SERVERS)
def test_every_case_replays_byte_for_byte(server):
    t = Transcripts(server)
    with ReplayServer(server) as s:
        for case in _cases(t):
            req, rec = case["request"], case["response"]
            conn = wire.Conn(s.port, timeout_s=10)
            try:
                ex = conn.exchange(req["method"], req["path"], req["body"], req["headers"])
                closing = conn.after_body(0.2)
            finally:
                conn.close()
            name = f"{server}/{case['case']}"
            assert ex.error is None, name
            assert ex.status == rec["status"], name
            want = [(k.lower(), v) for k, v in rec["headers"] if k.lower() not in FRAMING]
            got = [(k.lower(), v) for k, v in ex.headers]
            assert [h for h in got if h in want] == want, name          # all recorded headers, in order
            assert ex.framing == rec["framing"], name
            assert ex.body == b"".join(chunk_bytes(c) for c in rec["chunks"]), name
            if rec["framing"] == "chunked":                              # one HTTP chunk per server write
                assert [c["data"] for c in ex.chunks] == [chunk_bytes(c) for c in rec["chunks"]], name
            assert closing["closed_by_server"] == bool(case["connection"]["closed_by_server"]), name


@pytest.mark.parametrize("server", SERVERS)
def test_requests_pick_the_matching_transcript(server):
    t = Transcripts(server)
    for case in _cases(t):
        req = case["request"]
        if req["method"] != "POST":
            continue
        picked = t.pick(req["path"], req["body"])
        assert picked is not None, case["case"]
        # the same request gets an answer with the same status (the case itself, or the error case
        # that shows the server rejecting one of its fields)
        assert picked["response"]["status"] == case["response"]["status"], case["case"]
        if case["response"]["status"] == 200:
            assert features(picked["request"]["body"]) == features(req["body"]), case["case"]


def test_delay_scale_spaces_the_chunks():
    server = SERVERS[0]
    t = Transcripts(server)
    streamed = [c for c in _cases(t) if c["response"]["framing"] == "chunked" and len(c["response"]["chunks"]) > 3
                and c["response"]["status"] == 200]
    case = max(streamed, key=lambda c: c["response"]["chunks"][-1]["t_ms"])
    span = case["response"]["chunks"][-1]["t_ms"] - case["response"]["chunks"][0]["t_ms"]
    scale = min(1.0, 500.0 / max(span, 1e-3))     # at most ~0.5 s of replay
    with ReplayServer(server, delay_scale=scale) as s:
        conn = wire.Conn(s.port, timeout_s=10)
        try:
            ex = conn.exchange("POST", case["request"]["path"], case["request"]["body"], case["request"]["headers"])
        finally:
            conn.close()
    got = ex.chunks[-1]["t_ms"] - ex.chunks[0]["t_ms"]
    assert got >= 0.8 * span * scale - 5, (got, span, scale)
