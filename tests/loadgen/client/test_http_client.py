"""Client against the real calibration server: timings vs the server's own log, every fault a
record; every test on both transports (wire: the default for http://; aiohttp: LOADGEN_HTTP)."""
import asyncio
import socket
import time

import pytest

from loadgen.client.http_client import Client, ClientConfig, RequestSpec, pick_transport
from loadgen.scenario.workload import PromptSpec

# Only causal checks (no timing bounds: either process may be descheduled for any time on a busy
# box): the client never stamps a byte before the server wrote it, nor after it handed the record
# back; the injected deadlines are floors; stamps of separate reads are separate.
_ids = iter(range(10**6))


@pytest.fixture(autouse=True, params=["wire", "aiohttp"])
def transport(request, monkeypatch):
    """The transport every Client of the test picks, through the environment as a user would."""
    monkeypatch.setenv("LOADGEN_HTTP", request.param)
    return request.param


def cfg(server, calib=None, **kw):
    extra = dict(kw.pop("extra_body", {}))
    if calib is not None:
        extra["calib"] = calib
    return ClientConfig(base_url=server.url, model="calib-model", extra_body=extra, **kw)


def spec(prompt=None, max_tokens=8, prompt_tokens=3):
    i = next(_ids)
    return RequestSpec.of(PromptSpec(prompt or f"req-{i} hello world", prompt_tokens, max_tokens), i)


async def one(c, s=None, **kw):
    async with Client(c, 4) as client:
        assert client.transport == pick_transport(client.url)
        return await client.execute(s or spec(**kw))


def server_entry(server, prompt):
    hits = [e for e in server.log() if e["prompt"] == prompt]
    assert len(hits) == 1, hits
    return hits[0]


@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_stream_timing_matches_injected_truth_and_server_log(calib_server, endpoint):
    s = spec(max_tokens=12)
    async with Client(cfg(calib_server, {"ttft_ms": 60, "itl_ms": 15}, endpoint=endpoint), 4) as client:
        rec = await client.execute(s)
        returned_ns = time.perf_counter_ns()
    info = client.transport_info()
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
    stamps = [t for t, _ in rec.chunks]
    assert stamps == sorted(stamps) and rec.sent_at_ns <= stamps[0]
    assert stamps[-1] <= rec.end_at_ns <= returned_ns   # nor after the record came back
    server_ttft = (entry["chunks"][1 if endpoint == "chat" else 0][0] - entry["arrival_ns"]) / 1e6
    assert server_ttft >= 60                        # the injected truth is a floor for the server
    ttft_ms = (rec.first_token_at_ns - rec.sent_at_ns) / 1e6
    assert ttft_ms >= 60
    tok_c = [t for t, n in rec.chunks if n > 0]
    tok_s = [t for t, n in entry["chunks"] if n > 0]
    assert rec.first_token_at_ns == tok_c[0] >= tok_s[0]
    assert (tok_s[-1] - entry["arrival_ns"]) / 1e6 >= 60 + 11 * 15  # absolute deadlines
    # each token's stamp is at least its own deadline (sent before the server's arrival stamp):
    # the stamps follow the stream, token by token, from below
    assert all(tc - rec.sent_at_ns >= (60 + k * 15) * 1e6 for k, tc in enumerate(tok_c))
    if info.get("coalesced_reads") == 0:            # every token read alone: one stamp each
        assert all(b > a for a, b in zip(tok_c, tok_c[1:])), tok_c
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
    # the role chunk comes at once, the first token not before its 80 ms deadline (causal floor)
    assert rec.first_chunk_at_ns == rec.chunks[0][0] <= rec.first_token_at_ns
    assert (rec.first_token_at_ns - rec.sent_at_ns) / 1e6 >= 80
    assert rec.first_token_at_ns == rec.chunks[1][0]


@pytest.mark.parametrize("fault,kind,http", [
    ("http500", "http", 500), ("http429", "rate_limited", 429), ("drop", "connection", 200),
    ("malformed", "protocol", 200), ("bad_json", "protocol", 200),
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
        "http", "connection", "protocol", "server_error", "incomplete"}


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
    s = spec(max_tokens=5)
    rec = await one(cfg(calib_server, {"ttft_ms": 30, "itl_ms": 5}, stream=False), s)
    returned_ns = time.perf_counter_ns()
    assert rec.status == "ok" and rec.chunks == [] and rec.first_token_at_ns is None
    assert (rec.output_tokens, rec.output_tokens_source) == (5, "usage")
    # the whole body is written at the 50 ms deadline: the end lies between that write and the return
    assert server_entry(calib_server, s.prompt)["chunks"][-1][0] <= rec.end_at_ns <= returned_ns
    assert (rec.end_at_ns - rec.sent_at_ns) / 1e6 >= 50
    assert rec.output_chars == len(" tok") * 5


async def test_token_id_prompt_extra_body_headers_and_auth(calib_server):
    c = cfg(calib_server, extra_body={"temperature": 0.5}, ignore_eos=False, include_usage=False,
            api_key="sk-test", headers={"X-Trace": "1"})
    ids = [7, 8, 9, 10 + next(_ids)]              # unique: the server's log is shared
    s = spec(prompt=ids)
    rec = await one(c, s)
    assert rec.status == "ok" and rec.output_tokens_source == "chunks"
    assert (rec.prompt_tokens, rec.prompt_tokens_source) == (3, "workload")   # no usage asked for
    entry = server_entry(calib_server, str(ids))
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


# -- multi-turn and reasoning fields (the session driver's contract) ---------------------------

@pytest.mark.parametrize("continuous", [False, True])
async def test_reasoning_chunks_count_apart_and_the_first_answer_is_stamped(calib_server, continuous):
    k = 2 if continuous else 1
    c = cfg(calib_server, {"reasoning_tokens": 3, "ttft_ms": 10, "itl_ms": 5, "tokens_per_chunk": k},
            endpoint="chat", continuous_usage=continuous)
    s = spec(max_tokens=6 * k)
    s.want_text = True
    rec = await one(c, s)
    assert rec.status == "ok", rec.error
    assert [n for _, n in rec.chunks] == [0] + [k] * 6 + [0]
    assert rec.first_token_at_ns == rec.chunks[1][0]            # TTFT: reasoning counts
    assert rec.first_answer_at_ns == rec.chunks[4][0] > rec.first_token_at_ns
    assert (rec.reasoning_tokens, rec.output_tokens) == (3 * k, 6 * k)
    assert rec.output_text == " tok" * k * 3                     # the answer only
    plain = await one(c, spec(max_tokens=6 * k))
    assert plain.output_text is None and plain.reasoning_tokens == 3 * k


async def test_no_reasoning_means_first_answer_is_first_token(calib_server):
    rec = await one(cfg(calib_server, {"itl_ms": 1}, endpoint="chat"), max_tokens=3)
    assert rec.first_answer_at_ns == rec.first_token_at_ns and rec.reasoning_tokens is None


@pytest.mark.parametrize("endpoint,stream", [("chat", True), ("completions", True), ("chat", False)])
async def test_want_text_gives_the_exact_text(calib_server, endpoint, stream):
    c = cfg(calib_server, {"text": " ü中\n", "itl_ms": 1}, endpoint=endpoint, stream=stream)
    s = spec(max_tokens=4)
    s.want_text = True
    rec = await one(c, s)
    assert rec.status == "ok" and rec.output_text == " ü中\n" * 4


async def test_messages_are_sent_as_the_conversation(calib_server):
    tag = f"turn-2 of session {next(_ids)} please"
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hello there"},
            {"role": "assistant", "content": " tok tok"}, {"role": "user", "content": tag}]
    s = spec(prompt="ignored when messages are given")
    s.messages, s.session_id, s.turn = msgs, "s-7", 2
    rec = await one(cfg(calib_server, endpoint="chat"), s)
    assert rec.status == "ok" and (rec.session_id, rec.turn) == ("s-7", 2)
    entry = server_entry(calib_server, tag)
    assert entry["messages"] == msgs
    assert (rec.prompt_tokens, rec.prompt_tokens_source) == (11, "usage")   # the server's word count


async def test_messages_need_the_chat_endpoint(calib_server):
    s = spec()
    s.messages = [{"role": "user", "content": "hi"}]
    rec = await one(cfg(calib_server), s)
    assert (rec.status, rec.error_kind) == ("error", "client") and "chat" in rec.error


async def test_per_request_headers_are_merged_over_the_configured_ones(calib_server):
    c = cfg(calib_server, headers={"X-Trace": "1", "X-Keep": "k"})
    s = spec()
    s.headers = {"x-trace": "2", "X-Session-Affinity": "s-9"}
    rec = await one(c, s)
    assert rec.status == "ok"
    h = {k.lower(): v for k, v in server_entry(calib_server, s.prompt)["x_headers"].items()}
    assert h == {"x-trace": "2", "x-keep": "k", "x-session-affinity": "s-9"}


async def test_transport_choice_and_description(calib_server, transport, monkeypatch):
    assert pick_transport("https://example.org/v1/completions") == "aiohttp"
    assert pick_transport("http://x/v1/completions", "aiohttp") == "aiohttp"
    assert pick_transport("http://x/v1/completions", "wire") == "wire"
    with pytest.raises(ValueError, match="LOADGEN_HTTP"):
        pick_transport("http://x/", "h2")
    client = Client(cfg(calib_server, {"itl_ms": 1}), 2)
    assert client.transport == transport and client.transport_info() == {"transport": transport}
    async with client:
        rec = await client.execute(spec(max_tokens=3))
    info = client.transport_info()                  # still there after close (meta.json)
    assert rec.status == "ok" and info["transport"] == transport
    assert info["stamp_source"] in ("kernel", "user", "mixed") and "clock" in info
    assert info["stale_connection_retries"] == 0 and info["reuse_connections"] is True
    if transport == "wire":
        assert info["responses"] == 1 and info["coalesced_reads"] == rec.coalesced_reads >= 0
        assert info["clock"] is None or info["clock"]["bracket_ns"] >= 0
    else:
        assert info["stamp_source"] == "user" and rec.coalesced_reads is None
    monkeypatch.setenv("LOADGEN_HTTP", "aiohttp")
    assert Client(cfg(calib_server), 1).transport == "aiohttp"
