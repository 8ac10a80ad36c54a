"""Client against the real calibration server: timings vs the server's own log, every fault a record."""
import asyncio
import socket
import statistics

import pytest

from loadgen.client.client import Client, ClientConfig, RequestSpec

# Generous for a loaded 2-core box where either process can be descheduled for tens of ms;
# the causality and median checks against the server's own log are the tight ones.
LAG_MEDIAN_MS = 5.0    # client read time minus server write time, median over a stream
LAG_MAX_MS = 40.0
_ids = iter(range(10**6))


def cfg(server, calib=None, **kw):
    extra = dict(kw.pop("extra_body", {}))
    if calib is not None:
        extra["calib"] = calib
    return ClientConfig(base_url=server.url, model="calib-model", extra_body=extra, **kw)


def spec(prompt=None, max_tokens=8, prompt_tokens=3):
    i = next(_ids)
    return RequestSpec(id=i, phase="measured", prompt=prompt or f"req-{i} hello world",
                       prompt_tokens=prompt_tokens, max_tokens=max_tokens, scheduled_at_ns=None)


async def one(c, s=None, **kw):
    async with Client(c, 4) as client:
        return await client.execute(s or spec(**kw))


def server_entry(server, prompt):
    hits = [e for e in server.log() if e["prompt"] == prompt]
    assert len(hits) == 1, hits
    return hits[0]


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_stream_timing_matches_injected_truth_and_server_log(calib_server, endpoint):
    s = spec(max_tokens=12)
    rec = await one(cfg(calib_server, {"ttft_ms": 60, "itl_ms": 15}, endpoint=endpoint), s)
    assert rec.status == "ok", rec.error
    assert rec.output_tokens == 12 and rec.output_tokens_source == "usage"
    assert rec.chunk_output_tokens == 12 and rec.token_count_mismatch is False
    assert rec.finish_reason == "length" and rec.prompt_tokens_source == "usage"
    entry = server_entry(calib_server, s.prompt)
    assert len(entry["chunks"]) == len(rec.chunks)  # one client chunk per server data event
    lags = []
    for (tc, nc), (ts, ns) in zip(rec.chunks, entry["chunks"]):
        assert nc == ns
        lags.append((tc - ts) / 1e6)
    assert min(lags) >= 0                           # never read before the server wrote it
    assert statistics.median(lags) < LAG_MEDIAN_MS and max(lags) < LAG_MAX_MS
    server_ttft = (entry["chunks"][1 if endpoint == "chat" else 0][0] - entry["arrival_ns"]) / 1e6
    assert server_ttft >= 60                        # the injected truth is a floor for the server
    ttft_ms = (rec.first_token_at_ns - rec.sent_at_ns) / 1e6
    assert 60 <= ttft_ms < server_ttft + LAG_MAX_MS
    tok_c = [t for t, n in rec.chunks if n > 0]
    tok_s = [t for t, n in entry["chunks"] if n > 0]
    assert (tok_s[-1] - entry["arrival_ns"]) / 1e6 >= 60 + 11 * 15  # absolute deadlines
    gaps_c = [(b - a) / 1e6 for a, b in zip(tok_c, tok_c[1:])]
    gaps_s = [(b - a) / 1e6 for a, b in zip(tok_s, tok_s[1:])]
    assert abs(statistics.median(gaps_c) - 15) < 3.0
    assert statistics.median([abs(c - s) for c, s in zip(gaps_c, gaps_s)]) < 2.0
    body = entry["body"]
    assert body["stream"] is True and body["ignore_eos"] is True and body["max_tokens"] == 12
    assert body["stream_options"] == {"include_usage": True}
    assert body["model"] == "calib-model"


async def test_non_ascii_text_is_counted_in_characters(calib_server):
    rec = await one(cfg(calib_server, {"text": " ü中"}, endpoint="chat"), max_tokens=4)
    assert rec.status == "ok" and rec.chunk_output_tokens == 4 and rec.output_chars == 3 * 4


async def test_chat_role_only_first_chunk_is_not_the_first_token(calib_server):
    rec = await one(cfg(calib_server, {"ttft_ms": 80, "role_ms": 0}, endpoint="chat"), max_tokens=3)
    assert rec.status == "ok" and rec.chunks[0][1] == 0
    assert (rec.first_token_at_ns - rec.first_chunk_at_ns) / 1e6 > 80 - LAG_MAX_MS
    assert rec.first_token_at_ns == rec.chunks[1][0]


@pytest.mark.parametrize("fault,kind,http", [
    ("http500", "http", 500), ("http429", "http", 429), ("drop", "connection", 200),
    ("malformed", "malformed", 200), ("bad_json", "malformed", 200),
    ("error_event", "server_error", 200), ("no_done", "incomplete", 200),
    ("stall", "timeout", 200)])
async def test_every_fault_is_one_error_record(calib_server, fault, kind, http):
    c = cfg(calib_server, {"fault": fault, "fault_at": 2, "stall_s": 3}, timeout_s=0.6)
    rec = await one(c, max_tokens=6)
    assert (rec.status, rec.error_kind, rec.http_status) == ("error", kind, http), rec.error
    assert rec.error and rec.end_at_ns >= rec.sent_at_ns
    if http == 200 and fault != "no_done":
        assert rec.chunk_output_tokens == 2        # what arrived before the fault is kept
    if fault == "http500":
        assert "calibration http500" in rec.error


async def test_unusual_but_valid_sse_is_read_fine(calib_server):
    rec = await one(cfg(calib_server, {"fault": "noise", "fault_at": 1, "itl_ms": 5}), max_tokens=4)
    assert rec.status == "ok", rec.error
    assert (rec.chunk_output_tokens, rec.output_tokens, rec.token_count_mismatch) == (4, 4, False)


async def test_faults_and_successes_under_concurrency_give_one_record_each(calib_server):
    faults = [None, "http500", "drop", "malformed", "error_event", None, "no_done", None]
    clients = [Client(cfg(calib_server, {"fault": f, "itl_ms": 2}, timeout_s=5), 5) for f in faults]
    specs = [spec(max_tokens=5) for _ in range(40)]
    for c in clients:
        await c.__aenter__()
    try:
        recs = await asyncio.gather(*(clients[i % len(faults)].execute(s) for i, s in enumerate(specs)))
    finally:
        for c in clients:
            await c.__aexit__(None, None, None)
    assert sorted(r.id for r in recs) == sorted(s.id for s in specs)
    ok = [r for r in recs if r.status == "ok"]
    assert len(ok) == 15 and all(r.output_tokens == 5 for r in ok)
    assert {r.error_kind for r in recs if r.status != "ok"} == {
        "http", "connection", "malformed", "server_error", "incomplete"}


async def test_usage_missing_falls_back_to_chunk_count(calib_server):
    rec = await one(cfg(calib_server, {"usage": False}), max_tokens=7, prompt_tokens=11)
    assert rec.status == "ok"
    assert (rec.output_tokens, rec.output_tokens_source, rec.usage_output_tokens) == (7, "chunks", None)
    assert (rec.prompt_tokens, rec.prompt_tokens_source) == (11, "workload")
    assert rec.token_count_mismatch is None


async def test_usage_disagreeing_with_chunks_is_flagged_and_usage_wins(calib_server):
    rec = await one(cfg(calib_server, {"tokens_per_chunk": 2}), max_tokens=8)
    assert rec.status == "ok" and len([c for c in rec.chunks if c[1]]) == 4
    assert (rec.output_tokens, rec.chunk_output_tokens, rec.token_count_mismatch) == (8, 4, True)
    rec = await one(cfg(calib_server, {"usage_tokens": 3}), max_tokens=5)
    assert (rec.output_tokens, rec.chunk_output_tokens, rec.token_count_mismatch) == (3, 5, True)


async def test_continuous_usage_gives_exact_counts_per_chunk(calib_server):
    c = cfg(calib_server, {"tokens_per_chunk": 3}, continuous_usage=True, endpoint="chat")
    s = spec(max_tokens=9)
    rec = await one(c, s)
    assert [n for _, n in rec.chunks] == [0, 3, 3, 3, 0]
    assert (rec.output_tokens, rec.chunk_output_tokens, rec.token_count_mismatch) == (9, 9, False)
    opts = server_entry(calib_server, s.prompt)["body"]["stream_options"]
    assert opts == {"include_usage": True, "continuous_usage_stats": True}


async def test_non_streaming_has_e2e_and_usage_but_no_ttft(calib_server):
    rec = await one(cfg(calib_server, {"ttft_ms": 30, "itl_ms": 5}, stream=False), max_tokens=5)
    assert rec.status == "ok" and rec.chunks == [] and rec.first_token_at_ns is None
    assert (rec.output_tokens, rec.output_tokens_source) == (5, "usage")
    assert 50 <= (rec.end_at_ns - rec.sent_at_ns) / 1e6 < 50 + LAG_MAX_MS
    assert rec.output_chars == len(" tok") * 5


async def test_token_id_prompt_extra_body_headers_and_auth(calib_server):
    c = cfg(calib_server, extra_body={"temperature": 0.5}, ignore_eos=False, include_usage=False,
            api_key="sk-test", headers={"X-Trace": "1"})
    s = spec(prompt=[7, 8, 9, 10])
    rec = await one(c, s)
    assert rec.status == "ok" and rec.output_tokens_source == "chunks"
    assert (rec.prompt_tokens, rec.prompt_tokens_source) == (3, "workload")   # no usage asked for
    entry = server_entry(calib_server, str([7, 8, 9, 10]))
    assert entry["authorization"] == "Bearer sk-test"
    assert entry["body"]["temperature"] == 0.5
    assert "ignore_eos" not in entry["body"] and "stream_options" not in entry["body"]


async def test_connections_are_pooled_and_reused(calib_server):
    prompts = []
    async with Client(cfg(calib_server, {"itl_ms": 1}), 3) as client:
        for _ in range(4):
            specs = [spec(max_tokens=3) for _ in range(3)]
            prompts += [s.prompt for s in specs]
            recs = await asyncio.gather(*(client.execute(s) for s in specs))
            assert all(r.status == "ok" for r in recs)
        assert client.first_response_headers["Content-Type"].startswith("text/event-stream")
    ports = {e["peer_port"] for e in calib_server.log() if e["prompt"] in prompts}
    assert len(ports) <= 3


async def test_cancellation_fills_the_callers_record_and_reraises(calib_server):
    async with Client(cfg(calib_server, {"ttft_ms": 20, "itl_ms": 40}), 2) as client:
        s = spec(max_tokens=50)
        rec = client.new_record(s)
        task = asyncio.ensure_future(client.execute(s, rec))
        await asyncio.sleep(0.25)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert (rec.status, rec.error_kind) == ("cancelled", "cancelled")
    assert rec.first_token_at_ns is not None and 1 <= rec.chunk_output_tokens < 50
    assert rec.end_at_ns >= rec.chunks[-1][0]


async def test_connection_refused_is_a_record():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    c = ClientConfig(base_url=f"http://127.0.0.1:{port}", model="m", timeout_s=5)
    rec = await one(c)
    assert (rec.status, rec.error_kind, rec.http_status) == ("error", "connection", None)


async def test_bad_prompt_for_chat_is_a_client_record(calib_server):
    rec = await one(cfg(calib_server, endpoint="chat"), spec(prompt=[1, 2, 3]))
    assert (rec.status, rec.error_kind) == ("error", "client")
