"""Every file of representative run directories fits the contract (validate_run_dir), the summary
is computed once and the report renders it, and open_run reads them.

Runs: closed loop, open loop (server) with warm-up, offline, a crash mid-run (interrupted), a
managed server (server.json) and the Locust engine — against the calibration server on 127.0.0.1.
"""
import importlib.util
import json
import sys
from pathlib import Path

import pytest
import yaml

import loadgen
from analysis.contract import (SCHEMA_VERSION, Summary, check_run_dir, read_device,
                               validate_run_dir)
from analysis.report.run_report import write_report
from loadgen.run.runner import run_scenario
from loadgen.scenario.loader import load_scenario, scenario_from_dict
from tests.support.procs import ExplodingProgress

ROOT = Path(__file__).resolve().parents[3]
LOADS = {"closed": {"mode": "concurrency", "concurrency": 2, "num_requests": 6},
         "server": {"mode": "server", "rate": 40, "num_requests": 8, "warmup_requests": 2},
         "offline": {"mode": "offline", "num_requests": 5, "max_concurrency": 2}}


def scenario(target: dict, tmp_path, name: str, load: dict, report: str = "none") -> dict:
    return {"name": name, "target": target, "api": {"extra_body": {"calib": {"ttft_ms": 2,
                                                                              "itl_ms": 1}}},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": 4}},
            "load": load, "output": {"dir": str(tmp_path), "run_name": name, "report": report}}


@pytest.mark.parametrize("kind", sorted(LOADS))
def test_a_run_directory_fits_the_contract(calib_server, tmp_path, kind):
    res = run_scenario(scenario_from_dict(scenario({"url": calib_server.url}, tmp_path, kind,
                                                   LOADS[kind])))
    assert validate_run_dir(res.run_dir) == []
    assert read_device(res.run_dir).status in ("recorded", "none")   # checked by the above too
    stored = json.loads((res.run_dir / "summary.json").read_text())
    assert stored["schema_version"] == SCHEMA_VERSION
    assert stored == json.loads(json.dumps(res.summary))     # computed once: what was written
    run = loadgen.open_run(res.run_dir)
    assert run.meta.mode == LOADS[kind]["mode"] and run.summary == Summary.read(stored)
    n = LOADS[kind]["num_requests"] + LOADS[kind].get("warmup_requests", 0)
    assert len(run.records()) == n and len(run.chunks()) >= n * 4


def test_an_interrupted_run_fits_the_contract(calib_server, tmp_path):
    sc = scenario({"url": calib_server.url}, tmp_path, "cut",
                  {"mode": "server", "rate": 50, "num_requests": 20})
    sc["api"]["extra_body"]["calib"] = {"ttft_ms": 100, "itl_ms": 5}
    with pytest.raises(KeyboardInterrupt):
        run_scenario(scenario_from_dict(sc), ExplodingProgress(at=2))
    d = tmp_path / "cut"
    check_run_dir(d)
    run = loadgen.open_run(d)
    assert run.meta.interrupted and run.summary.requests_cancelled > 0
    assert set(run.records()["status"]) >= {"ok", "cancelled"}


def test_a_managed_server_run_fits_the_contract(tmp_path):
    target = {"server": {"kind": "command", "health_path": "/health", "startup_timeout_s": 30,
                         "command": [sys.executable, "-m", "servers.calib",
                                     "--port", "{port}"], "env": {"PYTHONPATH": str(ROOT)}}}
    res = run_scenario(scenario_from_dict(scenario(target, tmp_path, "managed", LOADS["closed"])))
    assert (res.run_dir / "server.json").is_file()
    assert validate_run_dir(res.run_dir) == []
    run = loadgen.open_run(res.run_dir)
    assert run.server.status == "stopped" and run.sut.managed_server.kind == "command"


def test_the_report_renders_the_summary_the_run_wrote(calib_server, tmp_path):
    res = run_scenario(scenario_from_dict(scenario({"url": calib_server.url}, tmp_path, "r",
                                                   LOADS["closed"])))
    p = res.run_dir / "summary.json"
    s = json.loads(p.read_text())
    s["output_throughput"] = 123456.75                 # what the run wrote is what is shown
    p.write_text(json.dumps(s))
    md, _ = write_report(res.run_dir, with_plots=False)
    assert "123456.75" in md.read_text() or "1.235e+05" in md.read_text()
    s.pop("schema_version")                            # an older summary.json: computed again
    p.write_text(json.dumps(s))
    md, _ = write_report(res.run_dir, with_plots=False)
    assert "123456.75" not in md.read_text()


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.skipif(importlib.util.find_spec("locust") is None, reason="locust not installed")
def test_a_locust_run_fits_the_contract(calib_server, tmp_path):
    from loadgen.engine.locust.run import LocustOptions, run_locust   # subprocesses: no gevent here
    path = tmp_path / "lc.yaml"
    path.write_text(yaml.safe_dump(scenario({"url": calib_server.url}, tmp_path, "lc",
                                            LOADS["closed"])))
    res = run_locust(load_scenario(path), LocustOptions(scenario_path=str(path)))
    assert validate_run_dir(res.run_dir) == []
    run = loadgen.open_run(res.run_dir)
    assert run.meta.engine == "locust" and run.meta.locust["workers"] == 1
