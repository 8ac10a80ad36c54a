"""SSEParser and StreamTally: pure byte/JSON rules, checked split by split."""
import json

import pytest

from loadgen.client.sse import DONE, Malformed, NamedEvent, SSEParser, StreamTally, error_message, loads


def cmpl(text, finish=None, usage=None):
    o = {"id": "c", "object": "text_completion", "choices": [{"index": 0, "text": text,
                                                               "finish_reason": finish}]}
    if usage is not None:
        o["usage"] = usage
    return o


def chat(delta, finish=None, usage=None):
    o = {"id": "c", "object": "chat.completion.chunk",
         "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage is not None:
        o["usage"] = usage
    return o


def sse(*objs, done=True, nl=b"\n"):
    out = b"".join(b"data: " + json.dumps(o).encode() + nl + nl for o in objs)
    return out + (b"data: [DONE]" + nl + nl if done else b"")


def parse_all(pieces):
    p = SSEParser()
    out = []
    for piece in pieces:
        out += p.feed(piece)
    return out + p.finish()


STREAM = sse(cmpl("a"), cmpl("b"), cmpl("c", "length"))


def test_whole_stream_in_one_read():
    events = parse_all([STREAM])
    assert [json.loads(e)["choices"][0]["text"] for e in events[:3]] == ["a", "b", "c"]
    assert events[3] is DONE and len(events) == 4


@pytest.mark.parametrize("nl", [b"\n", b"\r\n", b"\r"])
def test_byte_by_byte_any_line_ending(nl):
    data = sse(cmpl("a"), cmpl("b", "stop"), nl=nl)
    events = parse_all([data[i:i + 1] for i in range(len(data))])
    assert events == parse_all([data])
    assert [json.loads(e)["choices"][0]["text"] for e in events[:2]] == ["a", "b"]
    assert events[2] is DONE and len(events) == 3


def test_crlf_split_between_cr_and_lf_is_one_line_end():
    p = SSEParser()
    out = p.feed(b'data: {"x": 1}\r')
    out += p.feed(b"\n\r")
    out += p.feed(b"\ndata: [DONE]\r\n\r\n")
    assert out == [b'{"x": 1}', DONE]


def test_a_trailing_cr_completes_the_event_in_its_own_read():
    # a \r ends its line whatever follows: the event is due in this read, not the next one
    p = SSEParser()
    assert p.feed(b'data: {"x": 1}\r\n\r') == [b'{"x": 1}']
    assert p.feed(b"\ndata: 2\r\r") == [b"2"]          # the leading \n was the LF of the \r
    assert p.feed(b"\n") == []
    assert p.feed(b"data: [DONE]\n\n") == [DONE]


def test_events_are_returned_in_the_read_that_completes_them():
    p = SSEParser()
    assert p.feed(b"data: {\"a\"") == []
    assert p.feed(b": 1}\n") == []
    assert p.feed(b"\ndata: 2\n\ndata: 3") == [b'{"a": 1}', b"2"]
    assert p.finish() == [b"3"]       # stream ended without a blank line: lenient


def test_comments_ids_retry_and_multiline_data():
    data = b": keep-alive\n\nid: 7\nretry: 100\ndata: line1\ndata:line2\n\n"
    assert parse_all([data]) == [b"line1\nline2"]


def test_named_error_event_and_malformed_line():
    events = parse_all([b"event: error\ndata: {\"message\": \"boom\"}\n\nnot a field line\n\n"])
    assert events[0] == NamedEvent("error", b'{"message": "boom"}')
    assert isinstance(events[1], Malformed) and events[1].line == b"not a field line"
    assert parse_all([b"event: message\ndata: x\n\n"]) == [b"x"]


def test_done_without_space_and_without_trailing_blank_line():
    assert parse_all([b"data:[DONE]\n"]) == [DONE]


def test_tally_completions_counts_one_per_content_chunk():
    t = StreamTally()
    ns = [t.add(cmpl("ab")), t.add(cmpl("")), t.add(cmpl("c", "length")),
          t.add({"choices": [], "usage": {"prompt_tokens": 4, "completion_tokens": 3}})]
    assert ns == [1, 0, 1, 0]
    assert (t.finish_reason, t.chars, t.prompt_tokens, t.completion_tokens) == ("length", 3, 4, 3)


def test_tally_chat_role_reasoning_content_and_tool_calls():
    t = StreamTally()
    ns = [t.add(chat({"role": "assistant", "content": ""})),
          t.add(chat({"reasoning_content": "think"})),
          t.add(chat({"reasoning": "more"})),
          t.add(chat({"content": "hi"})),
          t.add(chat({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]})),
          t.add(chat({}, "stop"))]
    assert ns == [0, 1, 1, 1, 1, 0]
    assert t.finish_reason == "stop" and t.chars == len("think") + len("more") + len("hi")
    assert t.completion_tokens is None


def u(n):
    """A running usage object: 5 prompt tokens, ``n`` completion tokens so far."""
    return {"prompt_tokens": 5, "completion_tokens": n}


def test_tally_continuous_usage_gives_per_chunk_deltas():
    t = StreamTally(continuous=True)
    ns = [t.add(chat({"role": "assistant", "content": ""}, usage=u(0))),
          t.add(chat({"content": "a b"}, usage=u(2))),
          t.add(chat({"content": "c"}, usage=u(3))),
          t.add(chat({"content": "d e f"}, "length", usage=u(6))),
          t.add({"choices": [], "usage": u(6)})]
    assert ns == [0, 2, 1, 3, 0] and t.completion_tokens == 6


def test_tally_without_continuous_ignores_usage_on_a_content_chunk():
    t = StreamTally(continuous=False)
    assert t.add(cmpl("x", "length", usage={"completion_tokens": 9})) == 1
    assert t.completion_tokens == 9


def test_tally_continuous_falls_back_when_server_omits_usage():
    t = StreamTally(continuous=True)
    assert [t.add(cmpl("a")), t.add(cmpl("b", usage={"completion_tokens": 7}))] == [1, 1]


def test_tally_error_objects_and_non_objects():
    t = StreamTally()
    assert t.add({"error": {"message": "overloaded", "code": 503}}) == -1
    assert error_message(t.error) == "503: overloaded"
    t2 = StreamTally()
    t2.add({"object": "error", "message": "bad", "type": "BadRequestError"})
    assert error_message(t2.error) == "BadRequestError: bad"
    with pytest.raises(ValueError):
        StreamTally().add([1, 2])


def test_multi_token_chunks_from_a_parsed_stream():
    data = sse(cmpl("a b"), cmpl("c d", "length"),
               {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 4}})
    t = StreamTally()
    counts = [t.add(json.loads(e)) for e in parse_all([data]) if e is not DONE]
    assert counts == [1, 1, 0] and t.completion_tokens == 4   # chunks 2 vs usage 4


@pytest.mark.parametrize("raw", [b'{"a": "\xc3\xbc\xe4\xb8\xad"}', b'  {"a": 1}  ', b'{"a": NaN}',
                                 b'[1, 2]', b'"text"', '{"b": "\u00fc"}'.encode("utf-16")])
def test_loads_agrees_with_json_loads(raw):
    try:
        want = json.loads(raw)
    except ValueError:
        with pytest.raises(ValueError):
            loads(raw)
        return
    assert repr(loads(raw)) == repr(want)     # repr: NaN != NaN


@pytest.mark.parametrize("raw", [b'{"a": 1', b'{"a": 1} {"b": 2}', b"", b"not json", b'{"a": "\xff"}'])
def test_loads_rejects_what_json_loads_rejects(raw):
    with pytest.raises(ValueError):
        json.loads(raw)
    with pytest.raises(ValueError):
        loads(raw)


def test_tally_continuous_usage_counts_special_tokens_in_empty_chunks():
    # vLLM: special tokens stream as "content": "" and the running usage still counts them
    t = StreamTally(continuous=True)
    ns = [t.add(chat({"role": "assistant", "content": ""}, usage=u(0))),
          t.add(chat({"content": ""}, usage=u(1))),
          t.add(chat({"content": "a"}, usage=u(2))),
          t.add(chat({"content": ""}, usage=u(2))),            # nothing new: 0
          t.add(cmpl("", usage=u(3))),
          t.add(chat({"content": ""}, "stop", usage=u(4))),
          t.add({"choices": [], "usage": u(4)})]
    assert ns == [0, 1, 1, 0, 1, 1, 0] and sum(ns) == t.completion_tokens == 4


def test_tally_without_continuous_usage_an_empty_chunk_is_no_token():
    t = StreamTally(continuous=False)
    assert t.add(chat({"content": ""}, usage={"completion_tokens": 1})) == 0


def test_ping_comments_and_ping_events_are_not_chunks():
    data = (b": ping - 2026-12-02 10:00:00.000000+00:00\r\n\r\n"
            b'data: {"a": 1}\n\n: ping\n\nevent: ping\ndata: 2026-12-02\n\n'
            b'event: keep-alive\ndata:\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n')
    assert parse_all([data]) == [b'{"a": 1}', b'{"b": 2}', DONE]
    assert parse_all([data[i:i + 1] for i in range(len(data))]) == [b'{"a": 1}', b'{"b": 2}', DONE]


def test_tally_tells_reasoning_from_answer_chunks():
    t = StreamTally(want_text=True)
    chunks = [{"choices": [{"delta": {"role": "assistant", "content": ""}}]},      # 0: nothing
              {"choices": [{"delta": {"reasoning_content": "hm"}}]},              # 1: reasoning
              {"choices": [{"delta": {"reasoning": "so", "content": ""}}]},        # 2: reasoning
              {"choices": [{"delta": {"tool_calls": [{"id": "x"}]}}]},            # 3: answer (tool)
              {"choices": [{"delta": {"content": "Hi", "reasoning_content": "z"}}]},  # 4: answer
              {"choices": [], "usage": {"completion_tokens": 5}}]                   # 5: usage only
    assert [t.add(c) for c in chunks] == [0, 1, 1, 1, 1, 0]
    assert (t.seen, t.first_answer, t.reasoning_tokens, t.text) == (6, 3, 2, ["Hi"])
    assert t.chars == len("hm") + len("so") + len("Hi")
    none = StreamTally()
    none.add({"choices": [{"text": " a"}]})
    assert (none.first_answer, none.reasoning_tokens, none.text) == (0, None, None)


def test_tally_reasoning_with_continuous_usage_counts_the_increase():
    t = StreamTally(continuous=True)
    u = lambda n: {"completion_tokens": n}  # noqa: E731
    assert t.add({"choices": [{"delta": {"reasoning_content": "ab"}}], "usage": u(3)}) == 3
    assert t.add({"choices": [{"delta": {"content": "c"}}], "usage": u(5)}) == 2
    assert (t.reasoning_tokens, t.first_answer) == (3, 1)
