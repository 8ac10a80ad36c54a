"""Record.cached_tokens from usage.prompt_tokens_details.cached_tokens: streamed (the usage chunk,
typed and generic decode), a whole answer, the Responses API's input_tokens_details; None when the
server says nothing; an absurd count fails the record as ``protocol``. (The real-server path, every
transport through request.finish: tests/servers/jax/test_prefix_cache_server.py.)"""
import json

from loadgen.client.request import apply_body, finish
from loadgen.client.responses import ResponsesTally, read_response
from loadgen.client.sse import StreamTally
from loadgen.record import Record


def rec() -> Record:
    return Record(id=0, phase="measured", scheduled_at_ns=0, status="ok")


def usage_chunk(details) -> bytes:
    u = {"prompt_tokens": 40, "completion_tokens": 3, "total_tokens": 43}
    if details is not ...:
        u["prompt_tokens_details"] = details
    return json.dumps({"id": "x", "object": "chat.completion.chunk", "choices": [],
                       "usage": u}).encode()


def streamed(details, generic=False) -> Record:
    t = StreamTally()
    t.add_bytes(b'{"choices":[{"delta":{"content":"hi"},"finish_reason":"stop"}]}')
    data = usage_chunk(details)
    t.add(json.loads(data)) if generic else t.add_bytes(data)
    r = rec()
    finish(r, t, None)
    return r


def test_streamed_usage_chunk_gives_cached_tokens():
    for generic in (False, True):
        r = streamed({"cached_tokens": 32}, generic)
        assert (r.cached_tokens, r.prompt_tokens, r.status) == (32, 40, "ok")
        assert streamed({"cached_tokens": 0}, generic).cached_tokens == 0


def test_server_saying_nothing_is_none():
    assert streamed(...).cached_tokens is None                 # no prompt_tokens_details
    assert streamed(None).cached_tokens is None                # vLLM without the flag: null
    assert streamed({}).cached_tokens is None
    assert streamed({"audio_tokens": 0}).cached_tokens is None


def test_absurd_cached_count_fails_as_protocol():
    for bad in (41, -1, "7", 2.5):
        r = streamed({"cached_tokens": bad})
        assert r.status == "error" and r.error_kind == "protocol", bad
        assert "cached_tokens" in r.error and r.cached_tokens is None


def test_whole_answer_and_responses_api():
    t, r = StreamTally(), rec()
    body = {"object": "chat.completion", "choices": [{"message": {"content": "x"},
                                                      "finish_reason": "length"}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 1,
                      "prompt_tokens_details": {"cached_tokens": 16}}}
    apply_body(r, t, json.dumps(body).encode(), 1)
    finish(r, t, None)
    assert r.cached_tokens == 16
    t, r = StreamTally(), rec()
    body["usage"].pop("prompt_tokens_details")
    apply_body(r, t, json.dumps(body).encode(), 1)
    finish(r, t, None)
    assert r.cached_tokens is None
    t, r = ResponsesTally(), rec()
    read_response(t, {"object": "response", "status": "completed", "output": [],
                      "usage": {"input_tokens": 20, "output_tokens": 2,
                                "input_tokens_details": {"cached_tokens": 16}}})
    finish(r, t, None)
    assert r.cached_tokens == 16
