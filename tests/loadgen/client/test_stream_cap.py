"""The per-request stamp cap (issue 41 item 4a): a stream keeps at most ``max_chunk_stamps``
[arrival_ns, n_tokens] stamps; every chunk past it is counted (``chunks_unstamped``, its tokens
``chunks_unstamped_tokens``, both in ``chunk_output_tokens``), never stored. The pure step, then
the real calibration server through both asyncio transports (wire, aiohttp). Locust's twin:
tests/loadgen/engine/locust/test_locust_stream_cap.py."""
import pytest

from loadgen.client.http_client import Client, ClientConfig, RequestSpec
from loadgen.scenario.workload import PromptSpec
from loadgen.client.request import finish
from loadgen.client.sse import StreamTally
from loadgen.client.stream_step import MAX_CHUNK_STAMPS, Limits, StreamStep
from loadgen.record import Record

TOKEN = b'data: {"choices":[{"index":0,"text":"a"}]}\n\n'


def _rec(max_tokens=100):
    return Record(id=0, phase="measured", requested_output_tokens=max_tokens)


def test_the_step_keeps_cap_stamps_and_counts_the_rest():
    rec, tally = _rec(), StreamTally()
    step = StreamStep(rec, tally, Limits(max_chunk_stamps=5))
    for t in range(20):                               # one read per token: 20 stamps
        step.feed(1_000 + t, TOKEN)
    step.feed(2_000, b"data: [DONE]\n\n")
    step.end(2_001)
    finish(rec, tally, None)
    assert rec.status == "ok"
    assert rec.chunks == [[1_000 + t, 1] for t in range(5)]      # the first five, stamped
    assert (rec.chunks_unstamped, rec.chunks_unstamped_tokens) == (15, 15)
    assert rec.chunk_output_tokens == 20 and rec.output_tokens == 20
    assert rec.end_at_ns == 2_000                     # the end is the last event's, not a kept one


def test_the_wire_slices_keep_the_cap_too_and_one_big_read_is_cut_back():
    rec, tally = _rec(), StreamTally()
    step = StreamStep(rec, tally, Limits(max_chunk_stamps=3))
    reads = [(10 + i, TOKEN * 4) for i in range(6)] + [(99, b"data: [DONE]\n\n")]
    step.feed_reads(reads, 0, len(reads))
    step.end(100)
    finish(rec, tally, None)
    assert len(rec.chunks) == 3 and rec.chunks_unstamped == 21
    assert rec.chunk_output_tokens == 24 and rec.status == "ok"


def test_an_uncapped_stream_says_nothing_and_the_event_bound_counts_every_event():
    rec, tally = _rec(), StreamTally()
    step = StreamStep(rec, tally)
    step.feed(1, TOKEN * 10 + b"data: [DONE]\n\n")
    step.end(2)
    finish(rec, tally, None)
    assert rec.chunks_unstamped is None and rec.chunks_unstamped_tokens is None
    assert MAX_CHUNK_STAMPS >= 4 * 1024 + 1024        # a usual answer keeps every stamp
    # max_tokens 1: at most 4 + 1024 events, whether their stamps were kept or not
    rec, tally = _rec(1), StreamTally()
    step = StreamStep(rec, tally, Limits(max_chunk_stamps=10))
    for t in range(1100):
        if step.feed(t, TOKEN):
            break
    assert (rec.status, rec.error_kind) == ("error", "too_large") and len(rec.chunks) == 10
    assert rec.chunks_unstamped + len(rec.chunks) == 4 + 1024 + 1


def test_the_scenario_key_reaches_the_client_limits():
    from loadgen.scenario.api import ResponseLimits
    assert Limits.from_api(ResponseLimits()).max_chunk_stamps == MAX_CHUNK_STAMPS
    assert Limits.from_api(ResponseLimits(max_chunk_stamps=8)).max_chunk_stamps == 8


@pytest.mark.parametrize("transport", ["wire", "aiohttp"])
@pytest.mark.parametrize("endpoint", ["completions", "chat"])
async def test_a_real_stream_past_the_cap_on_both_transports(calib_server, transport, endpoint):
    cfg = ClientConfig(base_url=calib_server.url, model="calib-model", endpoint=endpoint,
                       extra_body={"calib": {"ttft_ms": 0, "itl_ms": 0}},
                       limits=Limits(max_chunk_stamps=8))
    spec = RequestSpec.of(PromptSpec(f"cap {transport} {endpoint}", 3, 40), 1)
    async with Client(cfg, 2, transport=transport) as client:
        rec = await client.execute(spec)
    assert rec.status == "ok", rec.error
    assert len(rec.chunks) == 8                                   # the kept stamps: the cap
    # every data event counted: 40 tokens, the usage chunk, chat's role-only chunk
    events = 40 + 1 + (endpoint == "chat")
    assert rec.chunks_unstamped == events - 8
    assert rec.chunk_output_tokens == 40 == rec.usage_output_tokens
    assert rec.token_count_mismatch is False


# ---- the tally's lists: answer text and tool calls kept within kept.MAX_KEPT_CHARS ---------
def test_kept_text_stops_at_the_budget_and_says_it_was_cut(monkeypatch):
    from loadgen.client import kept
    monkeypatch.setattr(kept, "MAX_KEPT_CHARS", 10)
    tally = StreamTally(want_text=True)
    for _ in range(25):
        tally.add_bytes(b'{"choices":[{"index":0,"text":"ab"}]}')
    assert "".join(tally.text) == "ab" * 5 and tally.kept.cut
    assert tally.chars == 50                                   # every character still counted


def test_endless_new_tool_calls_are_counted_not_kept(monkeypatch):
    from loadgen.client import kept, structured
    monkeypatch.setattr(kept, "MAX_KEPT_CHARS", 4 * kept.CALL_COST)
    check = structured.Checker.of({"tools": [{"type": "function", "function": {"name": "f"}}]})
    tally = StreamTally(check=check)
    for i in range(10):                                        # a new call in every chunk
        tally.add({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": i, "id": f"c{i}", "function": {"name": "f", "arguments": "{}"}}]}}]})
    assert len(tally.calls) <= 4 and tally.calls_over >= 6 and tally.kept.cut
    rec = _rec()
    structured.fill(rec, tally)
    assert rec.tool_calls == 10 and rec.tool_args_parsed is None
    assert "not checked" in rec.structured_error


@pytest.mark.parametrize("transport", ["wire", "aiohttp"])
async def test_a_real_answer_past_the_text_budget_keeps_its_start(calib_server, transport,
                                                                  monkeypatch):
    from loadgen.client import kept
    monkeypatch.setattr(kept, "MAX_KEPT_CHARS", 20)            # " tok" per token: 5 kept
    cfg = ClientConfig(base_url=calib_server.url, model="calib-model",
                       extra_body={"calib": {"ttft_ms": 0, "itl_ms": 0}})
    spec = RequestSpec.of(PromptSpec(f"kept {transport}", 3, 40), 2, want_text=True)
    async with Client(cfg, 2, transport=transport) as client:
        rec = await client.execute(spec)
    assert rec.status == "ok" and rec.output_tokens == 40
    assert rec.output_text == " tok" * 5 and rec.output_chars == 160
