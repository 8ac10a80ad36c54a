"""load.probe against the calibration server (127.0.0.1): the side stream in its own file,
records.jsonl untouched, the summary's comparison, the contract."""
import json

import pytest

from analysis.contract import validate_run_dir
from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from loadgen.scenario.strict import ScenarioError


def tree(url, tmp_path, **over):
    t = {"name": "probe", "target": {"url": url},
         "api": {"extra_body": {"calib": {"ttft_ms": 2, "itl_ms": 1}}},
         "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                      "output_tokens": {"dist": "fixed", "value": 4}},
         "load": {"mode": "server", "rate": 40, "num_requests": 20, "warmup_requests": 2,
                  "probe": {"rate": 20, "prompt_tokens": 8, "output_tokens": 4,
                            "alone_requests": 3}},
         "output": {"dir": str(tmp_path), "run_name": "run", "report": "text"}}
    for k, v in over.items():
        t[k] = {**t[k], **v}
    return t


def test_probes_are_apart_and_compared(calib_server, tmp_path):
    res = run_scenario(scenario_from_dict(tree(calib_server.url, tmp_path)))
    d = res.run_dir
    main = read_records(d / "records.jsonl")
    probes = read_records(d / "probe_stream.jsonl")
    assert sorted(r["id"] for r in main) == list(range(22))
    assert {r["phase"] for r in main} == {"warmup", "measured"}
    alone = [r for r in probes if r["phase"] == "probe_alone"]
    beside = [r for r in probes if r["phase"] == "probe"]
    assert len(alone) == 3 and len(beside) >= 1 and len(alone) + len(beside) == len(probes)
    assert sorted(r["id"] for r in probes) == list(range(len(probes)))
    assert all(r["status"] == "ok" and r["workload_prompt_tokens"] == 8 for r in probes)
    # the baseline ran before t0, the side stream from t0 on
    meta = json.loads((d / "meta.json").read_text())
    assert max(r["end_at_ns"] for r in alone) < meta["t0_ns"] <= min(r["sent_at_ns"] for r in beside)
    assert meta["probe_stream"]["records"] == len(probes)
    assert meta["probe_stream"]["issued_beside"] == len(beside)
    s = json.loads((d / "summary.json").read_text())
    assert s["requests_completed"] == 20 and s["requests_warmup"] == 2
    ps = s["probe_stream"]
    assert ps["alone"]["completed"] == 3 and ps["under_load"]["completed"] == len(beside)
    assert ps["slowdown"]["ttft_p50"] is not None and ps["rate"] == 20
    assert "Probe stream (load.probe)" in (d / "report.md").read_text()
    assert validate_run_dir(d) == []


@pytest.mark.parametrize("over,msg", [
    ({"api": {"stream": False, "extra_body": {}}}, "load.probe: a probe's TTFT/TPOT need api.stream"),
    ({"client": {"processes": 2}}, "client.processes: 2: load.probe runs in one process"),
    ({"load": {"mode": "server", "rate": 1, "num_requests": 2,
               "probe": {"rate": 1, "output_tokens": 1}}}, "load.probe.output_tokens"),
    ({"load": {"mode": "server", "rate": 1, "num_requests": 2, "probe": {"rate": 0}}},
     "load.probe.rate"),
])
def test_bad_probe_settings_are_one_line(tmp_path, over, msg):
    t = tree("http://127.0.0.1:1", tmp_path)
    for k, v in over.items():
        t[k] = v
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(t)
    assert msg in str(e.value) and "\n" not in str(e.value)
