"""``loadgen run --engine locust --repeat N``: the series runs on Locust too (before: refused,
"--repeat: runs with the native engine only"), each run a full Locust run directory."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from loadgen.record import read_records
from tests.support.procs import loadgen_cli, scenario_file

pytestmark = pytest.mark.skipif(importlib.util.find_spec("locust") is None,
                                reason="the locust extra is not installed")


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_repeat_runs_on_locust(tmp_path, calib_server):
    tree = {"name": "rl", "target": {"url": calib_server.url}, "api": {"model": "calib-model"},
            "workload": {"prompt_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": 3}},
            "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 6},
            "output": {"dir": str(tmp_path), "run_name": "rl", "report": "none"}}
    out = loadgen_cli("run", scenario_file(tmp_path, tree, "rl"), "--engine", "locust",
                      "--repeat", "2", "--json", timeout_s=300)
    assert out.returncode == 0, out.stderr[-3000:]
    got = json.loads(out.stdout.strip().splitlines()[-1])
    parent = Path(got["repeat_dir"])
    assert got["repeat"]["runs"] == 2 and (parent / "repeat.json").is_file()
    for i in (1, 2):
        run = parent / f"run-{i}"
        meta = json.loads((run / "meta.json").read_text())
        assert meta["engine"] == "locust"
        recs = read_records(run / "records.jsonl")
        assert sorted(r["id"] for r in recs) == list(range(6))
        assert all(r["status"] == "ok" for r in recs)
