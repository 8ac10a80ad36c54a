"""loadgen/client/wire/record_fill.py: stamped body pieces ─► Record, at once or in slices; the same
records as the aiohttp transport's, field by field, on the same answers."""
import asyncio

import pytest

from loadgen.client.http_client import Client
from loadgen.client.request import finish
from loadgen.client.sse import StreamTally
from loadgen.client.wire.record_fill import RecordFiller, fill_record
from loadgen.client.http1.message import WireResponse
from loadgen.record import Record
from tests.loadgen.client.wire.support import blank, cfg, spec

EV = b'data: {"choices":[{"index":0,"text":" t","finish_reason":null}]}\n\n'
LAST = b'data: {"choices":[{"index":0,"text":" t","finish_reason":"length"}]}\n\ndata: [DONE]\n\n'


def shape(rec: Record) -> dict:
    """Everything a record says but the times, the wording of a connection error and the
    trace id (each Client draws its own run prefix: loadgen/client/trace_context.py)."""
    d = dict(rec.__dict__)
    for k in ("id", "trace_id", "sent_at_ns", "first_chunk_at_ns", "first_token_at_ns", "end_at_ns",
              "first_sent_at_ns", "retry_error", "coalesced_reads", "first_answer_at_ns"):
        d.pop(k, None)
    d["chunks"] = [n for _, n in rec.chunks]
    if rec.error_kind in ("connection", "timeout", "protocol"):
        d.pop("error")
    return d


async def via(transport: str, c, s):
    async with Client(c, 2, transport=transport) as client:
        assert client.transport == transport
        return await client.execute(s)


@pytest.mark.parametrize("endpoint,calib,kw", [
    ("completions", {"itl_ms": 2}, {}),
    ("chat", {"itl_ms": 2, "reasoning_tokens": 2}, {}),
    ("chat", {"tokens_per_chunk": 3, "itl_ms": 1, "reasoning_tokens": 1}, {"continuous_usage": True}),
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
async def test_records_match_the_aiohttp_transport_field_by_field(calib_server, endpoint, calib, kw):
    c = cfg(calib_server, calib, endpoint=endpoint, **kw)
    s_a, s_w = spec(6), spec(6)
    s_a.want_text = s_w.want_text = True
    rec_a = await via("aiohttp", c, s_a)
    rec_w = await via("wire", c, s_w)
    assert shape(rec_w) == shape(rec_a)
    assert rec_w.end_at_ns >= rec_w.sent_at_ns
    assert rec_a.coalesced_reads is None and rec_w.coalesced_reads is not None


def test_coalesced_reads_are_counted():
    ev = [EV] * 4
    resp = WireResponse(status=200, headers={"content-type": "text/event-stream"}, complete=True,
                        sent_at_ns=0, end_at_ns=40,
                        reads=[(10, ev[0]), (20, ev[1] + ev[2]),              # one read, two tokens
                               (30, ev[3][:20]), (40, ev[3][20:] + b"data: [DONE]\n\n")])
    rec = blank()
    fill_record(resp, rec, stream=True)
    assert rec.status == "ok" and rec.chunks == [[10, 1], [20, 1], [20, 1], [40, 1]]
    assert rec.coalesced_reads == resp.coalesced_reads == 1 and rec.end_at_ns == 40


def test_reasoning_answer_and_text_from_stamped_pieces():
    def chat(delta, fr=None):
        import json
        return b"data: " + json.dumps({"choices": [{"index": 0, "delta": delta,
                                                     "finish_reason": fr}]}).encode() + b"\n\n"
    reads = [(10, chat({"role": "assistant", "content": ""})),
             (20, chat({"reasoning_content": "think"})), (30, chat({"reasoning": "more"})),
             (40, chat({"content": "Hel"})), (50, chat({"content": "lo"}, "stop") + b"data: [DONE]\n\n")]
    resp = WireResponse(status=200, headers={"content-type": "text/event-stream"}, complete=True,
                        sent_at_ns=0, end_at_ns=50, reads=reads)
    rec = blank()
    fill_record(resp, rec, stream=True, want_text=True)
    assert rec.status == "ok" and [n for _, n in rec.chunks] == [0, 1, 1, 1, 1]
    assert (rec.first_token_at_ns, rec.first_answer_at_ns) == (20, 40)
    assert (rec.reasoning_tokens, rec.output_text, rec.output_tokens) == (2, "Hello", 4)
    plain = blank()
    fill_record(resp, plain, stream=True)             # want_text not asked: no text kept
    assert plain.output_text is None and plain.reasoning_tokens == 2


def _long_stream(n: int, t0: int) -> WireResponse:
    reads = [(t0 + 10 * i, EV) for i in range(n - 1)] + [(t0 + 10 * n, LAST)]
    return WireResponse(status=200, headers={"content-type": "text/event-stream"}, complete=True,
                        sent_at_ns=t0, end_at_ns=t0 + 10 * n, reads=reads)


async def sliced_fill(filler, resp, rec):
    tally = StreamTally()
    await filler.fill(resp, rec, tally, stream=True)
    finish(rec, tally, None)


async def test_record_filler_gives_the_same_records_in_slices():
    filler = RecordFiller(budget_ns=1, every=4)       # the smallest slices: many loop turns
    resps = [_long_stream(40 + i, 1000 * i) for i in range(20)]
    direct = []
    for r in resps:
        rec = blank()
        fill_record(r, rec, stream=True)
        direct.append(rec)
    sliced = [blank() for _ in resps]
    await asyncio.gather(*(sliced_fill(filler, r, rec) for r, rec in zip(resps, sliced)))
    assert [x.__dict__ for x in sliced] == [x.__dict__ for x in direct]
    assert sliced[0].status == "ok" and sliced[0].output_tokens == 40


async def test_record_filler_cancelled_still_fills_the_record():
    filler = RecordFiller(budget_ns=1, every=2)
    blockers = [sliced_fill(filler, _long_stream(200, 0), blank()) for _ in range(3)]
    busy = asyncio.ensure_future(asyncio.gather(*blockers))
    rec = Record(id=1, phase="measured", scheduled_at_ns=None)
    tally = StreamTally()
    task = asyncio.ensure_future(filler.fill(_long_stream(30, 0), rec, tally, stream=True))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    finish(rec, tally, None)
    assert rec.status == "ok" and rec.chunk_output_tokens == 30
    await busy
