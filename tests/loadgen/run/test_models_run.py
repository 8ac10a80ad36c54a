"""api.models: one run over several model names against a real calibration server started with
``--models a,b,c`` (it lists them at /v1/models and echoes the requested model in every chunk):
native one process, two sender processes and the Locust engine send the same model for the same
request id (the pure seeded rule), every record names its model, summary.json ``models`` has each
model's share and figures, the report a table; a name the server does not list stops the run at
the probe with one line (exit 2)."""
from __future__ import annotations

import collections
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from loadgen.targets.probe import ProbeError
from servers.calib import CalibrationServer

ROOT = Path(__file__).resolve().parents[3]
MODELS = [{"name": "a", "weight": 2}, {"name": "b", "weight": 1}, {"name": "c", "weight": 1}]


@pytest.fixture(scope="module")
def multi():
    with CalibrationServer(models=["a", "b", "c"]) as s:
        yield s


def tree(url, tmp_path, name, processes=1, assignment="round_robin", models=MODELS, n=24):
    return {"name": name, "target": {"url": url, "scrape_metrics": False},
            "api": {"models": models, "model_assignment": assignment,
                    "extra_body": {"calib": {"ttft_ms": 1, "itl_ms": 1}}},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": 4}, "seed": 3},
            "load": {"mode": "server", "rate": 200, "num_requests": n, "warmup_requests": 2},
            "client": {"processes": processes},
            "output": {"dir": str(tmp_path), "run_name": name, "report": "text"}}


def served(multi, n_before: int) -> dict:
    """request seq ─► the model the server was asked for (its log), of the requests after n_before."""
    return [e["body"].get("model") for e in multi.log()[n_before:]]


def check_run(res, n=24):
    recs = sorted(read_records(res.run_dir / "records.jsonl"), key=lambda r: r["id"])
    assert [r["id"] for r in recs] == list(range(n + 2))
    assert all(r["status"] == "ok" for r in recs), [r["error"] for r in recs if r["status"] != "ok"]
    summary = json.loads((res.run_dir / "summary.json").read_text())
    return recs, summary


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_round_robin_two_processes_same_models_as_one(multi, tmp_path):
    before = len(multi.log())
    one = run_scenario(scenario_from_dict(tree(multi.url, tmp_path, "one")))
    recs1, s1 = check_run(one)
    mid = len(multi.log())
    two = run_scenario(scenario_from_dict(tree(multi.url, tmp_path, "two", processes=2)))
    recs2, s2 = check_run(two)
    # the weights 2:1:1 dealt a, b, c, a in turn over the ids, in one process or two
    assert [r["model"] for r in recs1] == [["a", "b", "c", "a"][i % 4] for i in range(26)]
    assert [r["model"] for r in recs2] == [r["model"] for r in recs1]
    assert {r["worker"] for r in recs2} == {"0", "1"}
    # the server was asked for exactly the models the records name, and the probe's one request
    # for the first model
    assert collections.Counter(served(multi, before)[:mid - before]) == \
        collections.Counter(r["model"] for r in recs1) + collections.Counter({"a": 1})
    for s in (s1, s2):
        m = s["models"]
        assert list(m) == ["c", "a", "b"]          # in the order first seen: measured ids 2, 3, 5
        assert (m["a"]["requests"], m["b"]["requests"], m["c"]["requests"]) == (12, 6, 6)
        assert m["a"]["share"] == pytest.approx(0.5) and m["b"]["share"] == pytest.approx(0.25)
        assert sum(x["completed"] for x in m.values()) == 24
        assert all(x["ttft_ms"]["p50"] is not None and x["request_throughput"] > 0 for x in m.values())
    assert "Models (api.models)" in (one.run_dir / "report.md").read_text()


def test_random_assignment_is_seeded(multi, tmp_path):
    models = [{"name": "a", "weight": 1}, {"name": "b", "weight": 1}]
    r1, _ = check_run(run_scenario(scenario_from_dict(tree(multi.url, tmp_path, "r1", assignment="random",
                                                          models=models))))
    r2, s2 = check_run(run_scenario(scenario_from_dict(tree(multi.url, tmp_path, "r2", processes=2,
                                                            assignment="random", models=models))))
    assert [r["model"] for r in r1] == [r["model"] for r in r2]
    assert {r["model"] for r in r1} == {"a", "b"}
    assert sum(x["share"] for x in s2["models"].values()) == pytest.approx(1.0)


def test_a_model_the_server_does_not_list_stops_at_the_probe(multi, tmp_path):
    bad = [{"name": "a", "weight": 1}, {"name": "zz", "weight": 1}]
    with pytest.raises(ProbeError) as e:
        run_scenario(scenario_from_dict(tree(multi.url, tmp_path, "bad", models=bad)))
    assert str(e.value).startswith("api.models: 'zz' is not served by " + multi.url)
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(tree(multi.url, tmp_path, "bad2", models=bad)))
    r = subprocess.run([sys.executable, "-m", "loadgen.cli", "run", str(p)], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "api.models: 'zz' is not served" in lines[0], r.stderr


def test_one_model_leaves_model_null(calib_server, tmp_path):
    t = tree(calib_server.url, tmp_path, "single", n=4)
    del t["api"]["models"], t["api"]["model_assignment"]
    recs, s = check_run(run_scenario(scenario_from_dict(t)), n=4)
    assert {r["model"] for r in recs} == {None} and s["models"] is None


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.skipif(importlib.util.find_spec("locust") is None, reason="the locust extra is not installed")
def test_locust_engine_sends_the_same_models(multi, tmp_path):
    from loadgen.engine.locust.run import LocustOptions, run_locust
    from loadgen.scenario.loader import load_scenario
    nat, _ = check_run(run_scenario(scenario_from_dict(tree(multi.url, tmp_path, "nat", n=12))), n=12)
    p = tmp_path / "loc.yaml"
    p.write_text(yaml.safe_dump(tree(multi.url, tmp_path, "loc", n=12)))
    res = run_locust(load_scenario(p), LocustOptions(workers=2, scenario_path=str(p)))
    loc, s = check_run(res, n=12)
    assert [r["model"] for r in loc] == [r["model"] for r in nat]
    assert s["models"]["a"]["share"] == pytest.approx(0.5)
