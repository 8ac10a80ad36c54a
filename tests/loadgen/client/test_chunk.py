"""Typed chunk decoding (loadgen/client/chunk.py) gives the tally exactly what the generic parse gives."""
from __future__ import annotations

import json

import pytest

from loadgen.client import chunk
from loadgen.client.sse import StreamTally
from tests.loadgen.client.tallies import tally_both_ways

CHUNKS = [
    {"choices": [{"index": 0, "text": "a", "finish_reason": None}]},
    {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
    {"choices": [{"index": 0, "delta": {"content": "hé"}, "logprobs": None}], "id": "x", "model": "m"},
    {"choices": [{"index": 0, "delta": {"reasoning_content": "think"}}]},
    {"choices": [{"index": 0, "delta": {"reasoning": "more"}}]},
    {"choices": [{"index": 0, "delta": {"tool_calls": [{"id": "c", "function": {"name": "f"}}]}}]},
    {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    {"choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": 5}},
    {"choices": [{"index": 0, "delta": {"content": "x"}}], "usage": {"prompt_tokens": 8, "completion_tokens": 9}},
    {"usage": None, "choices": [{"text": "", "finish_reason": "length"}]},
]


@pytest.mark.parametrize("continuous", [False, True])
def test_typed_and_generic_paths_count_the_same(continuous):
    typed, generic = tally_both_ways(CHUNKS, continuous)
    for name in StreamTally.__slots__:
        assert getattr(typed, name) == getattr(generic, name), name


@pytest.mark.parametrize("raw", [
    b'{"error": {"message": "overloaded", "code": 503}}',
    b'{"error": null}',
    b'{"object": "error", "message": "bad", "type": "BadRequestError", "code": 400}',
])
def test_error_chunks_keep_the_whole_error_object(raw):
    t = StreamTally()
    assert t.add_bytes(raw) == -1
    obj = json.loads(raw)
    assert t.error == obj.get("error", obj)


@pytest.mark.parametrize("raw", [
    b'[1, 2]', b'"text"', b'{"choices": "abc"}', b'{"choices": [{"text": 5}]}',
    b'{"usage": {"completion_tokens": "many"}}', b'{not json}',
])
def test_what_is_not_an_openai_chunk_is_a_value_error(raw):
    """ValueError is the stream step's ``protocol`` (the server's fault), never a client crash."""
    with pytest.raises(ValueError):
        StreamTally().add_bytes(raw)


def test_a_payload_that_does_not_fit_the_types_still_counts_when_lax():
    t = StreamTally()
    assert chunk.decode(b'{"usage": {"completion_tokens": 3.0}}') is None   # strict: a float
    assert t.add_bytes(b'{"usage": {"completion_tokens": 3.0}}') == 0         # generic: accepted
    assert t.completion_tokens == 3
