"""The one stream step (loadgen/client/stream_step.py): bytes + stamps ─► the Record, with limits."""
from __future__ import annotations

import gzip
import json
import zlib

import pytest

from loadgen.client.request import finish
from loadgen.client.sse import SSEParser, StreamTally, TooLarge
from loadgen.client.stream_step import Limits, StreamStep
from loadgen.record import Record


def rec(max_tokens: int = 16) -> Record:
    return Record(id=0, phase="measured", scheduled_at_ns=0, requested_output_tokens=max_tokens)


def ev(text: str = "a", fr=None) -> bytes:
    return b"data: " + json.dumps({"choices": [{"index": 0, "text": text, "finish_reason": fr}]}).encode() + b"\n\n"


def stream(n: int = 4) -> bytes:
    return b"".join(ev("t") for _ in range(n - 1)) + ev("t", "stop") + b"data: [DONE]\n\n"


def run(pieces, limits=Limits(), encoding=None, max_tokens=16) -> Record:
    r = rec(max_tokens)
    tally = StreamTally()
    step = StreamStep(r, tally, limits, encoding)
    t = 0
    for t, p in pieces:
        if step.feed(t, p):
            break
    step.end(t)
    finish(r, tally, None)
    return r


def test_a_plain_stream_gives_one_chunk_per_event_on_its_read_stamp():
    body = stream(4)
    r = run([(10, body[:30]), (20, body[30:])])
    assert r.status == "ok" and r.output_tokens == 4
    assert [t for t, _ in r.chunks][0] in (10, 20) and all(n == 1 for _, n in r.chunks)


@pytest.mark.parametrize("encoding,pack", [
    ("gzip", lambda b: gzip.compress(b)),
    ("deflate", lambda b: zlib.compress(b)),
    ("deflate", lambda b: zlib.compress(b)[2:-4]),        # raw deflate, as some servers send it
])
def test_compressed_streams_give_the_same_record_as_plain(encoding, pack):
    body = stream(6)
    z = pack(body)
    plain = run([(1, body)])
    packed = run([(1, z[:7]), (1, z[7:])], encoding=encoding)
    assert packed.status == "ok", packed.error
    assert [n for _, n in packed.chunks] == [n for _, n in plain.chunks]


def test_an_unknown_encoding_is_a_protocol_failure():
    r = run([(1, stream(2))], encoding="br")
    assert (r.status, r.error_kind) == ("error", "protocol") and "br" in r.error


def test_an_event_over_the_limit_is_too_large_and_parsing_stops():
    lim = Limits(max_event_bytes=4096)
    piece = b"data: " + b"x" * 1000
    r = run([(i, piece if i == 0 else b"x" * 1000) for i in range(10)], limits=lim)
    assert (r.status, r.error_kind) == ("error", "too_large") and "4096" in r.error


def test_more_events_than_max_tokens_allow_is_too_large():
    lim = Limits(events_per_token=1)           # 1 × 4 tokens + 1024 slack
    r = run([(i, ev("t")) for i in range(1100)], limits=lim, max_tokens=4)   # one event a read
    assert (r.status, r.error_kind) == ("error", "too_large")
    assert len(r.chunks) == 4 + 1024 + 1               # checked after each read


@pytest.mark.parametrize("body,kind", [
    (b"this is not sse\n\n", "protocol"),
    (b"data: {not json}\n\n", "protocol"),
    (b'data: {"error": {"message": "boom"}}\n\n', "server_error"),
    (b"event: error\ndata: overloaded\n\n", "server_error"),
    (ev("a"), "incomplete"),                   # ended without [DONE] or finish_reason
])
def test_faults_in_the_stream_have_one_kind_each(body, kind):
    r = run([(1, body)])
    assert (r.status, r.error_kind) == ("error", kind)


def test_coalesced_reads_count_reads_with_more_than_one_token_chunk():
    r = rec()
    step = StreamStep(r, StreamTally())
    step.feed(1, ev() + ev())                  # one read, two tokens
    step.feed(2, ev())
    step.feed(3, ev() + ev("b", "stop") + b"data: [DONE]\n\n")
    step.end(3)
    assert step.coalesced == 2 and r.status == "ok"


# ----------------------------------------------------------------- the parser's own bounds
def test_a_long_line_is_kept_as_pieces_and_joined_once():
    p = SSEParser()
    line = b"data: " + b"y" * (3 * 2**20)
    out = []
    for i in range(0, len(line), 65536):
        out += p.feed(line[i:i + 65536])
        assert len(p._pend) <= (i // 65536) + 1      # pieces are kept, never re-joined per read
    assert out == []
    assert p.feed(b"\n\n") == [b"y" * (3 * 2**20)]
    assert p._pend == [] and p._tail == b""


def test_a_line_over_the_cap_yields_one_too_large_then_nothing():
    p = SSEParser(max_event_bytes=100_000)
    got = []
    for _ in range(50):
        got += p.feed(b"z" * 65536)
    assert got == [TooLarge(131072, 100_000)]
    assert p.feed(b"\n\ndata: 1\n\n") == [] and p.finish() == []


def test_splitting_a_stream_anywhere_gives_the_same_events():
    body = (b"data: 1\r\n\r\n: comment\n\nevent: ping\ndata: x\n\ndata: 2\ndata: 3\n\n"
            b"id: 4\ndata: 4\r\rdata: [DONE]\n\n")
    whole = SSEParser().feed(body)
    for cut in range(1, len(body)):
        p = SSEParser()
        assert p.feed(body[:cut]) + p.feed(body[cut:]) == whole, cut
    for step in (1, 2, 3):
        p = SSEParser()
        got = []
        for i in range(0, len(body), step):
            got += p.feed(body[i:i + step])
        assert got == whole, step


# ---------------------------------------------------------------- issue 29 items 6 and 14
def test_events_after_done_are_not_counted_and_do_not_make_it_too_large():
    after = ev("x") * 2000                          # past the event bound of max_tokens 4
    for feed_reads in (False, True):
        r, tally = rec(4), StreamTally()
        step = StreamStep(r, tally, Limits())
        reads = [(1, stream(4)), (2, after), (3, after)]
        if feed_reads:
            step.feed_reads(reads, 0, len(reads))
        else:
            for t, p in reads:
                step.feed(t, p)
        step.end(3)
        finish(r, tally, None)
        assert r.status == "ok" and r.output_tokens == 4 and r.end_at_ns == 1, (feed_reads, r.error)


def test_a_leading_utf8_bom_is_stripped():
    r = run([(1, b"\xef\xbb\xbf" + stream(3))])
    assert r.status == "ok" and r.output_tokens == 3, r.error


def test_a_deeply_nested_event_is_the_servers_protocol_fault():
    deep = b"data: " + b"[" * 100_000 + b"]" * 100_000 + b"\n\n"
    r = run([(1, ev("t") + deep + b"data: [DONE]\n\n")])
    assert r.status == "error" and r.error_kind == "protocol", r.error
