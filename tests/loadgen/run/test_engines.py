"""The one engine rule (loadgen/run/engines.py), asked by ``loadgen run`` for both engines:
what runs on Locust, what is refused, in one line naming the field or flag."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from loadgen.run.engines import refusal
from loadgen.scenario.loader import scenario_from_dict

ROOT = Path(__file__).resolve().parents[3]


def _sc(load: dict):
    return scenario_from_dict({"target": {"url": "http://127.0.0.1:1"}, "load": load})


def test_one_rule_for_both_engines():
    plain = _sc({"mode": "server", "rate": 1, "num_requests": 2})
    probed = _sc({"mode": "server", "rate": 1, "num_requests": 2, "probe": {"rate": 1}})
    assert refusal("native", plain) is None and refusal("native", probed) is None
    assert refusal("native", plain, repeat=3) is None
    assert refusal("locust", plain) is None
    assert refusal("locust", plain, repeat=3) is None             # --repeat runs on Locust
    assert refusal("locust", probed).startswith("load.probe:")
    assert refusal("locust", plain, repeat=2, master=True).startswith("--repeat:")
    assert refusal("locust", plain, repeat=2, worker=True).startswith("--repeat:")
    assert refusal("native", plain, repeat=0).startswith("--repeat 0:")


def test_the_cli_refuses_a_probe_stream_on_locust_in_one_line(tmp_path):
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump({"target": {"url": "http://127.0.0.1:1"},
                                 "load": {"mode": "server", "rate": 1, "num_requests": 2,
                                          "probe": {"rate": 1}},
                                 "output": {"dir": str(tmp_path / "runs")}}))
    out = subprocess.run([sys.executable, "-m", "loadgen", "run", str(p), "--engine", "locust"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("loadgen: error: load.probe:"), lines
    assert not (tmp_path / "runs").exists()          # refused before anything was started
