"""Tool calls and JSON answers through the Client against the real calibration server, on both
transports: the body carries tools / tool_choice / response_format, streamed tool-call deltas
are output (the first one is the first token), and the record says whether the final call's
arguments and the JSON answer parse and validate (loadgen/client/structured.py)."""
from __future__ import annotations

import json

import pytest

from loadgen.client.http_client import Client, ClientConfig, RequestSpec
from loadgen.scenario.workload import PromptSpec
from loadgen.scenario.structured import JsonSchema, ResponseFormat, Tool, body_fields

_ids = iter(range(10**6))
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "the weather in a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"},
                                                    "days": {"type": "integer", "minimum": 1}},
                   "required": ["city"], "additionalProperties": False}}}
CLOCK = {"type": "function", "function": {"name": "get_time"}}       # no parameters: any object
ANSWER_SCHEMA = {"type": "object", "properties": {"answer": {"type": "string"}},
                 "required": ["answer"]}


@pytest.fixture(autouse=True, params=["wire", "aiohttp"])
def transport(request, monkeypatch):
    monkeypatch.setenv("LOADGEN_HTTP", request.param)
    return request.param


def tools_cfg(server, calib: dict, tools=(WEATHER, CLOCK), choice=None, rf=None, **kw):
    structured = body_fields([Tool.model_validate(t) for t in tools] if tools else None, choice, rf)
    return ClientConfig(base_url=server.url, endpoint="chat", model="calib-model",
                        extra_body={"calib": calib}, structured=structured, **kw)


def schema_format(schema=ANSWER_SCHEMA) -> ResponseFormat:
    return ResponseFormat(type="json_schema",
                          json_schema=JsonSchema.model_validate({"name": "a", "schema": schema}))


async def one(cfg: ClientConfig, max_tokens: int = 8):
    i = next(_ids)
    s = RequestSpec.of(PromptSpec(f"tools-{i} what is the weather", 4, max_tokens), i)
    async with Client(cfg, 2) as c:
        return await c.execute(s), s


def entry(server, prompt):
    (e,) = [e for e in server.log() if e["prompt"] == prompt]
    return e


async def test_streamed_tool_call_is_output_and_its_arguments_validate(calib_server):
    args = '{"city": "Paris", "days": 3}'
    rec, s = await one(tools_cfg(calib_server, {"answer": "tool_call", "json": args, "ttft_ms": 5,
                                                "itl_ms": 2},
                                 choice="required"))
    assert rec.status == "ok", rec.error
    e = entry(calib_server, s.prompt)
    assert e["body"]["tools"][0]["function"]["name"] == "get_weather"
    assert e["body"]["tool_choice"] == "required"
    # role chunk (0 tokens), the name delta, then 7 argument pieces: every tool-call delta is 1 token
    assert [n for _, n in rec.chunks] == [0] + [1] * 8 + [0]
    assert rec.first_token_at_ns == rec.chunks[1][0] and rec.first_answer_at_ns == rec.chunks[1][0]
    assert rec.first_token_at_ns >= rec.sent_at_ns
    assert rec.output_tokens == rec.chunk_output_tokens == 8 and rec.token_count_mismatch is False
    assert rec.finish_reason == "tool_calls"
    assert (rec.tool_calls, rec.tool_args_parsed, rec.tool_args_valid) == (1, True, True)
    assert rec.json_parsed is None and rec.structured_error is None and rec.output_text is None


@pytest.mark.parametrize("calib, parsed, valid, why", [
    ({"json": '{"city": "Paris", "days": 0}'}, True, False, "days"),        # schema: minimum 1
    ({"json": '{"town": "Paris"}'}, True, False, "get_weather arguments"),   # extra, required
    ({"json": '{"city": "Par'}, False, False, "not JSON"),                  # cut off
    ({"json": "{}", "tool_name": "launch"}, True, False, "not one of the tools"),
    ({"json": '{"tz": "UTC"}', "tool_name": "get_time"}, True, True, None),  # no parameters
    ({"json": "[1]", "tool_name": "get_time"}, True, False, "not a JSON object"),
])
async def test_tool_call_arguments_that_do_not_fit(calib_server, calib, parsed, valid, why):
    rec, _ = await one(tools_cfg(calib_server, {"answer": "tool_call", **calib}), max_tokens=6)
    assert rec.status == "ok", rec.error
    assert (rec.tool_calls, rec.tool_args_parsed, rec.tool_args_valid) == (1, parsed, valid)
    if why is None:
        assert rec.structured_error is None
    else:
        assert why in rec.structured_error and "\n" not in rec.structured_error


async def test_named_tool_choice_names_the_call_and_plain_answer_counts_zero_calls(calib_server):
    named = {"type": "function", "function": {"name": "get_time"}}
    from loadgen.scenario.structured import NamedToolChoice
    rec, s = await one(tools_cfg(calib_server, {"answer": "tool_call", "json": "{}"},
                                 choice=NamedToolChoice.model_validate(named)))
    assert entry(calib_server, s.prompt)["body"]["tool_choice"] == named
    assert (rec.tool_calls, rec.tool_args_valid) == (1, True)
    plain, _ = await one(tools_cfg(calib_server, {}))           # tools offered, content answered
    assert plain.status == "ok" and plain.output_tokens == 8
    assert (plain.tool_calls, plain.tool_args_parsed, plain.tool_args_valid) == (0, None, None)


@pytest.mark.parametrize("text, parsed, valid", [
    ('{"answer": "sunny"}', True, True),
    ('{"answer": 42}', True, False),
    ('{"answer": "sun', False, False),
])
async def test_json_answer_against_response_format_schema(calib_server, text, parsed, valid):
    rec, s = await one(tools_cfg(calib_server, {"answer": "json", "json": text, "itl_ms": 1},
                                 tools=(), rf=schema_format()), max_tokens=6)
    assert rec.status == "ok", rec.error
    assert entry(calib_server, s.prompt)["body"]["response_format"]["json_schema"]["schema"] \
        == ANSWER_SCHEMA
    assert rec.output_tokens == 6 and rec.finish_reason == "stop"
    assert (rec.json_parsed, rec.json_valid) == (parsed, valid)
    assert rec.tool_calls is None and rec.output_text is None   # the text is checked, not kept
    assert (rec.structured_error is None) == valid


async def test_json_object_needs_an_object_and_want_text_still_keeps_the_text(calib_server):
    cfg = tools_cfg(calib_server, {"answer": "json", "json": "[1, 2]"}, tools=(),
                    rf=ResponseFormat(type="json_object"))
    i = next(_ids)
    async with Client(cfg, 1) as c:
        rec = await c.execute(RequestSpec.of(PromptSpec(f"tools-{i}", 2, 4), i, want_text=True))
    assert (rec.json_parsed, rec.json_valid, rec.output_text) == (True, False, "[1, 2]")


async def test_non_streamed_tool_call_and_json_answers_are_checked_too(calib_server):
    rec, _ = await one(tools_cfg(calib_server, {"answer": "tool_call", "json": '{"city": "Oslo"}'},
                                 stream=False))
    assert rec.status == "ok" and rec.chunks == [] and rec.first_token_at_ns is None
    assert (rec.tool_calls, rec.tool_args_parsed, rec.tool_args_valid) == (1, True, True)
    rec, _ = await one(tools_cfg(calib_server, {"answer": "json", "json": '{"answer": 1}'},
                                 tools=(), rf=schema_format(), stream=False))
    assert (rec.json_parsed, rec.json_valid) == (True, False)


async def test_tools_are_refused_on_the_completions_endpoint(calib_server):
    cfg = tools_cfg(calib_server, {})
    cfg.endpoint = "completions"
    with pytest.raises(ValueError, match="tools.*needs api.endpoint: chat"):
        Client(cfg, 1)


async def test_a_plain_chat_run_gets_no_structured_fields(calib_server):
    rec, _ = await one(ClientConfig(base_url=calib_server.url, endpoint="chat", model="calib-model"))
    assert rec.status == "ok"
    assert all(getattr(rec, k) is None for k in ("tool_calls", "tool_args_parsed", "tool_args_valid",
                                                  "json_parsed", "json_valid", "structured_error"))
    body = json.loads(Client(ClientConfig(base_url=calib_server.url, endpoint="chat"), 1)
                      .body(RequestSpec.of(PromptSpec("x", 1, 2), 0)))
    assert not {"tools", "tool_choice", "response_format"} & set(body)
