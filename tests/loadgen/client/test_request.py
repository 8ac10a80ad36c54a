"""loadgen.client.request: the pure rules both engines share (body, headers, record bookkeeping)."""
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from loadgen.record import Record
from loadgen.client.request import (apply_body, base_body, drop_fields, end_stream, finish,
                                    optional_fields, request_body, request_headers, with_headers)
from loadgen.scenario.model import Api
from loadgen.client.sse import StreamTally

ROOT = Path(__file__).resolve().parents[3]


def test_base_body_merges_extra_body_last_and_stream_options_deep():
    api = Api(continuous_usage=True, extra_body={"temperature": 0, "stream_options": {"x": 1}})
    assert base_body(api, "m") == {
        "model": "m", "stream": True, "ignore_eos": True, "temperature": 0,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True, "x": 1}}
    assert base_body(Api(stream=False, ignore_eos=False), "m") == {"model": "m", "stream": False}


def test_rejected_fields_are_dropped_from_the_base_body():
    api = Api(continuous_usage=True, extra_body={"min_tokens": 4, "temperature": 0})
    body = base_body(api, "m")
    assert optional_fields(body) == ["stream_options", "stream_options.include_usage",
                                     "stream_options.continuous_usage_stats", "ignore_eos",
                                     "min_tokens", "temperature"]
    assert base_body(api, "m", ("ignore_eos", "min_tokens",
                                "stream_options.continuous_usage_stats")) == {
        "model": "m", "stream": True, "temperature": 0, "stream_options": {"include_usage": True}}
    assert drop_fields(body, ["stream_options.include_usage",
                              "stream_options.continuous_usage_stats"]).get("stream_options") is None
    assert drop_fields(body, ["nope", "nope.x"]) == body and "ignore_eos" in body  # a copy


def test_request_body_and_headers():
    assert json.loads(request_body({"a": 1}, False, [1, 2], 5)) == {"a": 1, "prompt": [1, 2],
                                                                  "max_tokens": 5}
    msgs = [{"role": "user", "content": "hi"}]
    assert json.loads(request_body({}, True, "hi", 3))["messages"] == msgs
    assert json.loads(request_body({}, True, msgs, 3))["messages"] == msgs
    with pytest.raises(ValueError):
        request_body({}, True, [1, 2], 3)
    h = request_headers(Api(headers={"X-A": "b"}), "k")
    assert h["Authorization"] == "Bearer k" and h["Accept"] == "text/event-stream"
    assert h["X-A"] == "b"


def test_messages_replace_the_prompt_and_headers_merge_case_insensitively():
    conv = [{"role": "system", "content": "s"}, {"role": "user", "content": "u1"},
            {"role": "assistant", "content": "a1"}, {"role": "user", "content": "u2"}]
    assert json.loads(request_body({"m": 1}, True, "ignored", 4, conv)) == {
        "m": 1, "messages": conv, "max_tokens": 4}
    with pytest.raises(ValueError, match="chat"):
        request_body({}, False, "p", 4, conv)
    for bad in ([], ["text"]):
        with pytest.raises(ValueError):
            request_body({}, True, "p", 4, bad)
    base = {"Content-Type": "application/json", "X-Session": "a"}
    assert with_headers(base, None) is base and with_headers(base, {}) is base
    assert with_headers(base, {"x-session": "b", "X-New": "c"}) == {
        "Content-Type": "application/json", "x-session": "b", "X-New": "c"}
    assert base == {"Content-Type": "application/json", "X-Session": "a"}      # not changed


def test_finish_takes_first_answer_reasoning_and_text_from_the_tally():
    rec = Record(id=0, phase="measured", scheduled_at_ns=0)
    tally = StreamTally(want_text=True)
    for t, delta in [(10, {"role": "assistant"}), (20, {"reasoning_content": "r"}),
                     (30, {"content": "ab"}), (40, {"content": "c"})]:
        rec.chunks.append([t, tally.add({"choices": [{"delta": delta}]})])
    finish(rec, tally, None)
    assert (rec.first_token_at_ns, rec.first_answer_at_ns, rec.reasoning_tokens) == (20, 30, 1)
    assert rec.output_text == "abc"
    body = Record(id=1, phase="measured", scheduled_at_ns=0)
    whole = StreamTally(want_text=True)
    apply_body(body, whole, b'{"choices":[{"message":{"content":"xyz","reasoning_content":"r"}}]}', 5)
    finish(body, whole, None)
    assert (body.output_text, body.first_answer_at_ns, body.reasoning_tokens) == ("xyz", None, None)


def test_finish_counts_and_is_stable_when_rederived():
    rec = Record(id=0, phase="measured", scheduled_at_ns=0, workload_prompt_tokens=7)
    rec.chunks = [[10, 0], [20, 1], [30, 1]]
    tally = StreamTally()
    tally.completion_tokens, tally.finish_reason, tally.chars = 3, "length", 9
    end_stream(rec, tally, False, 40)
    finish(rec, tally, rec.workload_prompt_tokens)
    assert (rec.status, rec.end_at_ns, rec.first_chunk_at_ns, rec.first_token_at_ns) == \
        ("ok", 40, 10, 20)
    assert (rec.output_tokens, rec.output_tokens_source, rec.chunk_output_tokens) == \
        (3, "usage", 2)
    assert rec.token_count_mismatch is True
    assert (rec.prompt_tokens, rec.prompt_tokens_source) == (7, "workload")
    before = dict(rec.__dict__)
    # the Locust node re-derives a cancelled snapshot from the record itself: nothing changes
    view = SimpleNamespace(completion_tokens=rec.usage_output_tokens, prompt_tokens=None,
                           finish_reason=rec.finish_reason, chars=rec.output_chars)
    finish(rec, view, rec.workload_prompt_tokens)
    assert rec.__dict__ == before


def test_end_stream_without_done_or_finish_reason_is_incomplete():
    rec = Record(id=0, phase="measured", scheduled_at_ns=0)
    end_stream(rec, StreamTally(), False, 5)
    assert (rec.status, rec.error_kind, rec.end_at_ns) == ("error", "incomplete", 5)


def test_request_module_is_pure():
    """Imported by the gevent-patched Locust processes: no asyncio, aiohttp or gevent."""
    code = ("import sys, loadgen.client.request\n"
            "print(','.join(m for m in ('aiohttp', 'asyncio', 'gevent', 'loadgen.client.http_client')"
            " if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


# ---------------------------------------------------------------- issue 29 item 5: absurd usage
@pytest.mark.parametrize("usage", [-5, 10**18, 2.5, "8"])
def test_absurd_usage_fails_the_record_and_is_never_a_figure(usage):
    from loadgen.client.sse import StreamTally
    rec = Record(id=0, phase="measured", scheduled_at_ns=0, requested_output_tokens=8)
    rec.chunks = [[10, 1], [20, 1]]
    rec.status, rec.end_at_ns = "ok", 20
    tally = StreamTally()
    tally.completion_tokens = usage
    finish(rec, tally, None)
    assert rec.status == "error" and rec.error_kind == "protocol", rec.error
    assert "completion_tokens" in rec.error
    assert rec.output_tokens == 2 and rec.output_tokens_source == "chunks"
    assert rec.usage_output_tokens is None


def test_usage_within_what_the_answer_could_carry_stands():
    from loadgen.client.sse import StreamTally
    rec = Record(id=0, phase="measured", scheduled_at_ns=0, requested_output_tokens=8)
    rec.chunks = [[10, 1], [20, 1]]
    rec.status, rec.end_at_ns = "ok", 20
    tally = StreamTally()
    tally.completion_tokens, tally.prompt_tokens = 8, 3
    finish(rec, tally, None)
    assert rec.status == "ok" and rec.output_tokens == 8 and rec.output_tokens_source == "usage"
