"""The embeddings request built by loadgen.client.request (the one place bodies are built): path,
base body without the generation fields, ``input`` as a text or a list, the input count."""
import json
from types import SimpleNamespace

import pytest

from loadgen.client.request import (base_body, endpoint_path, input_count, optional_fields,
                                    request_body)


def api(**kw):
    d = dict(endpoint="embeddings", stream=False, include_usage=True, continuous_usage=False,
             ignore_eos=True, extra_body={})
    d.update(kw)
    return SimpleNamespace(**d)


def test_paths():
    assert endpoint_path("embeddings") == "/v1/embeddings"
    assert endpoint_path("chat") == "/v1/chat/completions"
    assert endpoint_path("completions") == "/v1/completions"


def test_base_body_has_no_generation_fields():
    assert base_body(api(), "m") == {"model": "m"}
    b = base_body(api(extra_body={"encoding_format": "base64"}), "m")
    assert b == {"model": "m", "encoding_format": "base64"}
    assert optional_fields(b) == ["encoding_format"]
    assert base_body(api(extra_body={"encoding_format": "base64"}), "m",
                     drop=["encoding_format"]) == {"model": "m"}


def test_body_is_the_input_and_nothing_generated():
    base = base_body(api(), "m")
    one = json.loads(request_body(base, False, "hello", 128, endpoint="embeddings"))
    assert one == {"model": "m", "input": "hello"}
    many = json.loads(request_body(base, False, ["a", "b c"], 128, endpoint="embeddings"))
    assert many == {"model": "m", "input": ["a", "b c"]}
    ids = json.loads(request_body(base, False, [1, 2, 3], 1, endpoint="embeddings"))
    assert ids["input"] == [1, 2, 3]
    assert input_count("hello") == 1 and input_count(["a", "b c"]) == 2
    assert input_count([1, 2, 3]) == 1 and input_count([[1], [2]]) == 2


@pytest.mark.parametrize("prompt,messages", [([], None), ([{"role": "user"}], None),
                                             ("x", [{"role": "user", "content": "x"}])])
def test_bad_inputs_are_a_client_error(prompt, messages):
    with pytest.raises(ValueError):
        request_body({"model": "m"}, False, prompt, 1, messages, endpoint="embeddings")


def test_an_answer_with_the_wrong_number_of_vectors_is_a_protocol_failure():
    from loadgen.client.request import apply_body
    from loadgen.client.sse import StreamTally
    from loadgen.record import Record

    def answer(n_vectors, inputs):
        rec = Record(id=0, phase="measured", scheduled_at_ns=0)
        rec.inputs = inputs
        body = {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [0.0]}
                                           for i in range(n_vectors)],
                "usage": {"prompt_tokens": 5, "total_tokens": 5}}
        apply_body(rec, StreamTally(), json.dumps(body).encode(), 10)
        return rec
    ok = answer(3, 3)
    assert ok.status == "ok"
    bad = answer(2, 3)
    assert (bad.status, bad.error_kind) == ("error", "protocol")
    assert bad.error == "2 embeddings for 3 input(s) sent"
    none = answer(0, 1)
    assert none.error == "0 embeddings for 1 input(s) sent"
