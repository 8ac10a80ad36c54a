"""api.models against the replayed vLLM 0.32 CPU start with two LoRA adapters (``--enable-lora
--lora-modules a=… b=…``, random-weight adapters made by bench/compat/lora.py; recorded by
bench/compat/record.py, variant "lora"): /v1/models lists the base model and both adapters, each
request asks for its adapter and gets that adapter's recorded stream, an adapter vLLM does not
serve stops the run at the probe (exit 2), and without the probe vLLM's 404 is a failed record.
The counts below are read from the transcripts."""
from __future__ import annotations

import json

import pytest

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from loadgen.targets.probe import ProbeError
from tests.support.replay_server import FIXTURES, ReplayServer

VLLM = FIXTURES / "vllm"
pytestmark = pytest.mark.skipif(not (VLLM / "lora-models.json").exists(),
                                reason="no recorded vLLM LoRA transcripts")
N = 8


def case(name: str) -> dict:
    return json.loads((VLLM / f"{name}.json").read_text())


def recorded_usage(name: str) -> dict:
    text = "".join(p["text"] for p in case(name)["response"]["chunks"])
    found = [json.loads(ln[6:]).get("usage") for ln in text.splitlines() if ln.startswith("data: {")]
    return [u for u in found if u][-1]


@pytest.fixture(scope="module")
def lora():
    with ReplayServer("vllm", variant="lora") as s:
        yield s


def tree(url, tmp_path, name, models, probe=True, processes=1):
    return {"name": name, "target": {"url": url, "scrape_metrics": False},
            "api": {"models": [{"name": m, "weight": 1} for m in models],
                    "model_assignment": "round_robin", "probe": probe},
            "workload": {"prompt_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": 8}},
            "load": {"mode": "concurrency", "concurrency": 2, "num_requests": N},
            "client": {"processes": processes},
            "output": {"dir": str(tmp_path), "run_name": name, "report": "none"}}


def test_the_listing_names_both_adapters():
    ids = [m["id"] for m in json.loads("".join(p["text"] for p in case("lora-models")["response"]["chunks"]))["data"]]
    assert ids[1:] == ["a", "b"] and ids[0].endswith("small-hf")


def test_each_request_gets_its_adapters_stream(lora, tmp_path):
    lora.log(clear=True)
    res = run_scenario(scenario_from_dict(tree(lora.url, tmp_path, "lora", ["a", "b"], processes=2)))
    recs = sorted(read_records(res.run_dir / "records.jsonl"), key=lambda r: r["id"])
    assert [r["model"] for r in recs] == ["a", "b"] * (N // 2)
    assert all(r["status"] == "ok" for r in recs), [r["error"] for r in recs]
    for r in recs:
        u = recorded_usage(f"lora-{r['model']}-completions-stream-loadgen")
        assert (r["output_tokens"], r["prompt_tokens"]) == (u["completion_tokens"], u["prompt_tokens"])
    answered = [c for c, path, _ in lora.log() if path == "/v1/completions"]
    # the probe's request (adapter a) and then one per record, each the adapter's own recording
    assert sorted(answered) == sorted(["lora-a-completions-stream-loadgen"]
                                      + [f"lora-{r['model']}-completions-stream-loadgen" for r in recs])
    s = res.summary["models"]
    assert (s["a"]["requests"], s["b"]["requests"]) == (N // 2, N // 2)
    assert s["a"]["share"] == pytest.approx(0.5) and s["b"]["completed"] == N // 2


def test_an_adapter_vllm_does_not_serve(lora, tmp_path):
    with pytest.raises(ProbeError) as e:
        run_scenario(scenario_from_dict(tree(lora.url, tmp_path, "bad", ["a", "c"])))
    assert str(e.value).startswith(f"api.models: 'c' is not served by {lora.url}")
    assert "'a', 'b'" in str(e.value)
    # without the probe: vLLM's 404 (recorded) is a failed record of kind http for each "c" request
    res = run_scenario(scenario_from_dict(tree(lora.url, tmp_path, "noprobe", ["a", "c"], probe=False)))
    recs = sorted(read_records(res.run_dir / "records.jsonl"), key=lambda r: r["id"])
    bad = [r for r in recs if r["model"] == "c"]
    assert bad and all(r["status"] == "error" and r["http_status"] == 404 and r["error_kind"] == "http"
                       for r in bad)
    assert "The model `c` does not exist" in bad[0]["error"]
    assert all(r["status"] == "ok" for r in recs if r["model"] == "a")
    assert res.summary["models"]["c"]["failed"] == len(bad)
