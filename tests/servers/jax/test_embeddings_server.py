"""POST /v1/embeddings of the real JAX server (`python -m servers.jax --preset tiny`, the shared
session server) on 127.0.0.1: the four input forms, shapes, unit length, same input → same vector,
batch order, base64 == the float list, usage, /info's description, and the 400/404 errors."""
from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request

import numpy as np
import openai
import pytest

from tests.servers.jax.server_proc import ServerProc

pytestmark = pytest.mark.slow     # a real JAX server or engine compiles: minutes on CI's 2 cores


def post(srv: ServerProc, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(srv.base_url + "/v1/embeddings", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"}, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def info(srv: ServerProc) -> dict:
    with urllib.request.urlopen(srv.base_url + "/info", timeout=10) as r:
        return json.loads(r.read())


def vectors(body: dict) -> np.ndarray:
    return np.asarray([d["embedding"] for d in body["data"]], np.float64)


def test_string_input_shape_norm_usage(jax_server):
    dim = info(jax_server)["model"]["dim"]
    status, body = post(jax_server, {"model": "tiny", "input": "hello world"})
    assert status == 200, body
    assert body["object"] == "list" and body["model"] == "tiny"
    assert [(d["object"], d["index"]) for d in body["data"]] == [("embedding", 0)]
    v = vectors(body)
    assert v.shape == (1, dim) and np.all(np.isfinite(v))
    assert abs(np.linalg.norm(v[0]) - 1.0) < 1e-5
    # the ByteTokenizer: one token per byte
    assert body["usage"] == {"prompt_tokens": len("hello world"), "total_tokens": len("hello world")}


def test_same_input_same_vector_and_batch_order_kept(jax_server):
    texts = ["alpha beta", "a much longer input " * 8, "z"]
    _, one = post(jax_server, {"input": texts[1]})
    _, batch = post(jax_server, {"input": texts})
    _, rev = post(jax_server, {"input": texts[::-1]})
    b, r = vectors(batch), vectors(rev)
    assert [d["index"] for d in batch["data"]] == [0, 1, 2]
    assert np.array_equal(b[1], vectors(one)[0])        # alone or in a batch: the same vector
    assert np.array_equal(b, r[::-1])                   # order kept, whatever the order sent
    assert not np.allclose(b[0], b[2])                  # different inputs, different vectors
    assert np.allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    assert batch["usage"]["prompt_tokens"] == sum(len(t) for t in texts)


def test_token_id_forms_equal_the_text_forms(jax_server):
    ids = list("hi there".encode())                     # ByteTokenizer ids are the bytes
    _, text = post(jax_server, {"input": "hi there"})
    _, flat = post(jax_server, {"input": ids})
    _, nested = post(jax_server, {"input": [ids, ids[:2]]})
    assert np.array_equal(vectors(flat), vectors(text))
    assert len(nested["data"]) == 2 and np.array_equal(vectors(nested)[0], vectors(text)[0])
    assert nested["usage"]["prompt_tokens"] == len(ids) + 2


def test_base64_decodes_to_the_float_list(jax_server):
    _, f = post(jax_server, {"input": ["one", "two"], "encoding_format": "float"})
    _, b = post(jax_server, {"input": ["one", "two"], "encoding_format": "base64"})
    for df, db in zip(f["data"], b["data"]):
        assert isinstance(db["embedding"], str)
        decoded = np.frombuffer(base64.b64decode(db["embedding"]), dtype="<f4")
        assert np.array_equal(decoded, np.asarray(df["embedding"], np.float32))


def test_official_openai_client(jax_server):
    """openai-python asks for base64 and decodes it itself."""
    c = openai.OpenAI(base_url=jax_server.base_url + "/v1", api_key="unused", max_retries=0,
                      timeout=60)
    res = c.embeddings.create(model="tiny", input=["hello", "world"])
    _, raw = post(jax_server, {"input": ["hello", "world"]})
    got = np.asarray([d.embedding for d in res.data], np.float32)
    assert np.array_equal(got, vectors(raw).astype(np.float32))
    assert res.usage.prompt_tokens == 10


def test_info_describes_the_pooling(jax_server):
    emb = info(jax_server)["server"]["embeddings"]
    assert "mean" in emb["pooling"] and "L2" in emb["pooling"]
    assert emb["encoding_formats"] == ["float", "base64"] and emb["max_input_tokens"] == 256


@pytest.mark.parametrize("body,status,param,words", [
    ({"input": "x" * 257}, 400, "input", "257 tokens"),               # max_model_len 256
    ({"input": ["ok", "y" * 300]}, 400, "input", "input[1]"),
    ({"input": ""}, 400, "input", "empty"),
    ({"input": []}, 400, "input", "must not be empty"),
    ({"input": [1, "a"]}, 400, "input", "list of strings"),
    ({"input": [5000]}, 400, "input", "outside the vocabulary"),
    ({}, 400, "input", "required"),
    ({"input": "a", "encoding_format": "int8"}, 400, "encoding_format", "encoding_format"),
    ({"input": "a", "dimensions": 8}, 400, "dimensions", "cannot be shortened"),
    ({"input": "a", "model": "other"}, 404, "model", "does not exist"),
])
def test_errors_are_clear(jax_server, body, status, param, words):
    got, err = post(jax_server, body)
    assert got == status, err
    assert err["error"]["param"] == param and words in err["error"]["message"]
    ok, _ = post(jax_server, {"input": "still serving"})
    assert ok == 200


def test_metrics_count_the_input_tokens_and_the_latency(jax_server):
    from tests.servers.jax.server_proc import metrics
    before = metrics(jax_server.base_url)
    status, _ = post(jax_server, {"input": ["abc", "defgh"]})
    after = metrics(jax_server.base_url)
    assert status == 200
    assert after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"] == 8
    assert after["vllm:e2e_request_latency_seconds_count"] == \
        before["vllm:e2e_request_latency_seconds_count"] + 1
    assert after["vllm:time_to_first_token_seconds_count"] == \
        before["vllm:time_to_first_token_seconds_count"]          # no first token: not observed


def test_dimensions_equal_to_dim_is_accepted(jax_server):
    dim = info(jax_server)["model"]["dim"]
    status, body = post(jax_server, {"input": "a", "dimensions": dim})
    assert status == 200 and len(body["data"][0]["embedding"]) == dim
