"""LOADGEN_RECORDS=arrow (issue 42): a one-process run writes records.arrow instead of
records.jsonl, and its summary, report and run dir read from it (-m slow: a real run)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from analysis.contract.records import read_table
from analysis.contract.rundir import validate_run_dir

ROOT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_a_run_writes_records_arrow(calib_server, tmp_path):
    sc = {"name": "arrow", "target": {"url": calib_server.url},
          "api": {"probe": False, "extra_body": {"calib": {}}},
          "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                       "output_tokens": {"dist": "fixed", "value": 4}},
          "load": {"mode": "concurrency", "concurrency": 4, "num_requests": 300}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(sc))
    out = subprocess.run([sys.executable, "-m", "loadgen", "run", str(p), "--json",
                          "--set", f"output.dir={tmp_path}", "--set", "output.run_name=r",
                          "--set", "output.report=none"], cwd=ROOT, capture_output=True,
                         text=True, timeout=300,
                         env=dict(os.environ, LOADGEN_RECORDS="arrow", PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr
    d = tmp_path / "r"
    assert (d / "records.arrow").is_file() and not (d / "records.jsonl").exists()
    assert validate_run_dir(d) == []
    t = read_table(d / "records.arrow")
    assert len(t) >= 300 and all(len(r.chunks) for r in t.records if r.status == "ok")
    s = json.loads((d / "summary.json").read_text())
    assert s["verdict"]["valid"] and s["requests_completed"] == 300
