"""The frontier and the concurrency search end to end on a real server (the calibration server):
``loadgen sweep`` writes frontier.json (+ frontier.png) from its points' summaries, sut.json says
how many accelerators served, the sweep report draws it, and ``loadgen compare SWEEP SWEEP``
overlays two frontiers and refuses a speed one of them does not reach."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from analysis.report import plots
from loadgen.multirun.sweep import run_sweep
from loadgen.scenario.loader import scenario_from_dict
from tests.loadgen.multirun.test_sweep import base

ROOT = Path(__file__).resolve().parents[3]


def _sweep(tmp_path, url, name, itl_ms, values=(1, 2), report="full"):
    tree = base(tmp_path, {"mode": "concurrency", "concurrency": 1, "num_requests": 4},
                {"param": "load.concurrency", "values": list(values)}, url=url,
                calib={"ttft_ms": 5, "itl_ms": itl_ms})
    tree["target"]["accelerators"] = 2
    tree["slo"] = {"tpot_ms": 1000}
    tree["output"] = {"dir": str(tmp_path), "run_name": name, "report": report}
    return run_sweep(scenario_from_dict(tree))


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_sweep_writes_the_frontier_of_its_points(calib_server, tmp_path):
    d, res = _sweep(tmp_path, calib_server.url, "fast", 4)
    fr = json.loads((d / "frontier.json").read_text())
    assert fr["x"] == "interactivity_tok_s.p50" and fr["y"] == "output_throughput_per_accelerator"
    assert [p["run"] for p in fr["points"]] == ["concurrency-1", "concurrency-2"]
    for p, row in zip(fr["points"], res["points"]):
        s = json.loads((d / p["run"] / "summary.json").read_text())
        sut = json.loads((d / p["run"] / "sut.json").read_text())
        assert sut["accelerators"] == 2 and s["capacity"]["accelerators"] == 2
        assert p["x"] == s["interactivity_tok_s"]["p50"] == row["interactivity_tok_s"]["p50"]
        assert p["y"] == s["output_throughput_per_accelerator"] == s["output_throughput"] / 2
        assert p["param"] == "load.concurrency" and p["value"] == row["value"]
        assert p["x"] > 0
        assert row["joules_per_output_token"] is None
        assert "power not measured" in row["capacity_reasons"]["joules_per_output_token"]
    xy = [(p["x"], p["y"]) for p in fr["points"]]
    assert any(p["on_frontier"] for p in fr["points"])
    for p in fr["points"]:      # on it exactly when no other point beats it on both axes
        beaten = any(q != (p["x"], p["y"]) and q[0] >= p["x"] and q[1] >= p["y"] for q in xy)
        assert p["on_frontier"] is not beaten
    assert fr["slo"]["tpot_ms"] == 1000
    if plots.available():
        assert (d / "frontier.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        md, _ = __import__("analysis.report.sweep", fromlist=["x"]).write_sweep_report(d)
        text = md.read_text()
        assert "## Throughput–interactivity frontier" in text
        assert "| c=1 | " in text and "| c=2 | " in text


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_compare_two_sweeps_overlays_their_frontiers(calib_server, tmp_path):
    fast, _ = _sweep(tmp_path, calib_server.url, "fast", 4, report="text")
    slow, _ = _sweep(tmp_path, calib_server.url, "slow", 12, report="text")
    assert not (fast / "frontier.png").exists()          # output.report text: no plots
    out = tmp_path / "cmp.html"

    def compare(*extra):
        return subprocess.run([sys.executable, "-m", "loadgen.cli", "compare", str(fast),
                               str(slow), *extra], cwd=ROOT, capture_output=True, text=True,
                              timeout=120)
    r = compare("--out", str(out))
    assert r.returncode == 0, r.stderr
    assert "# loadgen compare (frontiers) — fast vs slow" in r.stdout
    assert "## Frontier of fast" in r.stdout and "## Frontier of slow" in r.stdout
    res = json.loads(out.with_suffix(".json").read_text())
    assert res["comparable"] and [f["name"] for f in res["frontiers"]] == ["fast", "slow"]
    assert out.read_text().startswith("<!DOCTYPE html>")
    if plots.available():
        assert out.with_suffix(".png").is_file()
    # 100,000 tok/s per user: neither reaches it (the server writes a token every 4 ms)
    r = compare("--at-interactivity", "100000")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith("loadgen: error: --at-interactivity: fewer than two frontiers reach "
                           "it: fast does not reach 100000 tok/s per user")
    r = compare("--at-interactivity", "-3")
    assert r.returncode == 2 and r.stderr.strip() == (
        "loadgen: error: --at-interactivity: -3 must be a speed > 0 (tokens/s per user)")
    r = subprocess.run([sys.executable, "-m", "loadgen.cli", "compare", str(fast / "concurrency-1"),
                        str(slow / "concurrency-1"), "--at-interactivity", "10"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and r.stderr.strip() == (
        "loadgen: error: --at-interactivity: give two or more sweep directories (each with "
        "sweep.json)")


def test_concurrency_search_on_a_real_server(calib_server, tmp_path):
    # TTFT 30 ms against an SLO of 5 ms: no concurrency passes, down to 1; each probe a full run
    tree = base(tmp_path, {"mode": "concurrency", "concurrency": 1, "num_requests": 3},
                {"param": "load.concurrency", "search": "max_concurrency_under_slo",
                 "concurrency_low": 4, "max_probes": 5}, url=calib_server.url,
                calib={"ttft_ms": 30, "itl_ms": 1})
    tree["slo"] = {"ttft_ms": 5}
    d, res = run_sweep(scenario_from_dict(tree))
    s = res["search"]
    assert [p["concurrency"] for p in s["probes"]] == [4, 2, 1]
    assert s["max_passing_concurrency"] is None and s["min_failing_concurrency"] == 1
    assert s["stopped"] == "no probed concurrency passed (not even 1)"
    assert s["bracket"] == [[None, 4], [None, 2], [None, 1]]
    for pr in s["probes"]:
        sm = json.loads((d / f"concurrency-{pr['concurrency']}" / "summary.json").read_text())
        assert sm["verdict"]["valid"] is False and pr["valid"] is False
        assert sm["requests_completed"] == 3
    assert json.loads((d / "sweep.json").read_text())["search"] == json.loads(
        json.dumps(s, default=str))


@pytest.mark.parametrize("value", ["0", "-2", "true", "1.5"])
def test_accelerators_must_be_a_whole_number_from_one(tmp_path, value):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"target": {"url": "http://127.0.0.1:9"}}))
    r = subprocess.run([sys.executable, "-m", "loadgen.cli", "run", str(p), "--set",
                        f"target.accelerators={value}"], cwd=ROOT, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.startswith(f"loadgen: error: {p}: target.accelerators: must be a whole number "
                           ">= 1 (got ")
