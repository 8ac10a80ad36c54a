"""The OpenAI HTTP layer (servers/jax/api.py) in-process, over the hand-written FakeOrchestrator: exact
text, SSE framing, usage, stop strings, errors, queue-full, disconnects, metrics, auth, readiness."""
from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.parser import text_string_to_metric_families

from servers.jax.api import create_app, set_ready
from servers.jax.generation import IncrementalDetokenizer
from servers.jax.tokenizer import ByteTokenizer
from tests.servers.jax.fakes import FakeOrchestrator, fake_text

TOK = ByteTokenizer(258)


@pytest.fixture
async def make_client():
    made: list[tuple[TestClient, FakeOrchestrator]] = []

    async def make(api_key: str | None = None, ready: bool = True, **kw) -> tuple[TestClient, FakeOrchestrator]:
        orch = FakeOrchestrator(**kw)
        orch.start()
        app = create_app(orch, TOK, {"preset": "fake", "model": {"name": "fake"}}, model_name="fake",
                         max_model_len=orch.max_model_len, api_key=api_key, ready=ready,
                         settings={"slots": orch.slots})
        client = TestClient(TestServer(app, host="127.0.0.1"))
        await client.start_server()
        made.append((client, orch))
        return client, orch

    yield make
    for client, orch in made:
        await client.close()
        orch.stop()


async def sse_events(resp) -> list:
    """Parse an SSE body into a list of JSON objects, ending with the string "[DONE]"."""
    out: list = []
    async for raw in resp.content:
        line = raw.decode().rstrip("\n")
        if not line:
            continue
        assert line.startswith("data: "), line
        data = line[len("data: "):]
        out.append(data if data == "[DONE]" else json.loads(data))
    return out


async def test_completion_text_usage_and_token_id_prompts(make_client):
    client, _ = await make_client()
    r = await client.post("/v1/completions", json={"model": "fake", "prompt": "hello", "max_tokens": 7})
    assert r.status == 200
    body = await r.json()
    ids = TOK.encode("hello")
    assert body["object"] == "text_completion" and body["model"] == "fake"
    assert body["choices"][0]["text"] == fake_text(ids, 7)
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"] == {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}
    for prompt in ([10, 20, 30], ["hello"], [[10, 20, 30]]):
        r = await client.post("/v1/completions", json={"prompt": prompt, "max_tokens": 3})
        body = await r.json()
        expect_ids = [10, 20, 30] if prompt != ["hello"] else ids
        assert body["choices"][0]["text"] == fake_text(expect_ids, 3), prompt
        assert body["usage"]["prompt_tokens"] == len(expect_ids)


async def test_chat_stream_format_usage_and_continuous_usage(make_client):
    client, _ = await make_client()
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    ids = TOK.encode(TOK.apply_chat_template([{"role": "system", "content": "be brief"},
                                              {"role": "user", "content": "hi"}]))
    r = await client.post("/v1/chat/completions", json={
        "messages": msgs, "max_completion_tokens": 5, "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True}})
    assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    ev = await sse_events(r)
    assert ev[-1] == "[DONE]"
    first, content, usage_only = ev[0], ev[1:-2], ev[-2]
    assert first["object"] == "chat.completion.chunk"
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert len(content) == 5  # one chunk per generated token
    assert "".join(c["choices"][0]["delta"]["content"] for c in content) == fake_text(ids, 5)
    assert [c["usage"]["completion_tokens"] for c in content] == [1, 2, 3, 4, 5]
    assert [c["choices"][0]["finish_reason"] for c in content] == [None] * 4 + ["length"]
    assert usage_only["choices"] == []
    assert usage_only["usage"] == {"prompt_tokens": len(ids), "completion_tokens": 5,
                                   "total_tokens": len(ids) + 5}
    assert len({c["id"] for c in ev[:-1]}) == 1


async def test_completion_stream_without_usage(make_client):
    client, _ = await make_client()
    r = await client.post("/v1/completions", json={"prompt": "ab", "max_tokens": 4, "stream": True})
    ev = await sse_events(r)
    assert ev[-1] == "[DONE]" and len(ev) == 5
    assert all("usage" not in c for c in ev[:-1])
    assert "".join(c["choices"][0]["text"] for c in ev[:-1]) == fake_text(TOK.encode("ab"), 4)


async def test_stop_strings_truncate_hold_back_and_free_the_slot(make_client):
    client, orch = await make_client()
    ids = TOK.encode("a")
    full = fake_text(ids, 12)  # "uvwxyzabcdef"
    assert full.startswith("uvwxyz")
    r = await client.post("/v1/completions", json={"prompt": "a", "max_tokens": 12, "stop": ["yz", "nope"]})
    body = await r.json()
    assert body["choices"][0]["text"] == "uvwx" and body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"]["completion_tokens"] == 6  # tokens up to and including the one completing "yz"
    # streamed: "w" may start the stop string "wq", so it is held back until "x" rules that out
    r = await client.post("/v1/completions", json={"prompt": "a", "max_tokens": 6, "stream": True,
                                                   "stop": "wq"})
    ev = await sse_events(r)
    texts = [c["choices"][0]["text"] for c in ev[:-1]]
    assert "".join(texts) == full[:6] and "w" not in texts and "wx" in texts
    r = await client.post("/v1/chat/completions", json={"messages": [{"role": "user", "content": "a"}],
                                                        "max_tokens": 20, "stream": True, "stop": "m"})
    ev = await sse_events(r)
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in ev[:-1])
    assert streamed == "hijkl" and ev[-2]["choices"][0]["finish_reason"] == "stop"
    for _ in range(200):  # the stopped requests were cancelled on the engine
        if orch.stats()["running"] == 0:
            break
        await asyncio.sleep(0.01)
    assert orch.stats()["running"] == 0


async def test_eos_and_ignore_eos(make_client):
    client, _ = await make_client(eos_after=3)
    r = await client.post("/v1/completions", json={"prompt": "a", "max_tokens": 8})
    body = await r.json()
    assert body["choices"][0]["finish_reason"] == "stop" and body["usage"]["completion_tokens"] == 3
    r = await client.post("/v1/completions", json={"prompt": "a", "max_tokens": 8, "ignore_eos": True})
    body = await r.json()
    assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 8


async def test_min_tokens_hides_an_early_eos(make_client):
    client, orch = await make_client(eos_after=3)
    ids = TOK.encode("a")
    r = await client.post("/v1/completions", json={"prompt": "a", "max_tokens": 8, "min_tokens": 5})
    body = await r.json()  # EOS at token 4 comes before min_tokens: not shown, generation goes on
    assert body["choices"][0]["finish_reason"] == "length" and body["usage"]["completion_tokens"] == 8
    assert body["choices"][0]["text"] == fake_text(ids, 3) + fake_text(ids, 8)[4:]
    r = await client.post("/v1/completions", json={"prompt": "a", "max_tokens": 8, "min_tokens": 2})
    body = await r.json()  # EOS after min_tokens ends the request as the engine would
    assert body["choices"][0]["finish_reason"] == "stop" and body["usage"]["completion_tokens"] == 3
    assert body["choices"][0]["text"] == fake_text(ids, 3)


BAD = [
    ("/v1/completions", {"prompt": "x" * 200, "max_tokens": 1}, 400, "prompt"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 0}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": -3}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 127}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": "5"}, 400, "max_tokens"),
    ("/v1/completions", {"prompt": "hi", "temperature": "hot"}, 400, "temperature"),
    ("/v1/completions", {"prompt": "hi", "temperature": 3.0}, 400, "temperature"),
    ("/v1/completions", {"max_tokens": 3}, 400, "prompt"),
    ("/v1/completions", {"prompt": 42}, 400, "prompt"),
    ("/v1/completions", {"prompt": [1, 99999]}, 400, "prompt"),
    ("/v1/completions", {"prompt": ["a", "b"]}, 400, "prompt"),
    ("/v1/completions", {"prompt": "", "max_tokens": 3}, 400, "prompt"),
    ("/v1/completions", {"prompt": "hi", "n": 2}, 400, "n"),
    ("/v1/completions", {"prompt": "hi", "max_tokens": 4, "min_tokens": 5}, 400, "min_tokens"),
    ("/v1/completions", {"prompt": "hi", "top_p": 0}, 400, "top_p"),
    ("/v1/completions", {"prompt": "hi", "stream": "yes"}, 400, "stream"),
    ("/v1/completions", {"prompt": "hi", "echo": True}, 400, "echo"),
    ("/v1/completions", {"prompt": "hi", "stop": 5}, 400, "stop"),
    ("/v1/completions", {"prompt": "hi", "stream_options": {"include_usage": True}}, 400, "stream_options"),
    ("/v1/completions", {"prompt": "hi", "model": "gpt-9"}, 404, "model"),
    ("/v1/chat/completions", {"model": "fake"}, 400, "messages"),
    ("/v1/chat/completions", {"messages": "hi"}, 400, "messages"),
    ("/v1/chat/completions", {"messages": [{"role": "wizard", "content": "x"}]}, 400, "messages.0.role"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0},
     400, "max_completion_tokens"),
]


@pytest.mark.parametrize("path,body,status,param", BAD)
async def test_bad_requests_get_error_objects(make_client, path, body, status, param):
    client, _ = await make_client()
    r = await client.post(path, json=body)
    assert r.status == status
    err = (await r.json())["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["type"] == "invalid_request_error"
    assert err["param"] is not None and err["param"].startswith(param) and err["message"]


async def test_malformed_json_and_unknown_route_then_still_serving(make_client):
    client, _ = await make_client()
    for data in (b"{not json", b"[1, 2]", b"\xff\xfe"):
        r = await client.post("/v1/completions", data=data, headers={"Content-Type": "application/json"})
        assert r.status == 400 and (await r.json())["error"]["type"] == "invalid_request_error"
    r = await client.get("/v1/nothing")
    assert r.status == 404 and "error" in await r.json()
    r = await client.post("/v1/completions", json={"prompt": "ok", "max_tokens": 2})
    assert r.status == 200


async def test_queue_full_gets_503(make_client):
    client, orch = await make_client(slots=1, max_queue=1, step_s=0.01)
    body = {"prompt": "x", "max_tokens": 100, "stream": True}
    running = await client.post("/v1/completions", json=body)
    await running.content.readline()  # admitted and streaming
    waiting = await client.post("/v1/completions", json=body)  # fills the queue
    full = await client.post("/v1/completions", json=body)
    assert full.status == 503
    err = (await full.json())["error"]
    assert err["code"] == "queue_full" and err["message"]
    running.close()
    waiting.close()


async def test_disconnect_mid_stream_frees_the_slot(make_client):
    client, orch = await make_client(slots=1, max_queue=2, step_s=0.01)
    r = await client.post("/v1/completions", json={"prompt": "x", "max_tokens": 120, "stream": True})
    await r.content.readline()
    assert orch.stats()["running"] == 1
    r.close()  # the client goes away mid-stream
    for _ in range(300):
        if orch.stats()["running"] == 0:
            break
        await asyncio.sleep(0.01)
    assert orch.stats()["running"] == 0
    assert orch.cancelled == [orch.submitted[0].request_id]  # cancelled by the server, not run out
    assert orch.delivered < 120
    r = await client.post("/v1/completions", json={"prompt": "x", "max_tokens": 3})
    assert r.status == 200 and (await r.json())["usage"]["completion_tokens"] == 3


async def test_metrics_after_traffic(make_client):
    client, _ = await make_client()
    for n in (3, 5):
        await (await client.post("/v1/completions", json={"prompt": "abcd", "max_tokens": n})).json()
    r = await client.get("/metrics")
    assert r.status == 200 and r.headers["Content-Type"].startswith("text/plain")
    samples = {}
    for fam in text_string_to_metric_families(await r.text()):
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    lab = (("model_name", "fake"),)
    assert samples[("vllm:prompt_tokens_total", lab)] == 8
    assert samples[("vllm:generation_tokens_total", lab)] == 8
    assert samples[("vllm:num_requests_running", lab)] == 0
    assert samples[("vllm:num_requests_waiting", lab)] == 0
    assert samples[("vllm:kv_cache_usage_perc", lab)] == 0
    assert samples[("vllm:request_success_total", (("finished_reason", "length"), ("model_name", "fake")))] == 2
    for h in ("time_to_first_token", "e2e_request_latency", "request_decode_time"):
        assert samples[(f"vllm:{h}_seconds_count", lab)] == 2, h
        assert samples[(f"vllm:{h}_seconds_sum", lab)] > 0, h
    assert samples[("vllm:inter_token_latency_seconds_count", lab)] == 2 + 4  # n - 1 gaps per request


async def test_api_key_health_models_info_and_readiness(make_client):
    client, _ = await make_client(api_key="sekret", ready=False)
    assert (await client.get("/health")).status == 503
    hdr = {"Authorization": "Bearer sekret"}
    r = await client.post("/v1/completions", json={"prompt": "a", "max_tokens": 1}, headers=hdr)
    assert r.status == 503 and (await r.json())["error"]["code"] == "not_ready"
    set_ready(client.server.app)
    assert (await client.get("/health")).status == 200
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "sekret"}):
        r = await client.get("/v1/models", headers=headers)
        assert r.status == 401 and (await r.json())["error"]["code"] == "invalid_api_key"
    r = await client.get("/v1/models", headers=hdr)
    card = (await r.json())["data"][0]
    assert card["id"] == "fake" and card["max_model_len"] == 128
    info = await (await client.get("/info")).json()
    assert info["preset"] == "fake" and info["server"]["max_model_len"] == 128
    assert info["server"]["tokenizer"]["kind"] == "byte"     # loadgen.targets.context_fit counts bytes
    assert info["server"]["api_key_required"] is True and "sekret" not in json.dumps(info)


class _Utf8Bytes:
    """A byte-level tokenizer whose multi-byte characters span several tokens."""

    def decode(self, ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")


def test_incremental_detokenizer_holds_partial_utf8():
    d = IncrementalDetokenizer(_Utf8Bytes())
    text = "héllo → wörld"
    deltas = [d.push(b) for b in text.encode("utf-8")]
    assert "".join(deltas) == text
    assert all("\ufffd" not in x for x in deltas)
    assert deltas.count("") == len(text.encode("utf-8")) - len(text)
