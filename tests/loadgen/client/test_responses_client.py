"""The Client with ``api.endpoint: responses`` against the real JAX server (tiny preset, the session's
shared one on 127.0.0.1: tests/conftest.py) on both transports (wire: the default for http://; aiohttp: LOADGEN_HTTP): streamed
records whose first token is the first response.output_text.delta, usage from response.completed /
response.incomplete, the whole-body answer, and a rejected request as an HTTP error."""
from __future__ import annotations

import asyncio

import pytest

from loadgen.client.http_client import Client, ClientConfig, RequestSpec
from loadgen.scenario.workload import PromptSpec


@pytest.fixture
def server(jax_server):
    """The session's shared JAX server (tests/conftest.py)."""
    return jax_server


@pytest.fixture(autouse=True, params=["wire", "aiohttp"])
def transport(request, monkeypatch):
    monkeypatch.setenv("LOADGEN_HTTP", request.param)
    return request.param


def run_specs(cfg: ClientConfig, specs: list[RequestSpec]) -> list:
    async def go():
        async with Client(cfg, 2) as c:
            return await asyncio.gather(*(c.execute(s) for s in specs))
    return asyncio.run(go())


def spec(i: int, prompt, max_tokens: int, want_text: bool = True) -> RequestSpec:
    return RequestSpec.of(PromptSpec(prompt, None, max_tokens), i, want_text=want_text)


def test_streamed_records(server, transport):
    cfg = ClientConfig(base_url=server.base_url, endpoint="responses", model="tiny")
    recs = run_specs(cfg, [spec(0, "hello there", 8), spec(1, [{"role": "user", "content": "hi"}], 5)])
    for r, n in zip(recs, (8, 5)):
        assert r.status == "ok" and r.http_status == 200, (r.error_kind, r.error)
        assert r.finish_reason == "length"                      # response.incomplete: max_output_tokens
        assert r.output_tokens == n and r.output_tokens_source == "usage"
        assert r.prompt_tokens_source == "usage" and r.prompt_tokens > 2
        # response.created, in_progress, output_item.added, content_part.added come first, 0 tokens each
        assert [k for _, k in r.chunks[:4]] == [0, 0, 0, 0]
        assert r.first_chunk_at_ns == r.chunks[0][0] <= r.first_token_at_ns == r.chunks[4][0]
        assert r.chunks[4][1] == 1 and r.first_answer_at_ns == r.first_token_at_ns
        assert 1 <= r.chunk_output_tokens <= n                  # one per delta with text
        assert r.output_text and len(r.output_text) == r.output_chars
        assert r.sent_at_ns < r.first_token_at_ns <= r.end_at_ns


def test_whole_response(server, transport):
    cfg = ClientConfig(base_url=server.base_url, endpoint="responses", model="tiny", stream=False)
    (r,) = run_specs(cfg, [spec(0, "hello there", 6)])
    assert r.status == "ok" and r.finish_reason == "length" and r.output_tokens == 6
    assert r.chunks == [] and r.first_token_at_ns is None and r.output_text


def test_rejected_request_is_an_http_error(server, transport):
    cfg = ClientConfig(base_url=server.base_url, endpoint="responses", model="tiny")
    (r,) = run_specs(cfg, [spec(0, "x", 100_000)])
    assert r.status == "error" and r.error_kind == "http" and r.http_status == 400
    assert "max_output_tokens" in r.error
