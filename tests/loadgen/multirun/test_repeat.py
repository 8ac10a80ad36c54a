"""``loadgen run --repeat N`` against the calibration server: N run dirs, repeat.json, its report."""
import json
from pathlib import Path

import pytest

from tests.support.procs import loadgen_cli, scenario_file


def _scenario(calib_server, name: str, load: dict, output: dict, **more) -> dict:
    """A concurrency run of 8-token prompts and 3-token answers, 2 ms TTFT and 1 ms ITL."""
    return {"name": name, "target": {"url": calib_server.url},
            "api": {"extra_body": {"calib": {"ttft_ms": 2, "itl_ms": 1}}},
            "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": 3}},
            "load": {"mode": "concurrency", **load}, "output": output, **more}


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_repeat_runs_and_summarises_with_confidence_intervals(calib_server, tmp_path):
    sc = _scenario(calib_server, "rep", {"concurrency": 2, "num_requests": 6},
                   {"dir": str(tmp_path), "run_name": "series", "report": "text"})
    path = scenario_file(tmp_path, sc)
    out = loadgen_cli("run", path, "--repeat", "3", "--json", timeout_s=240)
    assert out.returncode == 0, out.stderr
    line = json.loads(out.stdout.strip().splitlines()[-1])
    parent = Path(line["repeat_dir"])
    assert parent == tmp_path / "series-x3"
    rep = json.loads((parent / "repeat.json").read_text())
    assert rep["runs"] == 3 and rep["verdicts"] == [True, True, True]
    f = rep["figures"]["request_throughput"]
    assert f["n"] == 3 and f["ci95_low"] <= f["mean"] <= f["ci95_high"]
    for i in (1, 2, 3):
        assert (parent / f"run-{i}" / "summary.json").is_file()
    assert "95 % CI" in (parent / "report.md").read_text()
    (parent / "report.md").unlink()
    again = loadgen_cli("report", parent, timeout_s=120)
    assert again.returncode == 0, again.stderr
    assert "95 % CI" in (parent / "report.md").read_text()
    assert json.loads((parent / "repeat.json").read_text())["figures"]["request_throughput"]["n"] == 3
    bad = loadgen_cli("run", path, "--repeat", "0", timeout_s=60)
    assert bad.returncode == 2 and "--repeat 0" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_sweep_repeat_gives_each_point_a_confidence_interval(calib_server, tmp_path):
    sc = _scenario(calib_server, "rs", {"concurrency": 1, "num_requests": 4},
                   {"dir": str(tmp_path), "report": "none"},
                   sweep={"param": "load.concurrency", "values": [1, 2]})
    out = loadgen_cli("sweep", scenario_file(tmp_path, sc), "--repeat", "2", "--json", timeout_s=240)
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout.strip().splitlines()[-1])["repeat"]
    assert rep["sweeps"] == 2 and [p["value"] for p in rep["points"]] == [1, 2]
    assert all(p["runs"] == 2 and p["figures"]["request_throughput"]["n"] == 2 for p in rep["points"])
    assert (tmp_path / "sweep-rs-x2" / "repeat.json").is_file()
