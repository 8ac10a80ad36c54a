"""Inputs that must be one line and exit 2 on a real ``python -m loadgen run``: a run directory
another run holds right now (loadgen.run.rundir.claim), an over-long run name."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import yaml

from loadgen.record import read_records

ROOT = Path(__file__).resolve().parents[3]


def scenario(calib_server, tmp_path, **output) -> Path:
    sc = {"name": "claim", "target": {"url": calib_server.url},
          "api": {"probe": False, "extra_body": {"calib": {"ttft_ms": 20, "itl_ms": 5}}},
          "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                       "output_tokens": {"dist": "fixed", "value": 4}},
          "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 10},
          "output": {"dir": str(tmp_path), "run_name": "same", "report": "none", **output}}
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(sc))
    return p


def launch(path: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "loadgen", "run", str(path), "--json"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_runs_started_together_never_share_a_run_directory(calib_server, tmp_path):
    path = scenario(calib_server, tmp_path)
    procs = [launch(path) for _ in range(3)]
    results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
    codes = sorted(rc for rc, _, _ in results)
    assert codes == [0, 2, 2], results
    for rc, out, err in results:
        if rc == 2:
            assert "Traceback" not in err
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("loadgen: error: output.run_name: "), err
    ids = [r["id"] for r in read_records(tmp_path / "same" / "records.jsonl")]
    assert sorted(ids) == list(range(10))                   # each id once: one run wrote here


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_a_sequential_rerun_is_still_refused_and_a_new_name_runs(calib_server, tmp_path):
    path = scenario(calib_server, tmp_path)
    first = subprocess.run([sys.executable, "-m", "loadgen", "run", str(path), "--json"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    again = subprocess.run([sys.executable, "-m", "loadgen", "run", str(path), "--json"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert again.returncode == 2 and "already holds a run" in again.stderr
    other = subprocess.run([sys.executable, "-m", "loadgen", "run", str(path), "--json",
                            "--set", "output.run_name=other"],
                           cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert other.returncode == 0, other.stderr
    assert json.loads(other.stdout)["summary"]["requests_completed"] == 10


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_an_overlong_run_name_is_one_line_and_exit_2(calib_server, tmp_path):
    for field, value in (("output.run_name", "r" * 300), ("name", "n" * 300)):
        path = scenario(calib_server, tmp_path)
        res = subprocess.run([sys.executable, "-m", "loadgen", "run", str(path),
                              "--set", f"{field}={value}"],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert res.returncode == 2, res.stderr
        assert "Traceback" not in res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("loadgen: error: "), res.stderr
        assert f"{field}: " in lines[0] and "200 bytes" in lines[0]
