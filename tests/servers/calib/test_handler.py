"""servers/calib/handler.py (+ chunks, faults, lockstep, app): answers on known deadlines, every
write logged, faults as described. A real aiohttp server on 127.0.0.1 in this process."""
from __future__ import annotations

import json

import aiohttp
import pytest

from servers.calib import DEFAULTS, MODEL
from tests.servers.calib.calib_post import post_json

TOL_NS = 1_000_000          # asyncio may wake a sleep up to its clock resolution early


async def _post(srv, calib: dict, path="/v1/completions", stream=True, **body):
    body = {"model": MODEL, "prompt": "hello world", "max_tokens": 4, "stream": stream,
            "calib": calib, **body}
    return await post_json(srv, path, body)


async def _get(srv, path: str):
    async with aiohttp.ClientSession() as s:
        async with s.get(f"http://127.0.0.1:{srv.port}{path}") as r:
            return await r.json()


def _events(text: str) -> list:
    return [line[6:] for line in text.split("\n") if line.startswith("data: ")]


async def test_streams_on_absolute_deadlines_and_logs_every_write(server):
    status, text = await _post(server, {"ttft_ms": 20, "itl_ms": 5}, max_tokens=4,
                               stream_options={"include_usage": True})
    ev = _events(text)
    assert status == 200 and ev[-1] == "[DONE]"
    assert json.loads(ev[-2])["usage"]["completion_tokens"] == 4
    (entry,) = await _get(server, "/calib/log?clear=1")
    content = [t for t, n in entry["chunks"] if n > 0]
    assert len(content) == 4
    for j, t in enumerate(content):    # never before its deadline: arrival + ttft + j*itl
        assert t >= entry["arrival_ns"] + 20_000_000 + j * 5_000_000 - TOL_NS
    assert await _get(server, "/calib/log") == []


async def test_chat_role_chunk_reasoning_and_defaults(server):
    status, text = await _post(server, {"reasoning_tokens": 1}, path="/v1/chat/completions",
                               messages=[{"role": "user", "content": "hi"}], max_tokens=2,
                               prompt=None)
    ev = [json.loads(e) for e in _events(text)[:-1]]
    assert ev[0]["choices"][0]["delta"]["role"] == "assistant"
    assert "reasoning_content" in ev[1]["choices"][0]["delta"]
    assert ev[2]["choices"][0]["delta"]["content"] == " tok"
    assert DEFAULTS["ttft_ms"] == 0 and DEFAULTS["fault"] is None
    (entry,) = await _get(server, "/calib/log")
    assert entry["messages"] == [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("fault,check", [
    ("http500", lambda st, ev: st == 500),
    ("http429", lambda st, ev: st == 429),
    ("bad_json", lambda st, ev: any(e.startswith('{"choices": [ not') for e in ev)),
    ("error_event", lambda st, ev: any('"error"' in e for e in ev) and ev[-1] == "[DONE]"),
    ("no_done", lambda st, ev: "[DONE]" not in ev and len(ev) == 4),
    ("noise", lambda st, ev: ev[-1] == "[DONE]"),
])
async def test_faults(server, fault, check):
    status, text = await _post(server, {"fault": fault, "fault_at": 1})
    assert check(status, _events(text.replace("\r\n", "\n")))


async def test_drop_aborts_the_stream(server):
    with pytest.raises(aiohttp.ClientPayloadError):
        await _post(server, {"fault": "drop", "fault_at": 1, "itl_ms": 1})


async def test_lockstep_writes_every_stream_in_one_tick(server):
    import asyncio
    calib = {"lockstep": True, "itl_ms": 20, "ttft_ms": 0, "tokens": 3}
    await asyncio.gather(_post(server, calib), _post(server, calib))
    (clock,) = await _get(server, "/calib/clock")
    assert clock["itl_ns"] == 20_000_000
    ticks = clock["ticks"]
    for k, planned, start, end, n in ticks:
        assert planned == clock["epoch_ns"] + k * 20_000_000 and start >= planned - TOL_NS
    assert sum(n for *_, n in ticks) == 6          # 2 streams x 3 chunks, each in some tick


async def test_non_streamed_answer_and_models(server):
    status, text = await _post(server, {"tokens": 3}, stream=False)
    body = json.loads(text)
    assert status == 200 and body["choices"][0]["text"] == " tok" * 3
    assert body["usage"]["completion_tokens"] == 3
    models = await _get(server, "/v1/models")
    assert models["data"][0]["id"] == MODEL


async def test_bad_body_is_400(server):
    async with aiohttp.ClientSession() as s:
        async with s.post(f"http://127.0.0.1:{server.port}/v1/completions", data=b"[1]") as r:
            assert r.status == 400
