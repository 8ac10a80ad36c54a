"""api.endpoint embeddings in the scenario model and the workload: never streamed (stream defaults
to false, true is refused in one line), workload.inputs_per_request groups N consecutive prompts
of the seeded stream into one request, and only where it means something."""
import pytest

from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.model import ScenarioError
from loadgen.scenario.workload import build_workload

BASE = {"target": {"url": "http://127.0.0.1:9"},
        "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 4}}


def scenario(api=None, workload=None, **more):
    return scenario_from_dict({**BASE, "api": api or {}, "workload": workload or {}, **more})


def test_embeddings_default_to_not_streamed():
    sc = scenario({"endpoint": "embeddings"})
    assert sc.api.endpoint == "embeddings" and sc.api.stream is False
    assert scenario().api.stream is True            # completions keep their default


def test_a_streamed_embeddings_run_is_refused_in_one_line():
    with pytest.raises(ScenarioError) as e:
        scenario({"endpoint": "embeddings", "stream": True})
    msg = str(e.value)
    assert "\n" not in msg and "api" in msg and "stream" in msg and "never streamed" in msg


def test_inputs_per_request_needs_the_embeddings_endpoint():
    with pytest.raises(ScenarioError, match="workload.inputs_per_request: 4 inputs per request "
                                            "needs api.endpoint: embeddings"):
        scenario({"endpoint": "completions"}, {"inputs_per_request": 4})
    for bad in (0, 2049, True, 1.5):
        with pytest.raises(ScenarioError, match="inputs_per_request"):
            scenario({"endpoint": "embeddings"}, {"inputs_per_request": bad})


def test_inputs_are_the_seeded_stream_grouped():
    w = {"tokenizer": "bytes", "prompt_tokens": {"dist": "uniform", "min": 4, "max": 40}, "seed": 7}
    single = build_workload(scenario({"endpoint": "embeddings"}, w).workload).take(6)
    grouped = build_workload(scenario({"endpoint": "embeddings"},
                                      {**w, "inputs_per_request": 3}).workload).take(2)
    assert [g.prompt for g in grouped] == [[s.prompt for s in single[:3]],
                                           [s.prompt for s in single[3:]]]
    assert [g.prompt_tokens for g in grouped] == [sum(s.prompt_tokens for s in single[:3]),
                                                  sum(s.prompt_tokens for s in single[3:])]
    assert all(isinstance(s.prompt, str) for s in single)   # one input: a plain text
