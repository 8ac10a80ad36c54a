"""Context fit (loadgen.targets.context_fit): the workload's largest prompt + output against the context the
server states; scenarios/external.yaml fits the JAX server's small preset as shipped."""
from pathlib import Path

import pytest

from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import load_scenario, scenario_from_dict
from loadgen.scenario.model import ScenarioError
from loadgen.scenario.tokens import make_counter
from loadgen.scenario.workload import build_workload
from loadgen.targets.context_fit import (CHAT_TEMPLATE_TOKENS, byte_level, check_context_fit,
                                 context_limit, prompt_tokens)
from loadgen.targets.probe import ProbeError
from tests.loadgen.targets.ready_fake import MODEL, WarmingServer

ROOT = Path(__file__).resolve().parents[3]
# what `loadgen serve jax --preset small` states: /v1/models max_model_len, /info's tokenizer
JAX_SMALL_MODELS = {"data": [{"id": "small", "max_model_len": 1024}]}
JAX_SMALL_INFO = {"preset": "small", "tokenizer": {"kind": "byte"},
                  "server": {"max_model_len": 1024}}


def plan_of(workload: dict, load: dict = None, api: dict = None):
    sc = scenario_from_dict({"target": {"url": "http://127.0.0.1:9"}, "workload": workload,
                             "api": api or {},
                             "load": load or {"mode": "server", "rate": 1, "num_requests": 20}})
    return build_workload(sc.workload), sc


def test_the_context_is_read_from_v1_models_else_from_info():
    assert context_limit(JAX_SMALL_MODELS, "small", None) == (
        1024, "max_model_len of 'small' in /v1/models")
    vllm = {"data": [{"id": "a", "max_model_len": 8192}, {"id": "b", "max_model_len": 4096}]}
    assert context_limit(vllm, "b", None)[0] == 4096
    assert context_limit({"data": [{"id": "x"}]}, "x", {"server": {"max_model_len": 512}}) == (
        512, "max_model_len in /info")
    assert context_limit({"data": [{"id": "x"}]}, "x", {"version": "1"}) == (None, None)
    assert context_limit(None, None, None) == (None, None)
    assert byte_level(JAX_SMALL_INFO) and not byte_level({"tokenizer": {"kind": "huggingface"}})


def test_how_a_prompt_is_counted():
    words, nbytes = make_counter("words"), make_counter("bytes")
    text = "the of and to"                      # 4 words, 13 bytes
    assert prompt_tokens(text, words, byte_server=False) == 4
    assert prompt_tokens("through between another", words, False) == 3   # loadgen's own words
    assert prompt_tokens("internationalization is", words, False) == 6   # not loadgen's words:
                                                                          # 23 bytes / 4, up
    assert prompt_tokens(text, words, byte_server=True) == 13          # the server counts bytes
    assert prompt_tokens(text, nbytes, byte_server=False) == 13


def test_shipped_external_yaml_fits_the_jax_small_preset():
    sc = load_scenario(ROOT / "scenarios/external.yaml")
    plan = build_workload(sc.workload)
    out = check_context_fit(plan, sc.load, sc.api.endpoint, JAX_SMALL_MODELS, "small",
                            JAX_SMALL_INFO)
    assert out["limit"] == 1024 and out["requests_looked_at"] == 208
    assert out["largest_request"] <= 1024 and "UTF-8 bytes" in out["counted_as"]


def test_the_old_external_yaml_is_stopped_naming_prompt_tokens_and_the_limit():
    # before the fix: words up to 2,048 (about 5 bytes each) against 1,024 byte tokens
    plan, sc = plan_of({"tokenizer": "words",
                        "prompt_tokens": {"dist": "lognormal", "mean": 512, "std": 256,
                                          "min": 16, "max": 2048},
                        "output_tokens": {"dist": "lognormal", "mean": 128, "std": 64,
                                          "min": 8, "max": 512}},
                       {"mode": "server", "rate": 2, "num_requests": 200, "warmup_requests": 8})
    with pytest.raises(ProbeError) as e:
        check_context_fit(plan, sc.load, "completions", JAX_SMALL_MODELS, "small", JAX_SMALL_INFO)
    msg = str(e.value)
    assert isinstance(e.value, ScenarioError) and "\n" not in msg
    assert msg.startswith("workload.prompt_tokens: the largest prompt (~")
    assert ("counted as UTF-8 bytes: the server's tokenizer is byte-level) does not fit the "
            "server's context of 1,024 tokens (max_model_len of 'small' in /v1/models)") in msg


def test_prompt_that_fits_but_not_with_its_output_names_output_tokens():
    plan, sc = plan_of({"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 600},
                        "output_tokens": {"dist": "fixed", "value": 500}})
    with pytest.raises(ProbeError, match=r"^workload.output_tokens: the largest request \(prompt "
                                         r"~600 \+ max_tokens 500 = 1,100 tokens, counted as "
                                         r"UTF-8 bytes.*\) exceeds the server's context of 1,024"):
        check_context_fit(plan, sc.load, "completions", JAX_SMALL_MODELS, "small", JAX_SMALL_INFO)
    # the chat template's allowance counts too: 600 + 32 + 392 = 1,024 fits, one more does not
    plan, sc = plan_of({"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 600},
                        "output_tokens": {"dist": "fixed", "value": 1024 - 600 -
                                          CHAT_TEMPLATE_TOKENS}}, api={"endpoint": "chat"})
    assert check_context_fit(plan, sc.load, "chat", JAX_SMALL_MODELS, "small",
                             JAX_SMALL_INFO)["largest_request"] == 1024


def test_no_stated_context_is_not_checked():
    plan, sc = plan_of({"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 9000}})
    assert check_context_fit(plan, sc.load, "completions", {"data": [{"id": "m"}]}, "m",
                             None) is None


def test_a_run_stops_before_any_request_when_the_workload_cannot_fit(tmp_path):
    sc = scenario_from_dict({
        "target": {"url": "http://x"}, "workload": {
            "tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 100},
            "output_tokens": {"dist": "fixed", "value": 4}},
        "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 2},
        "output": {"dir": str(tmp_path), "run_name": "r", "report": "none"}})
    with WarmingServer(max_model_len=64) as srv:
        sc.target.url = srv.url
        with pytest.raises(ProbeError, match=rf"^workload.prompt_tokens: the largest prompt "
                                             rf"\(~100 tokens, counted as bytes "
                                             r"\(workload.tokenizer\)\) does not fit the "
                                             r"server's context of 64 tokens \(max_model_len "
                                             rf"of '{MODEL}' in /v1/models\)"):
            run_scenario(sc)
        assert srv.counts["post"] == 0          # not even the probe request
    with WarmingServer(max_model_len=200) as srv:
        sc.target.url = srv.url
        sc.output.run_name = "fits"
        res = run_scenario(sc)
    ctx = res.meta["probe"]["context"]
    assert res.summary["requests_completed"] == 2
    assert ctx["limit"] == 200 and ctx["largest_request"] == 104
