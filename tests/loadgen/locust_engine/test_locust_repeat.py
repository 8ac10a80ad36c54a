"""``loadgen run --engine locust --repeat N``: the series runs on Locust too (before: refused,
"--repeat: runs with the native engine only"), each run a full Locust run directory."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from loadgen.record import read_records

ROOT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.skipif(importlib.util.find_spec("locust") is None,
                                reason="the locust extra is not installed")


def test_repeat_runs_on_locust(tmp_path, calib_server):
    tree = {"name": "rl", "target": {"url": calib_server.url}, "api": {"model": "calib-model"},
            "workload": {"prompt_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": 3}},
            "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 6},
            "output": {"dir": str(tmp_path), "run_name": "rl", "report": "none"}}
    p = tmp_path / "rl.yaml"
    p.write_text(yaml.safe_dump(tree))
    out = subprocess.run([sys.executable, "-m", "loadgen", "run", str(p), "--engine", "locust",
                          "--repeat", "2", "--json"], cwd=ROOT, capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, PYTHONPATH=str(ROOT)))
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
