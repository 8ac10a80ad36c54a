"""``loadgen run --engine locust --metrics-port P``: /metrics served while the Locust workers
run (the exporter follows their ledgers, locust/records.worker-i.jsonl), the port freed when
the run is interrupted. Locust (gevent) runs in subprocesses only, never in pytest."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
import urllib.error
from pathlib import Path

import pytest
import yaml

if importlib.util.find_spec("locust") is None:
    pytest.skip("the locust extra is not installed (pip install 'loadgen[locust]')",
                allow_module_level=True)

from loadgen.targets.managed import free_port
from tests.loadgen.live.test_process import port_is_free, requests_total, scrape, scrape_until
from tests.support.procs import interrupt, reaped

ROOT = Path(__file__).resolve().parents[4]


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_served_during_a_locust_run_and_freed_when_it_is_interrupted(calib_server, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({
        "name": "live", "target": {"url": calib_server.url},
        "api": {"model": "calib-model", "extra_body": {"calib": {"ttft_ms": 20, "itl_ms": 10}}},
        "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 8},
                     "output_tokens": {"dist": "fixed", "value": 4}},
        "load": {"mode": "concurrency", "concurrency": 2, "duration_s": 600},
        "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}}))
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "loadgen.cli", "run", str(path), "--json",
                             "--engine", "locust", "--workers", "2", "--metrics-port", str(port)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}/metrics"
    with reaped(proc):
        seen = scrape_until(url, timeout_s=180, alive=lambda: proc.poll() is None, every_s=0.1)
        assert seen is not None, "no record counted on /metrics while the Locust run went"
        assert seen[("loadgen_output_tokens_total", ())] > 0
        assert ("loadgen_in_flight", ()) in seen          # the progress counters' copy
        out, err = interrupt(proc, 180)
    assert proc.returncode == 130, err
    run_dir = Path(json.loads(out.strip().splitlines()[-1])["run_dir"])
    recs = [json.loads(x) for x in (run_dir / "records.jsonl").read_text().splitlines()]
    ok = [r for r in recs if r["status"] == "ok"]
    assert len(ok) >= requests_total(seen)            # what was served had been written
    assert port_is_free(port)
    with pytest.raises((OSError, urllib.error.URLError)):
        scrape(url)
