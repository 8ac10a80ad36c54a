"""Context fit for api.endpoint embeddings: each input on its own against the context (nothing is
generated, so an input may use all of it); the largest input too long is one line naming the field."""
import pytest

from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.workload import build_workload
from loadgen.targets.context_fit import check_context_fit
from loadgen.targets.probe import ProbeError

MODELS = {"data": [{"id": "tiny", "max_model_len": 256}]}
INFO = {"tokenizer": {"kind": "byte"}, "server": {"max_model_len": 256}}


def fit(tokens: int, n: int = 4):
    sc = scenario_from_dict({
        "target": {"url": "http://127.0.0.1:9"}, "api": {"endpoint": "embeddings"},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": tokens},
                     "inputs_per_request": n},
        "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 3}})
    return check_context_fit(build_workload(sc.workload), sc.load, "embeddings", MODELS, "tiny",
                             INFO)


def test_each_input_counts_alone_and_may_fill_the_context():
    got = fit(256)                      # 4 inputs of 256 = 1024 tokens per request: fits
    assert got["largest_prompt"] == 256 and got["largest_request"] == 256


def test_an_input_longer_than_the_context_is_refused_in_one_line():
    with pytest.raises(ProbeError) as e:
        fit(257)
    assert str(e.value).startswith("workload.prompt_tokens: the largest input (~257 tokens")
