"""A run in which no measured request exists exits 3 (README's exit-code table), never 0."""
import json
import subprocess
import sys
from pathlib import Path

import yaml

from loadgen.commands.run import exit_code

ROOT = Path(__file__).resolve().parents[3]


def test_no_measured_request_is_exit_3():
    assert exit_code({"requests_completed": 0, "requests_failed": 0, "requests_cancelled": 0},
                     False) == 3
    assert exit_code({"requests_completed": 0, "requests_cancelled": 5}, False) == 3
    assert exit_code({"requests_completed": 1}, False) == 0


def test_a_run_with_zero_measured_records_exits_3(calib_server, tmp_path):
    sc = {"target": {"url": calib_server.url}, "api": {"probe": False},
          "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                       "output_tokens": {"dist": "fixed", "value": 2}},
          # the measured phase ends 1 µs after it starts: no user sends anything
          "load": {"mode": "concurrency", "concurrency": 1, "duration_s": 1e-6},
          "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(sc))
    r = subprocess.run([sys.executable, "-m", "loadgen.cli", "run", str(p), "--json"], cwd=ROOT,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 3, r.stderr
    assert "no measured request was recorded" in r.stderr and "Traceback" not in r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])["summary"]
    assert not summary["requests_completed"]
