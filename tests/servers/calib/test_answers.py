"""servers/calib/answers.py through the real handler: a streamed tool call in OpenAI's delta form
(id and name first, the arguments in pieces), a JSON answer, the non-streamed forms, refusals.
A real aiohttp server on 127.0.0.1 in this process."""
from __future__ import annotations

import json

import pytest

from servers.calib import MODEL
from servers.calib.answers import split, tool_name
from tests.servers.calib.calib_post import post_json

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}},
         {"type": "function", "function": {"name": "get_time"}}]


async def _post(srv, calib: dict, path="/v1/chat/completions", stream=True, **body):
    body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5,
            "stream": stream, "stream_options": {"include_usage": True}, "tools": TOOLS,
            "calib": calib, **body}
    return await post_json(srv, path, body)


def _chunks(text: str) -> list[dict]:
    return [json.loads(line[6:]) for line in text.split("\n")
            if line.startswith("data: ") and line != "data: [DONE]"]


async def test_streamed_tool_call_in_openai_delta_form(server):
    args = '{"city": "Paris"}'
    status, text = await _post(server, {"answer": "tool_call", "json": args, "itl_ms": 1})
    assert status == 200 and text.endswith("data: [DONE]\n\n")
    ch = _chunks(text)
    assert ch[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in ch[1:-1]]
    assert len(calls) == 5                                   # max_tokens 5: name + 4 pieces
    head = calls[0]
    assert head["index"] == 0 and head["type"] == "function" and head["id"].startswith("call-calib-")
    assert head["function"] == {"name": "get_weather", "arguments": ""}
    pieces = [c["function"]["arguments"] for c in calls[1:]]
    assert all(pieces) and "".join(pieces) == args and all(c["index"] == 0 for c in calls)
    assert [c["choices"][0]["finish_reason"] for c in ch[1:-1]] == [None] * 4 + ["tool_calls"]
    assert ch[-1]["usage"]["completion_tokens"] == 5


async def test_json_answer_is_content_pieces_sent_as_given(server):
    text_in = '{"answer": 4'                                 # not JSON: sent anyway
    status, text = await _post(server, {"answer": "json", "json": text_in}, max_tokens=3)
    ch = _chunks(text)
    content = [c["choices"][0]["delta"]["content"] for c in ch[1:-1]]
    assert status == 200 and "".join(content) == text_in and len(content) == 3
    assert ch[-2]["choices"][0]["finish_reason"] == "stop"
    assert ch[-1]["usage"]["completion_tokens"] == 3


async def test_named_tool_choice_and_short_arguments(server):
    choice = {"type": "function", "function": {"name": "get_time"}}
    _, text = await _post(server, {"answer": "tool_call", "json": "{}"}, tool_choice=choice,
                          max_tokens=16)
    calls = [c["choices"][0]["delta"]["tool_calls"][0] for c in _chunks(text)[1:-1]]
    assert calls[0]["function"]["name"] == "get_time"
    assert [c["function"]["arguments"] for c in calls[1:]] == ["{", "}"]   # fewer chunks than tokens


async def test_non_streamed_answers(server):
    status, text = await _post(server, {"answer": "tool_call", "json": '{"a": 1}'}, stream=False)
    o = json.loads(text)
    msg = o["choices"][0]["message"]
    assert status == 200 and o["choices"][0]["finish_reason"] == "tool_calls"
    assert msg["content"] is None and msg["tool_calls"][0]["function"] == {
        "name": "get_weather", "arguments": '{"a": 1}'}
    _, text = await _post(server, {"answer": "json", "json": "[1]"}, stream=False)
    assert json.loads(text)["choices"][0]["message"]["content"] == "[1]"


@pytest.mark.parametrize("calib, path, why", [
    ({"answer": "tool_call"}, "/v1/completions", "chat answers"),
    ({"answer": "poem"}, "/v1/chat/completions", "expected one of tool_call, json"),
])
async def test_refused_answers_are_400s(server, calib, path, why):
    status, text = await _post(server, calib, path=path, prompt="hi")
    assert status == 400 and why in json.loads(text)["error"]["message"]


def test_split_and_tool_name_rules():
    assert split("abcdefg", 3) == ["ab", "cd", "efg"] and split("ab", 5) == ["a", "b"]
    assert split("", 4) == []
    assert tool_name({"tool_name": "x"}, {"tools": TOOLS}) == "x"
    assert tool_name({}, {"tools": TOOLS}) == "get_weather"
    assert tool_name({}, {}) == "calib_tool"
