"""``target.urls``: one run balanced over two calibration servers on 127.0.0.1 (native engine,
one process and two), every record naming its replica, summary and report per replica."""
import json

import pytest

from loadgen.record import read_records
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import scenario_from_dict
from servers.calib import CalibrationServer


@pytest.fixture(scope="module")
def second_server():
    with CalibrationServer() as server:
        yield server


def run(urls, tmp_path, processes=1, balance="round_robin"):
    tree = {"name": "replicas", "target": {"urls": urls, "balance": balance},
            "api": {"extra_body": {"calib": {"ttft_ms": 2, "itl_ms": 1}}},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                         "output_tokens": {"dist": "fixed", "value": 4}},
            "load": {"mode": "server", "rate": 50, "num_requests": 12, "warmup_requests": 2},
            "client": {"processes": processes},
            "output": {"dir": str(tmp_path), "run_name": "run", "report": "text"}}
    res = run_scenario(scenario_from_dict(tree))
    return res, read_records(res.run_dir / "records.jsonl")


def test_round_robin_run_names_each_replica(calib_server, second_server, tmp_path):
    urls = [calib_server.url, second_server.url]
    res, recs = run(urls, tmp_path)
    assert sorted(r["id"] for r in recs) == list(range(14))
    assert all(r["status"] == "ok" for r in recs)
    measured = sorted((r for r in recs if r["phase"] == "measured"), key=lambda r: r["id"])
    assert {r["target_url"] for r in measured} == set(urls)
    assert sum(r["target_url"] == urls[0] for r in recs) == 7      # every second send
    summary = json.loads((res.run_dir / "summary.json").read_text())
    rows = summary["replicas"]["urls"]
    assert sorted(u["url"] for u in rows) == sorted(urls)
    assert sum(u["requests"] for u in rows) == 12 and sum(u["completed"] for u in rows) == 12
    assert sum(u["share"] for u in rows) == pytest.approx(1.0)
    meta = json.loads((res.run_dir / "meta.json").read_text())
    assert [x["url"] for x in meta["client_connections"]["replicas"]] == urls
    assert "Replicas (target.urls)" in (res.run_dir / "report.md").read_text()


def test_two_sender_processes_balance_too(calib_server, second_server, tmp_path):
    urls = [calib_server.url, second_server.url]
    res, recs = run(urls, tmp_path, processes=2, balance="least_in_flight")
    assert sorted(r["id"] for r in recs) == list(range(14))
    assert all(r["status"] == "ok" and r["target_url"] in urls for r in recs)
    rows = json.loads((res.run_dir / "summary.json").read_text())["replicas"]["urls"]
    assert sum(u["requests"] for u in rows) == 12
    # meta client_connections: each URL's sends summed over BOTH processes (the warm-up's too),
    # by the rule the Locust workers' sends are summed (engine/core/describe.py)
    meta = json.loads((res.run_dir / "meta.json").read_text())
    sent = {x["url"]: x["requests_sent"] for x in meta["client_connections"]["replicas"]}
    assert sum(sent.values()) == 14 and sent == {u: sum(r["target_url"] == u for r in recs)
                                                 for u in urls}


def test_an_unreachable_replica_stops_the_run_naming_target_urls(calib_server, tmp_path):
    from loadgen.targets.probe import ProbeError
    tree = {"target": {"urls": [calib_server.url, "http://127.0.0.1:9"]},
            "api": {"ready_timeout_s": 0},
            "load": {"mode": "server", "rate": 5, "num_requests": 2},
            "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}}
    with pytest.raises(ProbeError) as e:
        run_scenario(scenario_from_dict(tree))
    assert str(e.value).startswith("target.urls: cannot reach http://127.0.0.1:9/v1/models")
