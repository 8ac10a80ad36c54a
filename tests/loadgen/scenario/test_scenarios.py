"""Scenario files: every shipped one loads; bad ones fail in one line naming the field."""
from pathlib import Path

import pytest

from loadgen.scenario.model import ScenarioError

from loadgen.scenario.loader import load_scenario, scenario_from_dict
from loadgen.scenario.workload import build_workload

ROOT = Path(__file__).resolve().parents[3]
FILES = sorted((ROOT / "scenarios").glob("*.yaml"))
BASE = {"target": {"url": "http://127.0.0.1:9"}, "load": {"mode": "server", "rate": 1,
                                                          "num_requests": 3}}


def test_scenarios_dir_is_not_empty():
    names = {f.name for f in FILES}
    assert {"server.yaml", "offline.yaml", "concurrency.yaml", "external.yaml",
            "mlperf-server-llama3_1-8b.yaml"} <= names


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_scenario_loads(path):
    sc = load_scenario(path)
    assert sc.name and sc.load.mode in ("offline", "server", "concurrency", "trace")
    build_workload(sc.workload)     # synthetic/tokenizer settings are usable as shipped


def test_server_yaml_targets_the_jax_small_preset():
    sc = load_scenario(ROOT / "scenarios/server.yaml")
    assert sc.target.server.kind == "jax" and sc.target.server.preset == "small"
    assert sc.workload.tokenizer == "bytes" and sc.load.arrival == "poisson"
    assert load_scenario(ROOT / "scenarios/mlperf-server-llama3_1-8b.yaml").slo.preset \
        == "server/llama3_1-8b"


def _err(tree, overrides=()):
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(tree, overrides)
    msg = str(e.value)
    assert "\n" not in msg
    return msg


@pytest.mark.parametrize("patch, field", [
    ({"load": {"mode": "server", "rate": -1, "num_requests": 3}}, "load.rate"),
    ({"load": {"mode": "server", "num_requests": 3}}, "load"),
    ({"load": {"mode": "server", "rate": 1}}, "load"),
    ({"load": {"mode": "offline", "duration_s": 5}}, "load"),
    ({"load": {"mode": "server", "rate": 1, "num_requests": 3, "rat": 2}}, "load.rat"),
    ({"target": {}}, "target"),
    ({"target": {"url": "http://127.0.0.1:1", "server": {"kind": "jax"}}}, "target"),
    ({"target": {"server": {"kind": "command"}}}, "target.server"),
    ({"target": {"server": {"kind": "jax", "tensor_parallel_size": 2}}}, "target.server"),
    ({"workload": {"prompt_tokens": {"dist": "normal", "mean": 5}}}, "workload.prompt_tokens"),
    ({"workload": {"source": "jsonl"}}, "workload"),
    ({"slo": {"preset": "server/nope"}}, "slo"),
    ({"api": {"endpoint": "rerank"}}, "api.endpoint"),
])
def test_bad_scenarios_name_the_field(patch, field):
    msg = _err({**BASE, **patch})
    assert msg.split(":")[0] == field, msg


def test_file_errors(tmp_path):
    with pytest.raises(ScenarioError, match="no such scenario file"):
        load_scenario(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("load: [unclosed\n")
    with pytest.raises(ScenarioError, match="not valid YAML"):
        load_scenario(bad)
    typo = tmp_path / "typo.yaml"
    typo.write_text("target: {url: 'http://127.0.0.1:1'}\nload: {mode: server, rate: 1, "
                    "num_requests: 2}\nworkolad: {}\n")
    with pytest.raises(ScenarioError) as e:
        load_scenario(typo)
    assert str(e.value) == f"{typo}: workolad: unknown key (did you mean 'workload'?)"


def test_set_overrides_nested_and_coerced():
    sc = scenario_from_dict(BASE, ["load.rate=2.5", "load.num_requests=7",
                                   "api.stream=false", "workload.prompt_tokens.value=33",
                                   "api.extra_body.calib.ttft_ms=5", "output.run_name=x1",
                                   "load.arrival=gamma", "load.burstiness=0.5"])
    assert sc.load.rate == 2.5 and sc.load.num_requests == 7 and sc.api.stream is False
    assert sc.workload.prompt_tokens.value == 33
    assert sc.api.extra_body == {"calib": {"ttft_ms": 5}}
    assert sc.output.run_name == "x1" and sc.load.burstiness == 0.5
    # the override wins over the file, and a nonsense value is an error naming the field
    assert "load.num_requests" in _err(BASE, ["load.num_requests=many"])
    assert _err(BASE, ["load.rate"]).startswith("--set load.rate: expected key.path=value")
    assert "'url' is not a mapping" in _err(BASE, ["target.url.x=1"])


def test_in_flight_cap():
    sc = scenario_from_dict(BASE, ["load.max_concurrency=4"])
    assert sc.load.in_flight_cap == 4
    assert scenario_from_dict(BASE).load.in_flight_cap is None
    off = scenario_from_dict({**BASE, "load": {"mode": "offline", "num_requests": 3}})
    assert off.load.in_flight_cap is None


def test_overrides_do_not_leak_into_the_input_tree():
    tree = {"target": {"url": "http://127.0.0.1:9"},
            "load": {"mode": "server", "rate": 1, "num_requests": 3}}
    scenario_from_dict(tree, ["load.rate=9"])
    assert tree["load"]["rate"] == 1


def test_probe_keys_default_on_and_are_strict_booleans():
    sc = scenario_from_dict(BASE)
    assert sc.api.probe is True and sc.api.drop_rejected_fields is True
    sc = scenario_from_dict(BASE, ["api.probe=false", "api.drop_rejected_fields=false"])
    assert sc.api.probe is False and sc.api.drop_rejected_fields is False
    assert _err(BASE, ["api.drop_rejected_fields=maybe"]).startswith(
        "api.drop_rejected_fields: Input should be a valid boolean")
    assert _err(BASE, ["api.drop_rejected=true"]).startswith(
        "api.drop_rejected: unknown key (did you mean 'drop_rejected_fields'?)")
