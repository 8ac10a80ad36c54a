"""`loadgen run` against the replayed vLLM 0.32 CPU server (tests/fixtures/servers/vllm/, recorded by
bench/compat/record.py) for what goes beyond text chat/completions: embeddings (vLLM's pooling
runner), the Responses API, tool calls (tool_choice required / named / auto), json_schema answers
and images (a BLIP-2-shaped model). Each record must hold what the real vLLM answered: the counts
below are read from the recorded transcripts, not written here.
"""
from __future__ import annotations

import json

import pytest

from bench.compat import models, record as rec_mod
from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from tests.support.replay_server import FIXTURES, ReplayServer

VLLM = FIXTURES / "vllm"
pytestmark = pytest.mark.skipif(not (VLLM / "embeddings.json").exists(),
                                reason="no recorded vLLM feature transcripts")
N = 8
TOOL = {"type": "function", "function": rec_mod.TOOLS[0]["function"]}
IMAGES = {"width": rec_mod.IMAGE["width"], "height": rec_mod.IMAGE["height"], "format": "png", "pool": 2}


def case(name: str) -> dict:
    return json.loads((VLLM / f"{name}.json").read_text())


def body_text(c: dict) -> str:
    return "".join(p["text"] for p in c["response"]["chunks"])


def events(c: dict) -> list:
    """The JSON objects of a recorded SSE answer's data lines ([DONE] left out)."""
    return [json.loads(ln[6:]) for ln in body_text(c).splitlines() if ln.startswith("data: {")]


def usage(c: dict) -> dict:
    """The recorded answer's usage: the last event that carries one, or the JSON body's."""
    if c["request"]["body"].get("stream"):
        found = [e.get("usage") or (e.get("response") or {}).get("usage") for e in events(c)]
        return [u for u in found if u][-1]
    return json.loads(body_text(c))["usage"]


def run(url, tmp_path, name: str, api: dict, workload: dict) -> tuple[list, dict]:
    res = run_scenario(scenario_from_dict({
        "name": name, "target": {"url": url, "scrape_metrics": False}, "api": api,
        "workload": {"prompt_tokens": {"dist": "fixed", "value": 16},
                     "output_tokens": {"dist": "fixed", "value": rec_mod.MAX_TOKENS}, **workload},
        "load": {"mode": "concurrency", "concurrency": 4, "num_requests": N},
        "output": {"dir": str(tmp_path), "run_name": name, "report": "none"}}))
    recs = [r for r in read_records(res.run_dir / "records.jsonl") if r["phase"] == "measured"]
    assert len(recs) == N and [r["status"] for r in recs] == ["ok"] * N, \
        {r["error_kind"]: r["error"] for r in recs if r["status"] != "ok"}
    assert res.summary["requests_failed"] == 0 and not res.summary.get("dropped_fields")
    return recs, res.summary


@pytest.fixture(scope="module")
def vllm():
    with ReplayServer("vllm") as s:
        yield s


@pytest.mark.parametrize("inputs, name", [(4, "embeddings"), (1, "embeddings-one")])
def test_embeddings_against_the_pooling_runner(vllm, tmp_path, inputs, name):
    c = case(name)
    got = json.loads(body_text(c))
    assert len(got["data"]) == len(rec_mod.EMBED_INPUTS if inputs > 1 else [0])
    assert len(got["data"][0]["embedding"]) == models.SHAPES["dim"]      # the Llama's hidden size
    vllm.log(clear=True)
    recs, summary = run(vllm.url, tmp_path, name, {"endpoint": "embeddings"},
                        {"inputs_per_request": inputs})
    assert [x[0] for x in vllm.log() if x[1] == "/v1/embeddings"][-N:] == [name] * N
    assert all(r["inputs"] == inputs and r["prompt_tokens"] == usage(c)["prompt_tokens"]
               and r["prompt_tokens_source"] == "usage" and r["first_token_at_ns"] is None for r in recs)


@pytest.mark.parametrize("stream, name", [(True, "responses-stream-loadgen"), (False, "responses")])
def test_responses_api(vllm, tmp_path, stream, name):
    u = usage(case(name))
    recs, _ = run(vllm.url, tmp_path, name, {"endpoint": "responses", "stream": stream}, {})
    assert all(r["output_tokens"] == u["output_tokens"] == rec_mod.MAX_TOKENS
               and r["prompt_tokens"] == u["input_tokens"] for r in recs)
    if stream:                   # the deltas counted as they came, and usage agrees with them
        assert all(r["first_token_at_ns"] and r["chunk_output_tokens"] == u["output_tokens"]
                   and r["token_count_mismatch"] is False for r in recs)


def recorded_calls(c: dict) -> list:
    """[name, arguments] of each tool call in a recorded chat stream (pieces joined by index)."""
    calls: dict = {}
    for e in events(c):
        for ch in e.get("choices") or ():
            for tc in (ch.get("delta") or {}).get("tool_calls") or ():
                one = calls.setdefault(tc["index"], ["", ""])
                one[0] += (tc.get("function") or {}).get("name") or ""
                one[1] += (tc.get("function") or {}).get("arguments") or ""
    return [calls[i] for i in sorted(calls)]


@pytest.mark.parametrize("choice, name", [
    ("required", "chat-stream-tools-required"),
    ({"type": "function", "function": {"name": "get_weather"}}, "chat-stream-tools-named"),
    ("auto", "chat-stream-tools-auto")])
def test_tool_calls(vllm, tmp_path, choice, name):
    c = case(name)
    calls = recorded_calls(c)
    if choice != "auto":          # guided (structural tag; the tool is strict): calls by name
        assert calls and all(n == "get_weather" for n, _ in calls)
    else:                         # random weights: the hermes parser finds no <tool_call> in the text
        assert calls == []
    recs, summary = run(vllm.url, tmp_path, name, {"endpoint": "chat", "stream": True},
                        {"tools": [TOOL], "tool_choice": choice})
    assert all(r["tool_calls"] == len(calls) for r in recs)
    if calls:                     # the recorded arguments, judged here as loadgen must judge them
        try:
            args, parsed = json.loads(calls[-1][1]), True
        except ValueError:        # cut by max_tokens (random whitespace inside the call)
            args, parsed = None, False
        valid = parsed and isinstance(args, dict) and set(args) == {"city"} and args["city"] in rec_mod.CITIES
        assert all(r["tool_args_parsed"] is parsed and r["tool_args_valid"] is valid and r["first_token_at_ns"]
                   and (r["structured_error"] is None) is valid for r in recs)
        assert summary["structured"]["tools"]["valid_share"] == (1.0 if valid else 0.0)
    else:
        assert all(r["tool_args_parsed"] is None and r["output_chars"] > 0 for r in recs)
    assert all(r["output_tokens"] == usage(c)["completion_tokens"] for r in recs)


def test_a_whole_answer_with_tool_calls_or_their_raw_text(vllm, tmp_path):
    # not streamed: vLLM's hermes parser gives message.tool_calls only when the text parses; a
    # second call cut by max_tokens leaves the raw <tool_call> text as content and no calls
    msg = json.loads(body_text(case("chat-tools-required")))["choices"][0]["message"]
    calls = msg.get("tool_calls") or []
    recs, _ = run(vllm.url, tmp_path, "tools-whole", {"endpoint": "chat", "stream": False},
                  {"tools": [TOOL], "tool_choice": "required"})
    assert all(r["tool_calls"] == len(calls) and r["output_chars"] == len(msg.get("content") or "")
               for r in recs)
    if not calls:
        assert "<tool_call>" in msg["content"] and all(r["tool_args_parsed"] is None for r in recs)


def test_json_schema_answers(vllm, tmp_path):
    c = case("chat-stream-json-schema")
    text = "".join((ch.get("delta") or {}).get("content") or "" for e in events(c) for ch in e.get("choices") or ())
    answer = json.loads(text)                      # the grammar held: one JSON object, then the end
    assert answer["city"] in rec_mod.CITIES and isinstance(answer["rain"], bool)
    recs, summary = run(vllm.url, tmp_path, "json-schema",
                        {"endpoint": "chat", "stream": True, "response_format": rec_mod.JSON_SCHEMA}, {})
    assert all(r["json_parsed"] is True and r["json_valid"] is True and r["structured_error"] is None
               and r["output_tokens"] == usage(c)["completion_tokens"] for r in recs)
    assert summary["structured"]["response_format"]["valid_share"] == 1.0


@pytest.mark.parametrize("count, stream, name", [(1, True, "chat-stream-images-loadgen"),
                                                 (1, False, "chat-images")])
def test_images(vllm, tmp_path, count, stream, name):
    c = case(name)
    u = usage(c)
    text_only = case("chat-stream-loadgen" if stream else "chat")   # the same prompt without images
    # vLLM put the image's 16 tokens (BLIP-2's Q-Former queries) in front of the prompt
    assert u["prompt_tokens"] - usage(text_only)["prompt_tokens"] == count * models.image_tokens()
    vllm.log(clear=True)
    recs, summary = run(vllm.url, tmp_path, name, {"endpoint": "chat", "stream": stream},
                        {"images": {"count": count, **IMAGES}})
    assert [x[0] for x in vllm.log() if x[1] == "/v1/chat/completions"][-N:] == [name] * N
    assert all(r["input_images"] == count and r["prompt_tokens"] == u["prompt_tokens"]
               and r["prompt_tokens_source"] == "usage" and r["output_tokens"] == rec_mod.MAX_TOKENS for r in recs)
    assert summary["images"]["images"] == N * count and summary["images"]["per_request"] == count
