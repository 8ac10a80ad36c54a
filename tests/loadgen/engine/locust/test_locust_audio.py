"""api.endpoint transcriptions on the Locust engine (`loadgen run --engine locust --workers 2`):
each worker builds the same seeded clip pool and sends request k clip k mod pool, as the native
engine does; the calibration server saw every upload (GET /calib/log ``audio``)."""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

if importlib.util.find_spec("locust") is None:
    pytest.skip("the locust extra is not installed (pip install 'loadgen[locust]')",
                allow_module_level=True)

from analysis.contract import validate_run_dir
from loadgen.record import read_records
from tests.loadgen.run.test_audio_run import ROOT, scenario


@pytest.mark.slow       # minutes of processes on CI's 2 cores: -m slow
def test_transcriptions_on_locust_workers(calib_server, tmp_path):
    p = scenario(tmp_path, calib_server.url, "a-locust", {"format": "vllm"})
    calib_server.clear()
    r = subprocess.run([sys.executable, "-m", "loadgen", "run", str(p), "--engine", "locust",
                        "--workers", "2", "--json"], capture_output=True, text=True,
                       timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout)
    recs = read_records(Path(out["run_dir"]) / "records.jsonl")
    assert sorted(x["id"] for x in recs) == list(range(7))
    assert all(x["status"] == "ok" and x["input_audio_s"] == 0.5 and x["output_tokens"] == 5
               for x in recs)
    assert {x["worker"] for x in recs} == {"0", "1"}
    seen = [e for e in calib_server.log() if e["path"].endswith("/transcriptions")]
    assert sum(e["audio"]["seconds"] == 0.5 for e in seen) == 7
    assert out["summary"]["audio"]["requests"] == 6 and out["summary"]["audio"]["rtfx"] > 0
    assert validate_run_dir(Path(out["run_dir"])) == []
