"""The shared stream step (loadgen/client/stream_step.py, used by wire, aiohttp and the Locust
users) on tool-call streams: every tool_calls delta is 1 output token, the first one is the first
token, the pieces of each call are gathered (sse.StreamTally.calls) and checked once at finish —
with a Checker (the native client) or without one (a Locust user's tally: parse only)."""
from __future__ import annotations

import json

import pytest

from loadgen.client.request import finish
from loadgen.client.sse import StreamTally
from loadgen.client.stream_step import StreamStep
from loadgen.client.structured import Checker
from loadgen.record import Record
from tests.loadgen.client.tallies import tally_both_ways

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]


def chat(delta: dict, finish_reason=None) -> dict:
    return {"id": "c", "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]}


def call(index=0, id=None, name=None, args=None) -> dict:
    fn = {k: v for k, v in (("name", name), ("arguments", args)) if v is not None}
    d = {"index": index, "function": fn}
    if id is not None:
        d.update(id=id, type="function")
    return {"tool_calls": [d]}


def sse(chunks: list) -> bytes:
    return b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks) + b"data: [DONE]\n\n"


def run(chunks: list, tally: StreamTally, read=7) -> Record:
    rec = Record(0, "measured", 0, sent_at_ns=1, requested_output_tokens=16)
    step = StreamStep(rec, tally)
    body = sse(chunks)
    for i in range(0, len(body), read):                       # small reads: events split anywhere
        step.feed(100 + i, body[i:i + read])
    step.end(10**6)
    finish(rec, tally, 3)
    return rec


STREAM = [chat({"role": "assistant", "content": ""}),
          chat(call(id="call-1", name="get_weather", args="")),
          chat(call(args='{"ci')), chat(call(args='ty": ')), chat(call(args='"Oslo"}'), "tool_calls"),
          {"id": "c", "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}]


def test_tool_call_deltas_are_output_and_the_first_is_the_first_token():
    rec = run(STREAM, StreamTally(False, False, Checker.of({"tools": TOOLS})))
    assert rec.status == "ok", rec.error
    assert [n for _, n in rec.chunks] == [0, 1, 1, 1, 1, 0]
    assert rec.first_token_at_ns == rec.chunks[1][0] == rec.first_answer_at_ns
    assert rec.output_tokens == rec.chunk_output_tokens == 4 and not rec.token_count_mismatch
    assert (rec.tool_calls, rec.tool_args_parsed, rec.tool_args_valid) == (1, True, True)


def test_a_locust_users_tally_without_a_checker_parses_but_does_not_validate():
    rec = run(STREAM, StreamTally(False, False))                  # loadgen/engine/locust/user.py
    assert [n for _, n in rec.chunks] == [0, 1, 1, 1, 1, 0]
    assert (rec.tool_calls, rec.tool_args_parsed, rec.tool_args_valid) == (1, True, None)
    plain = run([chat({"content": "hi"}, "stop")], StreamTally(False, False))
    assert (plain.tool_calls, plain.tool_args_parsed, plain.structured_error) == (None, None, None)


def test_parallel_calls_by_index_and_by_id_at_a_reused_index():
    by_index = [chat({"tool_calls": [{"index": 0, "id": "a", "function": {"name": "get_weather",
                                                                         "arguments": "{"}},
                                     {"index": 1, "id": "b", "function": {"name": "get_weather"}}]}),
                chat(call(0, args='"city": "A"}')), chat(call(1, args='{"city": 5}'), "tool_calls")]
    t = StreamTally(False, False, Checker.of({"tools": TOOLS}))
    rec = run(by_index, t)
    assert [c[0] for c in t.calls] == ["a", "b"] and "".join(t.calls[0][2]) == '{"city": "A"}'
    assert rec.tool_calls == 2 and rec.tool_args_parsed is True
    assert rec.tool_args_valid is False and "city" in rec.structured_error   # the FINAL call: b
    reused = [chat(call(0, "a", "get_weather", '{"city": 1}')),
              chat(call(0, "b", "get_weather", '{"city": "B"}'), "tool_calls")]   # Ollama-style
    t = StreamTally(False, False, Checker.of({"tools": TOOLS}))
    rec = run(reused, t)
    assert rec.tool_calls == 2 and rec.tool_args_valid is True


@pytest.mark.parametrize("continuous", [False, True])
def test_typed_and_generic_decoding_gather_the_same_calls(continuous):
    typed, generic = tally_both_ways(STREAM, continuous)
    assert typed.calls == generic.calls == [["call-1", "get_weather", ['{"ci', 'ty": ', '"Oslo"}']]]


@pytest.mark.parametrize("raw", [
    b'{"choices": [{"delta": {"tool_calls": {"index": 0}}}]}',         # not a list
    b'{"choices": [{"delta": {"tool_calls": [{"function": {"arguments": 5}}]}}]}',
])
def test_tool_calls_of_another_shape_are_a_protocol_fault(raw):
    with pytest.raises(ValueError):
        StreamTally().add_bytes(raw)


def test_a_call_cut_off_by_max_tokens_is_recorded_as_not_parsed():
    rec = run(STREAM[:3] + [chat({}, "length")], StreamTally(False, False, Checker.of({"tools": TOOLS})))
    assert rec.status == "ok" and rec.finish_reason == "length"
    assert (rec.tool_calls, rec.tool_args_parsed, rec.tool_args_valid) == (1, False, False)
    assert rec.structured_error.startswith("not JSON")
