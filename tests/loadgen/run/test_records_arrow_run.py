"""output.records: arrow (issue 42): a one-process run writes records.arrow instead of
records.jsonl, and its summary, report and run dir read from it (-m slow: a real run)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analysis.contract.records import read_table
from analysis.contract.rundir import validate_run_dir
from bench.soak import scenario

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_a_run_writes_records_arrow(calib_server, tmp_path):
    p = tmp_path / "s.yaml"                               # bench.soak's closed loop
    p.write_text(scenario(calib_server.url, tmp_path, 4, 300, 4))      # JSON is YAML
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "loadgen", "run", str(p), "--json", "--set",
           "output.run_name=r", "--set", "output.report=none", "--set", "output.records=arrow"]
    out = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert out.returncode == 0, out.stderr
    d = tmp_path / "r"
    assert (d / "records.arrow").is_file() and not (d / "records.jsonl").exists()
    assert validate_run_dir(d) == []
    t = read_table(d / "records.arrow")
    assert len(t) >= 300 and all(len(r.chunks) for r in t.records if r.status == "ok")
    s = json.loads((d / "summary.json").read_text())
    assert s["verdict"]["valid"] and s["requests_completed"] == 300
