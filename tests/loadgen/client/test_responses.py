"""``api.endpoint: responses`` without a server: ResponsesTally (loadgen/client/responses.py) through
the one stream step on recorded-shape byte streams (OpenAI's event order; vLLM's response.completed
carrying status incomplete), the whole-body path, and the request bodies (loadgen/client/request.py)."""
from __future__ import annotations

import json

import pytest

from loadgen.client.http_client import Client, ClientConfig
from loadgen.client.request import apply_body, base_body, endpoint_path, finish, request_body
from loadgen.client.responses import ResponsesTally
from loadgen.client.stream_step import StreamStep
from loadgen.record import Record


def ev(kind: str, seq: int, named: bool = True, **fields) -> bytes:
    data = json.dumps({"type": kind, "sequence_number": seq, **fields}).encode()
    return (b"event: " + kind.encode() + b"\n" if named else b"") + b"data: " + data + b"\n\n"


def response(status: str, text: str = "", usage: dict | None = None, **kw) -> dict:
    out = [{"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": text, "annotations": []}]}] if text else []
    return {"id": "resp_1", "object": "response", "status": status, "output": out, "usage": usage,
            "error": None, "incomplete_details": None, **kw}


USAGE = {"input_tokens": 7, "output_tokens": 3, "total_tokens": 10,
         "output_tokens_details": {"reasoning_tokens": 0}}


def openai_stream(deltas=("Hel", "lo", "!"), terminal: bytes | None = None, named: bool = True) -> list[bytes]:
    """One event per list item, in the order OpenAI (and the JAX server) sends them."""
    part = {"item_id": "msg_1", "output_index": 0, "content_index": 0}
    head = [ev("response.created", 0, named, response=response("in_progress")),
            ev("response.in_progress", 1, named, response=response("in_progress")),
            ev("response.output_item.added", 2, named, output_index=0,
               item={"type": "message", "id": "msg_1", "role": "assistant", "content": []}),
            ev("response.content_part.added", 3, named, part={"type": "output_text", "text": ""}, **part)]
    n = len(head)
    body = [ev("response.output_text.delta", n + i, named, delta=d, **part) for i, d in enumerate(deltas)]
    n += len(body)
    text = "".join(deltas)
    tail = [ev("response.output_text.done", n, named, text=text, **part),
            ev("response.content_part.done", n + 1, named, part={"type": "output_text", "text": text}, **part),
            ev("response.output_item.done", n + 2, named, output_index=0, item={"type": "message", "id": "msg_1"})]
    if terminal is None:
        terminal = ev("response.completed", n + 3, named, response=response("completed", text, USAGE))
    return head + body + tail + [terminal]


def run(events: list[bytes], split: int = 0, want_text: bool = True, max_tokens: int = 16) -> tuple[Record, ResponsesTally]:
    """Each event is one read at t = its index + 1 (or the whole body in ``split``-byte reads)."""
    r = Record(id=0, phase="measured", scheduled_at_ns=0, requested_output_tokens=max_tokens)
    tally = ResponsesTally(want_text=want_text)
    step = StreamStep(r, tally)
    if split:
        body = b"".join(events)
        reads = [(1 + i // split, body[i:i + split]) for i in range(0, len(body), split)]
    else:
        reads = [(i + 1, e) for i, e in enumerate(events)]
    t = 0
    for t, data in reads:
        if step.feed(t, data):
            break
    step.end(t + 1)
    finish(r, tally, None)
    return r, tally


def test_first_token_is_the_first_text_delta_not_response_created():
    r, tally = run(openai_stream())
    assert r.status == "ok" and r.error_kind is None, r.error
    assert r.first_chunk_at_ns == 1                 # response.created: a chunk of 0 tokens
    assert r.first_token_at_ns == 5                 # the first output_text.delta (5th event)
    assert r.first_answer_at_ns == 5
    assert [n for _, n in r.chunks] == [0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0]
    assert r.chunk_output_tokens == 3 and r.output_tokens == 3 and r.output_tokens_source == "usage"
    assert r.prompt_tokens == 7 and r.prompt_tokens_source == "usage"
    assert r.finish_reason == "stop" and r.token_count_mismatch is False
    assert r.output_text == "Hello!" and r.output_chars == 6
    assert r.reasoning_tokens is None and r.end_at_ns == 12      # the body's end, no [DONE] needed


@pytest.mark.parametrize("split", [1, 7, 100])
def test_any_read_split_gives_the_same_counts(split):
    r, _ = run(openai_stream(), split=split)
    whole, _ = run(openai_stream())
    assert r.status == "ok" and r.output_text == "Hello!" and r.finish_reason == "stop"
    assert sum(n for _, n in r.chunks) == 3 and len(r.chunks) == len(whole.chunks)


def test_unnamed_data_events_count_the_same():
    r, _ = run(openai_stream(named=False))
    assert r.status == "ok" and r.chunk_output_tokens == 3 and r.finish_reason == "stop"


def test_incomplete_at_max_output_tokens_is_length():
    term = ev("response.incomplete", 9, response=response(
        "incomplete", "Hel", {**USAGE, "output_tokens": 1}, incomplete_details={"reason": "max_output_tokens"}))
    r, _ = run(openai_stream(deltas=("Hel",), terminal=term))
    assert r.status == "ok" and r.finish_reason == "length" and r.output_tokens == 1


def test_vllm_completed_event_with_status_incomplete_is_length():
    term = ev("response.completed", 9, response=response(
        "incomplete", "Hello!", USAGE, incomplete_details={"reason": "max_output_tokens"}))
    r, _ = run(openai_stream(terminal=term))
    assert r.status == "ok" and r.finish_reason == "length"


def test_response_failed_is_a_server_error():
    term = ev("response.failed", 9, response=response("failed", error={"code": "server_error",
                                                                        "message": "engine died"}))
    r, tally = run(openai_stream(terminal=term))
    assert r.status == "error" and r.error_kind == "server_error" and "engine died" in r.error
    assert tally.error == {"code": "server_error", "message": "engine died"}
    assert r.chunk_output_tokens == 3               # what came before the failure stays counted


def test_error_event_is_a_server_error():
    r, _ = run(openai_stream()[:5] + [b'event: error\ndata: {"type":"error","code":"x","message":"boom"}\n\n'])
    assert r.status == "error" and r.error_kind == "server_error" and "boom" in r.error
    assert r.first_token_at_ns == 5


def test_unnamed_error_object_is_a_server_error():
    r, _ = run(openai_stream()[:5] + [b'data: {"error": {"message": "overloaded", "code": 503}}\n\n'])
    assert r.error_kind == "server_error" and "overloaded" in r.error


def test_stream_without_a_terminal_event_is_incomplete():
    r, _ = run(openai_stream()[:-1])
    assert r.status == "error" and r.error_kind == "incomplete"


def test_bad_json_and_non_object_events_are_protocol_errors():
    r, _ = run(openai_stream()[:5] + [b"event: response.output_text.delta\ndata: {oops\n\n"])
    assert r.error_kind == "protocol"
    r, _ = run(openai_stream()[:5] + [b"event: response.output_text.delta\ndata: [1, 2]\n\n"])
    assert r.error_kind == "protocol"


def test_reasoning_deltas_are_reasoning_tokens_and_the_answer_comes_after():
    part = {"item_id": "rs_1", "output_index": 0, "content_index": 0}
    reasoning = [ev("response.reasoning_text.delta", 10 + i, delta=d, **part) for i, d in enumerate(("th", "ink"))]
    events = openai_stream()
    r, tally = run(events[:4] + reasoning + events[4:])
    assert r.reasoning_tokens == 2 and r.first_token_at_ns == 5     # a reasoning delta is a first token
    assert r.first_answer_at_ns == 7 and r.output_text == "Hello!"  # the answer: the first text delta
    assert r.chunk_output_tokens == 5


def test_function_call_arguments_are_tokens_and_a_parsed_call():
    item = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "get_weather", "arguments": ""}
    events = [ev("response.created", 0, response=response("in_progress")),
              ev("response.output_item.added", 1, output_index=0, item=item)]
    events += [ev("response.function_call_arguments.delta", 2 + i, item_id="fc_1", output_index=0, delta=d)
               for i, d in enumerate(('{"city"', ': "Oslo"}'))]
    events += [ev("response.output_item.done", 4, output_index=0, item={**item, "arguments": '{"city": "Oslo"}'}),
               ev("response.completed", 5, response=response("completed", usage=USAGE))]
    r, tally = run(events)
    assert r.status == "ok" and r.first_token_at_ns == 3 and r.chunk_output_tokens == 2
    assert tally.calls == [["call_1", "get_weather", ['{"city": "Oslo"}']]]
    assert r.tool_calls == 1 and r.tool_args_parsed is True


def test_whole_response_body():
    r = Record(id=0, phase="measured", scheduled_at_ns=0, requested_output_tokens=8)
    tally = ResponsesTally(want_text=True)
    apply_body(r, tally, json.dumps(response("incomplete", "abc", USAGE,
                                             incomplete_details={"reason": "max_output_tokens"})).encode(), 5)
    finish(r, tally, None)
    assert r.status == "ok" and r.finish_reason == "length" and r.output_text == "abc"
    assert r.output_tokens == 3 and r.prompt_tokens == 7 and r.first_token_at_ns is None
    r = Record(id=1, phase="measured", scheduled_at_ns=0, requested_output_tokens=8)
    apply_body(r, ResponsesTally(), json.dumps(response("failed", error={"message": "no"})).encode(), 5)
    assert r.error_kind == "server_error" and r.error == "no"


class Api:
    endpoint, stream, include_usage, continuous_usage, ignore_eos = "responses", True, True, False, True
    extra_body = {"temperature": 0.0}
    structured: dict = {}


def test_request_body_input_and_max_output_tokens():
    base = base_body(Api, "m")
    assert base == {"model": "m", "stream": True, "ignore_eos": True, "temperature": 0.0}   # no stream_options
    assert json.loads(request_body(base, False, "hi", 9, endpoint="responses")) == {
        **base, "input": "hi", "max_output_tokens": 9}
    msgs = [{"role": "user", "content": "hi"}]
    assert json.loads(request_body(base, False, msgs, 9, endpoint="responses"))["input"] == msgs
    assert json.loads(request_body(base, False, "x", 9, messages=msgs, endpoint="responses"))["input"] == msgs
    with pytest.raises(ValueError, match="responses: input"):
        request_body(base, False, [1, 2, 3], 9, endpoint="responses")
    assert endpoint_path("responses") == "/v1/responses"


def test_client_takes_the_responses_endpoint():
    c = Client(ClientConfig(base_url="http://127.0.0.1:1", endpoint="responses", model="m"), 1)
    assert c.url == "http://127.0.0.1:1/v1/responses"
    with pytest.raises(ValueError, match="api.endpoint"):
        Client(ClientConfig(base_url="http://127.0.0.1:1", endpoint="respond", model="m"), 1)
