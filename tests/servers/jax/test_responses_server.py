"""POST /v1/responses of the JAX server (servers/jax/responses.py): in-process over the FakeOrchestrator
(exact text, event order, sequence numbers, completed vs incomplete, errors naming the Responses fields),
and the real server (`python -m servers.jax --preset tiny`, the shared session server) on 127.0.0.1 read
by the official OpenAI SDK, whose typed models check every event and the response object."""
from __future__ import annotations

import json

import openai
import pytest
from aiohttp.test_utils import TestClient, TestServer

from servers.jax.api import create_app
from servers.jax.tokenizer import ByteTokenizer
from tests.servers.jax.fakes import FakeOrchestrator, fake_text

pytestmark = pytest.mark.slow     # a real JAX server or engine compiles: minutes on CI's 2 cores

TOK = ByteTokenizer(258)
ORDER_HEAD = ["response.created", "response.in_progress", "response.output_item.added",
              "response.content_part.added"]
ORDER_TAIL = ["response.output_text.done", "response.content_part.done", "response.output_item.done"]


@pytest.fixture
async def make_client():
    made: list[tuple[TestClient, FakeOrchestrator]] = []

    async def make(**kw) -> TestClient:
        orch = FakeOrchestrator(**kw)
        orch.start()
        app = create_app(orch, TOK, {"preset": "fake", "model": {"name": "fake"}}, model_name="fake",
                         max_model_len=orch.max_model_len, ready=True, settings={"slots": orch.slots})
        client = TestClient(TestServer(app, host="127.0.0.1"))
        await client.start_server()
        made.append((client, orch))
        return client

    yield make
    for client, orch in made:
        await client.close()
        orch.stop()


async def named_events(resp) -> list[tuple[str, dict]]:
    """(event type, data) of every SSE event; fails on a data line without its event line."""
    out, kind = [], None
    async for raw in resp.content:
        line = raw.decode().rstrip("\n")
        if line.startswith("event: "):
            kind = line[len("event: "):]
        elif line.startswith("data: "):
            assert kind is not None, line
            out.append((kind, json.loads(line[len("data: "):])))
            kind = None
        else:
            assert not line, line
    return out


def chat_ids(messages: list[dict]) -> list[int]:
    return TOK.encode(TOK.apply_chat_template(messages))


async def test_stream_event_order_text_and_incomplete_at_max_output_tokens(make_client):
    client = await make_client()
    r = await client.post("/v1/responses", json={"input": "hi", "max_output_tokens": 5, "stream": True,
                                                 "ignore_eos": True})
    assert r.status == 200 and r.headers["Content-Type"].startswith("text/event-stream")
    ev = await named_events(r)
    kinds = [k for k, _ in ev]
    assert kinds == ORDER_HEAD + ["response.output_text.delta"] * 5 + ORDER_TAIL + ["response.incomplete"]
    assert all(d["type"] == k for k, d in ev)                         # the data names its own event
    assert [d["sequence_number"] for _, d in ev] == list(range(len(ev)))
    want = fake_text(chat_ids([{"role": "user", "content": "hi"}]), 5)
    deltas = [d["delta"] for k, d in ev if k == "response.output_text.delta"]
    assert "".join(deltas) == want and len(deltas) == 5               # one delta per token
    assert ev[-4][1]["text"] == want
    final = ev[-1][1]["response"]
    assert final["status"] == "incomplete"
    assert final["incomplete_details"] == {"reason": "max_output_tokens"}
    assert final["output"][0]["content"][0]["text"] == want
    assert final["usage"]["output_tokens"] == 5
    assert final["usage"]["input_tokens"] == len(chat_ids([{"role": "user", "content": "hi"}]))
    assert final["usage"]["output_tokens_details"] == {"reasoning_tokens": 0}
    assert ev[0][1]["response"]["status"] == "in_progress" and ev[0][1]["response"]["usage"] is None
    assert len({d["response"]["id"] for k, d in ev if "response" in d}) == 1


async def test_eos_completes_and_instructions_are_the_system_message(make_client):
    client = await make_client(eos_after=3)
    msgs = [{"role": "user", "content": [{"type": "input_text", "text": "he"}, {"type": "input_text", "text": "y"}]}]
    r = await client.post("/v1/responses", json={"input": msgs, "instructions": "be brief",
                                                 "max_output_tokens": 20, "stream": True})
    ev = await named_events(r)
    assert ev[-1][0] == "response.completed"
    final = ev[-1][1]["response"]
    assert final["status"] == "completed" and final["incomplete_details"] is None
    ids = chat_ids([{"role": "system", "content": "be brief"}, {"role": "user", "content": "hey"}])
    assert final["output"][0]["content"][0]["text"] == fake_text(ids, 3)
    assert final["usage"]["input_tokens"] == len(ids) and final["instructions"] == "be brief"


async def test_not_streamed_is_one_response_object(make_client):
    client = await make_client()
    r = await client.post("/v1/responses", json={"input": "ab", "max_output_tokens": 4})
    body = await r.json()
    assert r.status == 200 and body["object"] == "response" and body["id"].startswith("resp_")
    assert body["output"][0]["type"] == "message" and body["output"][0]["role"] == "assistant"
    assert body["output"][0]["content"][0]["text"] == fake_text(chat_ids([{"role": "user", "content": "ab"}]), 4)
    assert body["status"] == "incomplete" and body["usage"]["output_tokens"] == 4
    assert body["max_output_tokens"] == 4


@pytest.mark.parametrize("body, field", [
    ({"max_output_tokens": 4}, "input"),
    ({"input": [], "max_output_tokens": 4}, "input"),
    ({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]}, "input[0].content"),
    ({"input": [{"type": "function_call_output", "call_id": "c", "output": "{}"}]}, "input[0].type"),
    ({"input": "hi", "max_output_tokens": 0}, "max_output_tokens"),
    ({"input": "hi", "max_output_tokens": 100000}, "max_output_tokens"),
])
async def test_bad_requests_name_the_responses_field(make_client, body, field):
    client = await make_client()
    r = await client.post("/v1/responses", json=body)
    err = (await r.json())["error"]
    assert r.status == 400, err
    assert err["param"] == field and err["message"].startswith(field), err


async def test_unknown_model_is_404(make_client):
    client = await make_client()
    r = await client.post("/v1/responses", json={"model": "other", "input": "hi"})
    assert r.status == 404 and (await r.json())["error"]["code"] == "model_not_found"


# ---- the real server, read by the OpenAI SDK ------------------------------------------------------------------
def test_real_server_stream_through_the_openai_sdk(jax_server):
    client = openai.OpenAI(base_url=jax_server.base_url + "/v1", api_key="x", max_retries=0)
    events = list(client.responses.create(model="tiny", input="hello there", max_output_tokens=6, stream=True,
                                          extra_body={"ignore_eos": True}))
    kinds = [e.type for e in events]
    assert kinds[:4] == ORDER_HEAD and kinds[-4:] == ORDER_TAIL + ["response.incomplete"]
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    final = events[-1].response
    assert final.status == "incomplete" and final.incomplete_details.reason == "max_output_tokens"
    assert final.usage.output_tokens == 6 and final.usage.input_tokens > len("hello there")
    assert "".join(deltas) == final.output_text
    assert 1 <= len(deltas) <= 6                  # one per token with text (bytes may join into one char)
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_real_server_whole_response_matches_the_stream(jax_server):
    client = openai.OpenAI(base_url=jax_server.base_url + "/v1", api_key="x", max_retries=0)
    kw = dict(model="tiny", input=[{"role": "user", "content": "same prompt"}], max_output_tokens=5,
              temperature=0.0, extra_body={"ignore_eos": True})
    whole = client.responses.create(**kw)
    streamed = list(client.responses.create(stream=True, **kw))[-1].response
    assert whole.object == "response" and whole.output_text == streamed.output_text   # greedy: same text
    assert whole.usage.output_tokens == streamed.usage.output_tokens == 5
