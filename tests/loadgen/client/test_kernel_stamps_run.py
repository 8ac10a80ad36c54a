"""End to end: `loadgen run` (the CLI, its own process, the default wire transport) against the
calibration server on loopback stamps every read in the kernel, and meta.json says so
(``client_transport.stamp_source == "kernel"``, every read kernel-stamped, no stamp from the future).
On Linux this is expected; a run that fell back to user-space stamps fails here instead of passing
quietly. Causal checks only: each record's stamps lie between its send and its end."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
KSTAMP_EXPECTED = sys.platform.startswith("linux") and not os.environ.get("LOADGEN_TESTS_NO_KERNEL_STAMPS")


@pytest.mark.skipif(not KSTAMP_EXPECTED, reason="kernel receive stamps are Linux's (SO_TIMESTAMPNS)")
def test_a_native_run_is_kernel_stamped_end_to_end(calib_server, tmp_path):
    sc = {"name": "kstamp", "target": {"url": calib_server.url},
          "api": {"extra_body": {"calib": {"ttft_ms": 5, "itl_ms": 2}}},
          "workload": {"tokenizer": "bytes", "prompt_tokens": {"dist": "fixed", "value": 16},
                       "output_tokens": {"dist": "fixed", "value": 8}},
          "load": {"mode": "concurrency", "concurrency": 2, "num_requests": 6, "warmup_requests": 1},
          "output": {"dir": str(tmp_path), "run_name": "run", "report": "none"}}
    path = tmp_path / "kernel_stamps.yaml"
    path.write_text(yaml.safe_dump(sc))
    env = {k: v for k, v in os.environ.items() if k not in ("LOADGEN_HTTP", "LOADGEN_ENGINE")}
    p = subprocess.run([sys.executable, "-m", "loadgen", "run", str(path), "--json"], cwd=ROOT, env=env,
                       capture_output=True, text=True, timeout=240)
    assert p.returncode == 0, p.stderr[-2000:]
    d = tmp_path / "run"
    ct = json.loads((d / "meta.json").read_text())["client_transport"]
    assert ct["transport"] == "wire" and ct["stamp_source"] == "kernel", ct
    assert ct["reads"] > 0 and ct["kernel_stamped_reads"] == ct["reads"], ct
    assert ct["future_stamps"] == 0 and ct["clock"]["bracket_ns"] >= 0
    recs = [json.loads(x) for x in (d / "records.jsonl").read_text().splitlines()]
    assert len(recs) == 7 and all(r["status"] == "ok" for r in recs)
    for r in recs:
        stamps = [t for t, _ in r["chunks"]]
        assert stamps == sorted(stamps) and r["sent_at_ns"] <= stamps[0] and stamps[-1] <= r["end_at_ns"]
