"""output.records (issue 42): jsonl by default; arrow on request, with every engine and run
shape (--procs, Locust, server_traces' join, sweeps); anything else refused naming the key."""
import pytest

from loadgen.run.engines import refusal
from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.model import ScenarioError

BASE = {"target": {"url": "http://127.0.0.1:9"},
        "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 4}}


def with_(**over):
    return {**BASE, "output": {"records": "arrow"}, **over}


def test_jsonl_by_default_arrow_on_request():
    assert scenario_from_dict(BASE).output.records == "jsonl"
    assert scenario_from_dict(with_()).output.records == "arrow"
    with pytest.raises(ScenarioError, match="output.records"):
        scenario_from_dict({**BASE, "output": {"records": "parquet"}})


def test_procs_the_locust_engine_server_traces_and_sweeps_take_arrow():
    assert scenario_from_dict(with_(client={"processes": 2})).client.processes == 2
    assert scenario_from_dict(with_(server_traces={"otlp_port": 0})).server_traces is not None
    sweep = {"param": "load.concurrency", "values": [1, 2]}
    assert scenario_from_dict(with_(sweep=sweep)).output.records == "arrow"
    assert refusal("locust", scenario_from_dict(with_())) is None
    assert refusal("locust", scenario_from_dict(with_()), master=True) is None
    assert refusal("native", scenario_from_dict(with_())) is None


def test_the_keys_load_from_yaml_text_as_a_user_writes_them(tmp_path):
    from loadgen.scenario.loader import load_scenario
    p = tmp_path / "s.yaml"
    p.write_text("target: {url: 'http://127.0.0.1:9'}\n"
                 "load: {mode: concurrency, concurrency: 2, num_requests: 4}\n"
                 "output:\n  records: arrow\n")
    assert load_scenario(p).output.records == "arrow"
    p.write_text("target: {url: 'http://127.0.0.1:9'}\n"
                 "load: {mode: concurrency, concurrency: 2, num_requests: 4}\n"
                 "server_traces:\n  otlp_port: 0\n  keep_raw_mb: 16\n")
    assert load_scenario(p).server_traces.keep_raw_mb == 16
    p.write_text(p.read_text().replace("keep_raw_mb: 16", "keep_raw_mb: -1"))
    with pytest.raises(ScenarioError, match="keep_raw_mb"):
        load_scenario(p)
    p.write_text("target: {url: 'http://127.0.0.1:9'}\n"
                 "load: {mode: concurrency, concurrency: 2, num_requests: 4}\n"
                 "client: {processes: 2}\noutput: {records: arrow}\n")
    assert load_scenario(p).output.records == "arrow"
