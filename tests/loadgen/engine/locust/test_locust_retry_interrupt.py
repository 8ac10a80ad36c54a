"""Ctrl-C during an api.retry wait keeps the attempts on every engine (issue 41 item 7): the
record is ``cancelled`` with ``attempts`` and ``attempt_log`` (the one 429 so far) and latencies
from the first send. Before the fix the Locust worker wrote the in-flight snapshot without them.
A real ``loadgen run`` subprocess against a calibration server of this module's own."""
from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from loadgen.record import read_records
from servers.calib import CalibrationServer
from tests.support.procs import ROOT, interrupt_after, scenario_file


@pytest.fixture(scope="module")
def calib():
    with CalibrationServer() as s:
        yield s


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
@pytest.mark.parametrize("engine", ["native", "locust"])
def test_ctrl_c_in_a_retry_wait_keeps_the_attempts(calib, tmp_path, engine):
    if engine == "locust":
        if importlib.util.find_spec("locust") is None:
            pytest.skip("locust is not installed")
    t = {"name": "w", "target": {"url": calib.url},
         "api": {"model": "calib-model", "probe": False,
                 "extra_body": {"calib": {"rate_limit_first": 5, "retry_after": "300"}},
                 "retry": {"on": [429], "max_attempts": 3, "max_wait_s": 600}},
         "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                      "output_tokens": {"dist": "fixed", "value": 8},
                      "seed": {"native": 51, "locust": 52}[engine]},
         "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 1},
         "output": {"dir": str(tmp_path), "run_name": "sig", "report": "none"}}
    calib.clear()
    path = scenario_file(tmp_path, t)
    proc = subprocess.Popen([sys.executable, "-m", "loadgen", "run", str(path), "--engine",
                             engine], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    interrupt_after(proc, lambda: any(e.get("status") == 429 for e in calib.log()), 90,
                    timeout_s=60)
    assert proc.returncode == 130
    (r,) = read_records(tmp_path / "sig" / "records.jsonl")
    assert (r["status"], r["http_status"]) == ("cancelled", 429), r
    assert r["attempts"] == 1 and [a[0] for a in r["attempt_log"]] == [429], r
    assert r["sent_at_ns"] == r["attempt_log"][0][1]
