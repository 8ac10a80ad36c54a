"""Benchmark (not a test): many slow streams held open at once, every one recorded right.

    servers.calib (one token a second: every stream stays open ~T s) ◄── `loadgen run --procs P`
        concurrency N, N requests (all N streams open together), wire transport
    ─► records.jsonl: counts by (phase, status) and the non-ok ones by (error_kind, error)

Issue 29 item 2b: 20,000 streams with --procs 2 once failed 18 requests with "Bad file
descriptor" (a descriptor used after loadgen closed it, blamed on the server as `connection`).
The server is one process under the same RLIMIT_NOFILE as the client: keep N below that limit
minus its own files (this box: hard limit 20,000, so N = 18,000). Ends with one JSON line.

    python -m bench.held_streams [--streams 18000] [--procs 2] [--tokens 8]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.record_counts import count, print_counts
from servers.calib import CalibrationServer

ROOT = Path(__file__).resolve().parents[1]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=18_000)
    ap.add_argument("--procs", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=8)
    a = ap.parse_args()
    with CalibrationServer(ttft_ms=0, itl_ms=1000, log=False) as srv, \
            tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        sc = out / "s.yaml"
        sc.write_text(json.dumps({                                 # JSON is YAML
            "name": "held", "target": {"url": srv.url},
            "api": {"endpoint": "completions", "model": "calib-model", "stream": True,
                    "probe": False, "timeout_s": 300, "connect_timeout_s": 120},
            "workload": {"prompt_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": a.tokens}, "seed": 0},
            "load": {"mode": "concurrency", "concurrency": a.streams, "num_requests": a.streams},
            "output": {"dir": str(out / "runs"), "report": "none"}}))
        t0 = time.monotonic()
        p = subprocess.run([sys.executable, "-m", "loadgen", "run", str(sc), "--procs",
                            str(a.procs)], cwd=ROOT, capture_output=True, text=True,
                           env=dict(os.environ, LOADGEN_NO_CALIBRATION="1"), timeout=1800)
        wall = time.monotonic() - t0
        counts: collections.Counter = collections.Counter()
        errors: collections.Counter = collections.Counter()
        for d in (out / "runs").iterdir():
            with open(d / "records.jsonl") as f:
                for line in f:
                    count(json.loads(line), counts, errors)
    print(f"{a.streams:,} streams held at once, --procs {a.procs}, {a.tokens} tokens at 1/s: "
          f"exit {p.returncode}, {wall:.0f} s (RLIMIT_NOFILE "
          f"{resource.getrlimit(resource.RLIMIT_NOFILE)})")
    print_counts(counts, errors, 10)
    if p.returncode != 0:
        print(p.stderr[-2000:])
    print(json.dumps({"bench": "held_streams", "streams": a.streams, "procs": a.procs,
                      "rc": p.returncode, "wall_s": round(wall, 1), "counts": counts,
                      "errors": dict(errors)}))
    return 0 if p.returncode == 0 and not errors else 1


if __name__ == "__main__":
    sys.exit(main())
