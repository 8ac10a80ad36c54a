"""The Locust engine's CLI side is a runner.Run whose senders are its processes: the native
engine's signal rule holds for it (the first signal stops the load; a second one ends the run
at once, meta.json still written, summary.json left to ``loadgen report``)."""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("locust") is None:     # find_spec: never import locust here
    pytest.skip("locust not installed", allow_module_level=True)

from loadgen.record import read_records
from servers.calib import CalibrationServer
from servers.port_server import alive
from tests.loadgen.engine.locust.test_locust import ROOT, _has_ok, _poll, _scenario
from tests.support.procs import reaped


def _children(pid: int) -> list[int]:
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(x) for x in f.read().split()]


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def _pending(pid: int, sig: int) -> bool:
    """``sig`` is pending for ``pid`` (a stopped process keeps it there)."""
    with open(f"/proc/{pid}/status") as f:
        return any(line.startswith(("SigPnd:", "ShdPnd:")) and int(line.split()[1], 16)
                   >> (sig - 1) & 1 for line in f)


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_a_second_signal_ends_a_locust_run_at_once_as_natively(tmp_path):
    """The master is held (SIGSTOP) so that the run is surely still in its load phase: the first
    SIGINT is passed to it (seen pending), the second ends the run at once: every process killed,
    the parts still merged (one record per scheduled request), meta.json written and no summary."""
    with CalibrationServer(ttft_ms=20, itl_ms=5) as srv:
        p = _scenario(tmp_path, srv.url, {"mode": "server", "rate": 10, "num_requests": 60,
                                          "arrival": "constant"})
        run_dir = tmp_path / "runs" / "lc"
        proc = subprocess.Popen([sys.executable, "-m", "loadgen", "run", str(p), "--engine",
                                 "locust", "--workers", "2", "--json"], cwd=ROOT,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=dict(os.environ, PYTHONPATH=str(ROOT)))
        with reaped(proc):
            ldir = run_dir / "locust"
            assert _poll(lambda: (ldir / "master.json").exists() and any(
                _has_ok(f) for f in ldir.glob("records.worker-*.jsonl")), 120), "no ok record"
            master = next(c for c in _children(proc.pid) if "master" in _cmdline(c))
            workers = [json.loads(f.read_text())["pid"] for f in ldir.glob("worker-*.json")]
            os.kill(master, signal.SIGSTOP)
            proc.send_signal(signal.SIGINT)
            assert _poll(lambda: _pending(master, signal.SIGTERM), 30), "not passed to the master"
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert not [pid for pid in [master, *workers] if alive(pid)]
    recs = read_records(run_dir / "records.jsonl")
    assert sorted(r["id"] for r in recs) == list(range(60))
    meta = json.loads((run_dir / "meta.json").read_text())
    assert meta["engine"] == "locust" and meta["interrupted"]
    assert not (run_dir / "summary.json").exists()
