"""The real JAX server (`python -m servers.jax --preset tiny`) on 127.0.0.1 through the official `openai`
client and raw HTTP: completions/chat, streaming, usage, stop strings, errors, metrics, disconnects, a full
queue, the API key and a clean SIGTERM exit."""
from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import aiohttp
import openai
import pytest

from tests.servers.jax.server_proc import ServerProc, metrics, started

pytestmark = pytest.mark.slow     # a real JAX server or engine compiles: minutes on CI's 2 cores


def client(srv: ServerProc, api_key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.base_url + "/v1", api_key=api_key, max_retries=0, timeout=60)


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return json.loads(r.read())


GREEDY = dict(temperature=0.0, extra_body={"ignore_eos": True})


def test_completions_stream_matches_non_stream(jax_server):
    c = client(jax_server)
    full = c.completions.create(model="tiny", prompt="hello world", max_tokens=8, **GREEDY)
    assert full.choices[0].finish_reason == "length"
    assert full.usage.completion_tokens == 8 and full.usage.prompt_tokens == len("hello world")
    assert len(full.choices[0].text) >= 8  # every ByteTokenizer token shows at least one character
    chunks = list(c.completions.create(model="tiny", prompt="hello world", max_tokens=8, stream=True,
                                       stream_options={"include_usage": True}, **GREEDY))
    text_chunks = [ch for ch in chunks if ch.choices]
    assert len(text_chunks) == 8
    assert "".join(ch.choices[0].text for ch in text_chunks) == full.choices[0].text
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 8


def test_chat_usage_equals_streamed_content_chunks(jax_server):
    c = client(jax_server)
    msgs = [{"role": "user", "content": "Say something."}]
    resp = c.chat.completions.create(model="tiny", messages=msgs, max_completion_tokens=6, **GREEDY)
    assert resp.choices[0].message.role == "assistant" and resp.usage.completion_tokens == 6
    stream = c.chat.completions.create(model="tiny", messages=msgs, max_completion_tokens=6, stream=True,
                                       stream_options={"include_usage": True}, **GREEDY)
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    content = [ch for ch in chunks if ch.choices and ch.choices[0].delta.content]
    usage = chunks[-1].usage
    assert usage is not None and usage.completion_tokens == len(content) == 6
    assert "".join(ch.choices[0].delta.content for ch in content) == resp.choices[0].message.content
    assert content[-1].choices[0].finish_reason == "length"


def test_stop_string_on_real_text(jax_server):
    c = client(jax_server)
    text = c.completions.create(model="tiny", prompt="abc", max_tokens=16, **GREEDY).choices[0].text
    stop = text[6:8]
    want = text[:text.find(stop)]
    got = c.completions.create(model="tiny", prompt="abc", max_tokens=16, stop=[stop], **GREEDY)
    assert got.choices[0].text == want and got.choices[0].finish_reason == "stop"
    streamed = c.completions.create(model="tiny", prompt="abc", max_tokens=16, stop=stop, stream=True, **GREEDY)
    assert "".join(ch.choices[0].text for ch in streamed if ch.choices) == want


def test_bad_requests_then_still_serving(jax_server):
    c = client(jax_server)
    with pytest.raises(openai.BadRequestError) as e:
        c.completions.create(model="tiny", prompt="x" * 300, max_tokens=4)
    assert e.value.status_code == 400 and e.value.body["code"] == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError):
        c.completions.create(model="tiny", prompt="hi", max_tokens=0)
    with pytest.raises(openai.BadRequestError):
        c.completions.create(model="tiny", prompt="hi", max_tokens=4, n=2)
    with pytest.raises(openai.NotFoundError):
        c.completions.create(model="not-this-one", prompt="hi", max_tokens=4)
    req = urllib.request.Request(jax_server.base_url + "/v1/chat/completions", data=b"{oops", method="POST")
    with pytest.raises(urllib.error.HTTPError) as he:
        urllib.request.urlopen(req, timeout=10)
    assert he.value.code == 400 and "error" in json.loads(he.value.read())
    assert c.completions.create(model="tiny", prompt="hi", max_tokens=2).usage.completion_tokens >= 1


def test_models_info_and_metrics_after_traffic(jax_server):
    card = get_json(jax_server.base_url + "/v1/models")["data"][0]
    assert card["id"] == "tiny" and card["max_model_len"] == 256
    info = get_json(jax_server.base_url + "/info")
    assert info["model"]["n_layers"] > 0 and info["max_model_len"] == 256 and info["server"]["slots"] == 4
    before = metrics(jax_server.base_url)
    client(jax_server).completions.create(model="tiny", prompt="metric", max_tokens=5, **GREEDY)
    after = metrics(jax_server.base_url)
    d = {k: after[k] - before.get(k, 0.0) for k in after}
    assert d["vllm:prompt_tokens_total"] == len("metric")
    assert d["vllm:generation_tokens_total"] == 5
    assert d['vllm:request_success_total{"finished_reason": "length"}'] == 1
    assert d["vllm:time_to_first_token_seconds_count"] == 1
    assert d["vllm:inter_token_latency_seconds_count"] == 4
    assert d["vllm:e2e_request_latency_seconds_count"] == 1
    assert 0 < d["vllm:e2e_request_latency_seconds_sum"] < 60
    for name in ("vllm:num_requests_running", "vllm:num_requests_waiting", "vllm:kv_cache_usage_perc",
                 "vllm:request_queue_time_seconds_count", "vllm:request_prefill_time_seconds_count",
                 "vllm:request_decode_time_seconds_count"):
        assert name in after, name
    assert after["vllm:num_requests_running"] == 0 and after["vllm:kv_cache_usage_perc"] == 0


async def _open_stream(session: aiohttp.ClientSession, url: str, max_tokens: int, headers=None):
    r = await session.post(url + "/v1/completions", headers=headers,
                           json={"prompt": "x", "max_tokens": max_tokens, "stream": True, "ignore_eos": True})
    assert r.status == 200, await r.text()
    await r.content.readline()  # first token arrived: the request holds a slot
    return r


async def _wait_running(srv: ServerProc, want: int, timeout_s: float = 30.0) -> float:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while loop.time() < deadline:
        running = metrics(srv.base_url)["vllm:num_requests_running"]
        if running == want:
            return running
        await asyncio.sleep(0.05)
    return metrics(srv.base_url)["vllm:num_requests_running"]


async def test_concurrent_streams_more_than_slots(jax_server):
    async def one(s: aiohttp.ClientSession, i: int) -> tuple[int, int, str]:
        body = {"prompt": f"req {i}", "max_tokens": 6 + i, "stream": True, "ignore_eos": True,
                "stream_options": {"include_usage": True}}
        async with s.post(jax_server.base_url + "/v1/completions", json=body) as r:
            lines = [ln for ln in (await r.text()).splitlines() if ln.startswith("data: ")]
        chunks = [json.loads(ln[6:]) for ln in lines[:-1]]
        texts = [c for c in chunks if c["choices"]]
        return len(texts), chunks[-1]["usage"]["completion_tokens"], lines[-1]

    async with aiohttp.ClientSession() as s:  # 10 requests on 4 slots: some wait, all finish
        results = await asyncio.wait_for(asyncio.gather(*(one(s, i) for i in range(10))), 120)
    for i, (n_chunks, usage, last) in enumerate(results):
        assert n_chunks == usage == 6 + i and last == "data: [DONE]"


async def test_disconnect_mid_stream_frees_slot(jax_server):
    abort = 'vllm:request_success_total{"finished_reason": "abort"}'
    before = metrics(jax_server.base_url)
    async with aiohttp.ClientSession() as s:
        r = await _open_stream(s, jax_server.base_url, 250)
        r.close()  # disconnect mid-stream
    assert await _wait_running(jax_server, 0) == 0
    after = metrics(jax_server.base_url)
    assert after[abort] - before[abort] == 1
    # cancelled, not run to the end: far fewer than the 250 requested tokens were generated
    assert after["vllm:generation_tokens_total"] - before["vllm:generation_tokens_total"] < 250
    ok = client(jax_server).completions.create(model="tiny", prompt="after", max_tokens=3, **GREEDY)
    assert ok.usage.completion_tokens == 3


LONG = 250  # tokens: with a 1-token prompt this fills the 256-token context; seconds of decoding


@pytest.fixture(scope="module")
def small_server(tmp_path_factory, jax_cache_dir):
    """One slot, one waiting place, an API key."""
    with started(tmp_path_factory.mktemp("jax-small"),
                 ["--slots", "1", "--max-queue", "1", "--api-key", "sekret"], jax_cache_dir) as srv:
        yield srv


def test_api_key_enforced(small_server):
    with pytest.raises(openai.AuthenticationError):
        client(small_server, "wrong").completions.create(model="tiny", prompt="hi", max_tokens=2)
    ok = client(small_server, "sekret").completions.create(model="tiny", prompt="hi", max_tokens=2)
    assert ok.usage.completion_tokens >= 1
    assert get_json(small_server.base_url + "/health")["status"] == "ok"  # /health needs no key


async def test_full_queue_gets_503_then_recovers(small_server):
    hdr = {"Authorization": "Bearer sekret"}
    url = small_server.base_url
    async with aiohttp.ClientSession() as s:
        running = await _open_stream(s, url, LONG, hdr)
        waiting = await s.post(url + "/v1/completions", headers=hdr,
                               json={"prompt": "x", "max_tokens": LONG, "stream": True})
        full = await s.post(url + "/v1/completions", headers=hdr, json={"prompt": "x", "max_tokens": 4})
        assert full.status == 503
        assert (await full.json())["error"]["code"] == "queue_full"
        running.close()
        waiting.close()
    assert await _wait_running(small_server, 0) == 0
    ok = client(small_server, "sekret").completions.create(model="tiny", prompt="hi", max_tokens=2)
    assert ok.usage.completion_tokens >= 1


async def test_sigterm_aborts_streams_and_exits_0(small_server):
    hdr = {"Authorization": "Bearer sekret"}
    async with aiohttp.ClientSession() as s:
        running = await _open_stream(s, small_server.base_url, LONG, hdr)
        # queued behind a LONG stream: it cannot finish on its own before the SIGTERM lands
        queued = await s.post(small_server.base_url + "/v1/completions", headers=hdr,
                              json={"prompt": "x", "max_tokens": LONG, "stream": True})
        assert queued.status == 200
        code = asyncio.get_running_loop().run_in_executor(None, small_server.stop)
        rest = (await asyncio.wait_for(queued.read(), 30)).decode()
        await asyncio.wait_for(running.read(), 30)
        assert await code == 0
    events = [json.loads(line[6:]) for line in rest.splitlines() if line.startswith("data: {")]
    assert [e["choices"][0]["finish_reason"] for e in events] == ["abort"]
    assert rest.rstrip().endswith("data: [DONE]")
    assert "ready on http://127.0.0.1:" in small_server.log() and "Traceback" not in small_server.log()
