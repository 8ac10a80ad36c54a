"""Start-up GETs are bounded by the run's own timeout (issue 29 item 7): against a server that
accepts connections and never answers, ``api.timeout_s: 1`` must not wait api.connect_timeout_s
(30 s by default) on each readiness / self-description GET."""
import json
import socket
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from loadgen.run.preflight import startup_get_s

ROOT = Path(__file__).resolve().parents[3]


def test_a_start_up_get_waits_the_shorter_of_the_two_timeouts():
    assert startup_get_s(SimpleNamespace(connect_timeout_s=30.0, timeout_s=1.0)) == 1.0
    assert startup_get_s(SimpleNamespace(connect_timeout_s=2.0, timeout_s=600.0)) == 2.0


@pytest.mark.slow       # seconds of processes each: -m slow (CI's budget)
def test_a_black_hole_costs_timeout_s_not_connect_timeout_s(tmp_path):
    hole = socket.socket()                  # the kernel completes handshakes; nobody reads
    hole.bind(("127.0.0.1", 0))
    hole.listen(64)
    try:
        sc = {"name": "hole", "target": {"url": f"http://127.0.0.1:{hole.getsockname()[1]}"},
              "api": {"model": "m", "probe": False, "timeout_s": 1},
              "workload": {"prompt_tokens": {"dist": "fixed", "value": 4},
                           "output_tokens": {"dist": "fixed", "value": 4}},
              "load": {"mode": "concurrency", "concurrency": 1, "num_requests": 2,
                       "warmup_requests": 0},
              "output": {"dir": str(tmp_path / "runs")}}
        p = tmp_path / "s.yaml"
        p.write_text(json.dumps(sc))
        # 30 s per start-up GET before: the run would not end within this bound
        out = subprocess.run([sys.executable, "-m", "loadgen", "run", str(p), "--json"], cwd=ROOT,
                             capture_output=True, text=True, timeout=25)
    finally:
        hole.close()
    assert "Traceback" not in out.stderr
    recs = [json.loads(line) for d in (tmp_path / "runs").iterdir()
            for line in (d / "records.jsonl").read_text().splitlines()]
    assert [r["error_kind"] for r in recs] == ["timeout", "timeout"]
