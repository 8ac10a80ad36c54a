"""Sweeps: points under one directory, resumable; the max-rate-under-SLO bracket + bisection."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from loadgen.record import read_records
from loadgen.scenario.model import ScenarioError
from loadgen.scenario.loader import scenario_from_dict
from loadgen.multirun.sweep import run_sweep

ROOT = Path(__file__).resolve().parents[3]


def base(tmp_path, load, sweep, url="http://127.0.0.1:9", calib=None):
    return {"name": "sw", "target": {"url": url}, "api": {"extra_body": {"calib": calib or {}}},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": 3}},
            "load": load, "sweep": sweep, "output": {"dir": str(tmp_path), "report": "none"}}


class Threshold:
    """A hand-written stand-in for a server: a run passes iff its rate is <= ``limit``."""

    def __init__(self, limit):
        self.limit, self.rates = limit, []

    def __call__(self, sc):
        self.rates.append(sc.load.rate)
        assert sc.sweep is None and sc.output.run_name == f"rate-{sc.load.rate:g}"
        return {"verdict": {"valid": sc.load.rate <= self.limit, "reasons": []},
                "requests_completed": 1}


SERVER = {"mode": "server", "rate": 1, "num_requests": 4}


@pytest.mark.parametrize("limit, low, high", [(13.7, 2.0, None), (13.7, 2.0, 3.0),
                                              (0.3, 2.0, None), (99.0, 40.0, 60.0)])
def test_search_brackets_then_bisects(tmp_path, limit, low, high):
    sc = scenario_from_dict(base(tmp_path, SERVER, {
        "param": "load.rate", "search": "max_rate_under_slo", "rate_low": low,
        "rate_high": high, "tolerance": 0.02, "max_probes": 30}))
    fake = Threshold(limit)
    d, res = run_sweep(sc, fake)
    s = res["search"]
    lo, hi = s["max_passing_rate"], s["min_failing_rate"]
    assert s["converged"] and lo <= limit < hi and (hi - lo) / lo <= 0.02
    assert [p["rate"] for p in s["probes"]] == fake.rates
    assert json.loads((d / "sweep.json").read_text())["search"]["max_passing_rate"] == lo


def test_search_stops_at_max_probes_and_reports_why(tmp_path):
    sc = scenario_from_dict(base(tmp_path, SERVER, {
        "param": "load.rate", "search": "max_rate_under_slo", "rate_low": 1.0,
        "max_probes": 4}))
    _, res = run_sweep(sc, Threshold(1e9))
    s = res["search"]
    assert len(s["probes"]) == 4 and not s["converged"]
    assert s["min_failing_rate"] is None and "every probed rate passed" in s["stopped"]
    assert s["max_passing_rate"] == 8.0             # 1, 2, 4, 8


def test_concurrency_sweep_is_resumable(calib_server, tmp_path):
    tree = base(tmp_path, {"mode": "concurrency", "concurrency": 1, "num_requests": 4},
                {"param": "load.concurrency", "values": [1, 2]}, url=calib_server.url,
                calib={"ttft_ms": 10})
    d, res = run_sweep(scenario_from_dict(tree))
    assert d == tmp_path / "sweep-sw"
    assert [p["value"] for p in res["points"]] == [1, 2]
    assert all(p["requests_completed"] == 4 and not p["reused"] for p in res["points"])
    scen = yaml.safe_load((d / "concurrency-2" / "scenario.yaml").read_text())
    assert scen["load"]["concurrency"] == 2 and scen["sweep"] is None
    before = (d / "concurrency-1" / "records.jsonl").stat().st_mtime_ns
    # point 2 was interrupted: it must run again; point 1 is reused untouched
    meta_p = d / "concurrency-2" / "meta.json"
    meta_p.write_text(json.dumps({**json.loads(meta_p.read_text()), "interrupted": True}))
    _, again = run_sweep(scenario_from_dict(tree))
    assert [p["reused"] for p in again["points"]] == [True, False]
    assert (d / "concurrency-1" / "records.jsonl").stat().st_mtime_ns == before
    assert (d / "concurrency-2.incomplete").is_dir()
    assert len(read_records(d / "concurrency-2" / "records.jsonl")) == 4
    # a different scenario in the same sweep directory is refused
    changed = dict(tree, load={"mode": "concurrency", "concurrency": 1, "num_requests": 5})
    with pytest.raises(ScenarioError, match="different scenario"):
        run_sweep(scenario_from_dict(changed))


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_search_against_the_calibration_server(calib_server, tmp_path):
    # cap 1 and a ~25 ms request: rates well above 40/s cannot keep their schedule
    tree = base(tmp_path, {"mode": "server", "rate": 1, "arrival": "constant",
                           "num_requests": 8, "max_concurrency": 1},
                {"param": "load.rate", "search": "max_rate_under_slo", "rate_low": 10,
                 "tolerance": 0.5, "max_probes": 5}, url=calib_server.url,
                calib={"ttft_ms": 20, "itl_ms": 2})
    d, res = run_sweep(scenario_from_dict(tree))
    s = res["search"]
    by_rate = {p["value"]: p for p in res["points"]}
    for pr in s["probes"]:
        assert by_rate[pr["rate"]]["valid"] is pr["valid"]
        assert (d / f"rate-{pr['rate']:g}" / "summary.json").is_file()
    if s["max_passing_rate"] is not None:
        assert by_rate[s["max_passing_rate"]]["valid"] is True
    if s["min_failing_rate"] is not None:
        assert by_rate[s["min_failing_rate"]]["valid"] is False
        assert by_rate[s["min_failing_rate"]]["reasons"]


@pytest.mark.parametrize("sweep, field", [
    ({"param": "load.rate", "values": [1]}, "sweep: param load.rate needs load.mode server"),
    ({"param": "load.concurrency"}, "sweep: give 'values'"),
    ({"param": "load.concurrency", "search": "max_rate_under_slo", "rate_low": 1},
     "sweep: search max_rate_under_slo sweeps param load.rate"),
    ({"param": "load.concurrency", "values": [1.5]}, "sweep: load.concurrency values"),
])
def test_bad_sweep_blocks(tmp_path, sweep, field):
    with pytest.raises(ScenarioError) as e:
        scenario_from_dict(base(tmp_path, {"mode": "concurrency", "concurrency": 1,
                                           "num_requests": 2}, sweep))
    assert str(e.value).startswith(field)


def test_cli_sweep_without_block(tmp_path):
    r = subprocess.run([sys.executable, "-m", "loadgen.cli", "sweep",
                        str(ROOT / "scenarios" / "external.yaml")], cwd=ROOT,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.strip() == "loadgen: error: sweep: the scenario has no sweep block " \
                               "(add sweep.values or sweep.search)"


def test_managed_server_is_shared_by_the_points(tmp_path):
    tree = base(tmp_path, {"mode": "concurrency", "concurrency": 1, "num_requests": 2},
                {"param": "load.concurrency", "values": [1, 2]})
    tree["target"] = {"server": {"kind": "command", "startup_timeout_s": 30,
                                 "env": {"PYTHONPATH": str(ROOT)},
                                 "command": [sys.executable, "-m", "servers.calib",
                                             "--port", "{port}"]}}
    d, res = run_sweep(scenario_from_dict(tree))
    pids = {json.loads((d / p["run_dir"] / "sut.json").read_text())["managed_server"]["pid"]
            for p in res["points"]}
    assert len(pids) == 1 and (d / "server.log").is_file()
    assert all(p["requests_completed"] == 2 for p in res["points"])
    assert not (d / "concurrency-1" / "server.log").exists()


def _warnings(d, name):
    return json.loads((d / name / "summary.json").read_text())["warnings"]


def test_later_points_warn_of_prompts_the_server_has_seen(calib_server, tmp_path):
    sc = scenario_from_dict(base(tmp_path, {"mode": "concurrency", "concurrency": 1,
                                            "num_requests": 4},
                                 {"param": "load.concurrency", "values": [1, 2]},
                                 url=calib_server.url))
    d, res = run_sweep(sc)
    assert _warnings(d, "concurrency-1") == []
    (w,) = _warnings(d, "concurrency-2")
    assert w.startswith("4 prompts of this point were sent to the same server earlier")
    meta = json.loads((d / "concurrency-2" / "meta.json").read_text())
    assert meta["cache_hygiene"]["prompts_seen_before"] == 4 and meta["cache_hygiene"]["reset"] is None


def test_reset_prefix_cache_before_each_later_point(calib_server, tmp_path):
    import urllib.request
    with urllib.request.urlopen(f"{calib_server.url}/calib/resets", timeout=10) as r:
        before = len(json.loads(r.read()))
    sc = scenario_from_dict(base(tmp_path, {"mode": "concurrency", "concurrency": 1,
                                            "num_requests": 3},
                                 {"param": "load.concurrency", "values": [1, 2, 3],
                                  "reset_prefix_cache": True}, url=calib_server.url))
    d, _ = run_sweep(sc)
    with urllib.request.urlopen(f"{calib_server.url}/calib/resets", timeout=10) as r:
        assert len(json.loads(r.read())) - before == 2          # before points 2 and 3
    meta = json.loads((d / "concurrency-3" / "meta.json").read_text())
    assert meta["cache_hygiene"]["reset"]["ok"] is True
    assert _warnings(d, "concurrency-2") == [] and _warnings(d, "concurrency-3") == []


def test_a_failed_reset_still_warns_and_says_why():
    from loadgen.multirun.cache_hygiene import hygiene
    h = hygiene(5, 3, {"ok": False, "status": 404, "detail": "HTTP 404 from /reset_prefix_cache"})
    assert h["prompts_seen_before"] == 3 and "reset failed: HTTP 404" in h["warning"]
    assert hygiene(5, 0, None)["warning"] is None


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_a_sweep_of_records_arrow_points(calib_server, tmp_path):
    """output.records: arrow (issue 42): each point writes records.arrow; the cache hygiene
    counts its sends from it, the points count as done (reused when run again), the frontier
    and the sweep report read them."""
    from analysis.report.sweep import load_sweep
    tree = base(tmp_path, {"mode": "concurrency", "concurrency": 1, "num_requests": 4},
                {"param": "load.concurrency", "values": [1, 2]}, url=calib_server.url)
    tree["output"]["records"] = "arrow"
    d, res = run_sweep(scenario_from_dict(tree))
    assert all(p["requests_completed"] == 4 for p in res["points"])
    for name in ("concurrency-1", "concurrency-2"):
        assert (d / name / "records.arrow").is_file() and not (d / name / "records.jsonl").exists()
    meta = json.loads((d / "concurrency-2" / "meta.json").read_text())
    assert meta["cache_hygiene"]["prompts_seen_before"] == 4     # counted from records.arrow
    sw = load_sweep(d)
    assert [p["value"] for p in sw["points"]] == [1, 2] and sw["missing"] == []
    assert sw["state"]["complete"] is not False and sw["state"]["done"] == [1, 2]
    _, again = run_sweep(scenario_from_dict(tree))
    assert [p["reused"] for p in again["points"]] == [True, True]
