"""Benchmark (not a test): how fast and how small is reading a big run.

    synthesise (seeded) a closed-loop run directory in a temp dir: N requests of 16-token
        answers (a role-only chunk, 16 token chunks, a usage-only chunk: 18 chunks each),
        written by loadgen.record.RecordWriter (the real writer), meta.json through the contract
    ─► `loadgen report DIR` (a subprocess: wall time, peak RSS by resource.getrusage(CHILDREN))
    ─► `loadgen report DIR --no-plots`
    ─► open_run(DIR).records() + .chunks() (a subprocess: wall time, its own peak RSS)
Goal (issue 28, at 100,000 requests, 118 MB records.jsonl, 1.8M chunks): `loadgen report`
<= 3 s and <= 300 MB; open_run tables <= 2 s. Prints a table, ends with one JSON line.

    python -m bench.report_speed [--requests 100000] [--keep DIR [--reuse]] [--seed 1] [--repeat N]
                                 [--against CHECKOUT]   (rows "base ...": that checkout's code)
Each row: the best of --repeat tries (wall seconds, CPU seconds user + sys, peak RSS) and every
try's wall time. Run it alone (it times subprocesses; another benchmark beside it skews the figures).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

import numpy as np

TOKENS = 16
LANES = 64
MS = 1_000_000


def synthesise(d: Path, n: int, seed: int = 1, arrow: bool = False) -> dict:
    """A closed-loop run of ``n`` requests on LANES lanes (seeded); returns its size. ``arrow``:
    the records as records.arrow (analysis.contract.columnar) instead of records.jsonl."""
    from analysis.contract import RunMeta
    from loadgen.record import Record, RecordWriter
    rng = np.random.default_rng(seed)
    d.mkdir(parents=True, exist_ok=True)
    t0 = 10_000_000_000
    lane_t = [t0 + k * 500_000 for k in range(LANES)]
    chunks_total = 0
    ttft = rng.normal(20, 2, n).clip(5) * MS
    itl = rng.gamma(4.0, 1.25, (n, TOKENS)).clip(0.2) * MS
    end_ns = t0
    from analysis.contract.columnar import ColumnarWriter
    store = d / ("records.arrow" if arrow else "records.jsonl")
    with (ColumnarWriter(store, flush_s=1e9) if arrow else RecordWriter(store)) as w:
        batch = []
        for i in range(n):
            lane = i % LANES
            sent = lane_t[lane]
            t = sent + int(ttft[i] * 0.5)
            ch = [[t, 0]]
            t = sent + int(ttft[i])
            first = t
            for k in range(TOKENS):
                if k:
                    t += int(itl[i, k])
                ch.append([t, 1])
            t += int(itl[i, 0])
            ch.append([t, 0])
            chunks_total += len(ch)
            batch.append(Record(
                id=i, phase="measured", scheduled_at_ns=sent, sent_at_ns=sent,
                first_chunk_at_ns=ch[0][0], first_token_at_ns=first, end_at_ns=t, chunks=ch,
                status="ok", http_status=200, prompt_tokens=96, prompt_tokens_source="usage",
                output_tokens=TOKENS, output_tokens_source="usage", usage_output_tokens=TOKENS,
                chunk_output_tokens=TOKENS, token_count_mismatch=False,
                requested_output_tokens=TOKENS, workload_prompt_tokens=96,
                finish_reason="length", output_chars=4 * TOKENS, coalesced_reads=0))
            lane_t[lane] = t + 50_000
            end_ns = max(end_ns, t)
            if len(batch) >= 4096:
                w.write_many(batch)
                batch = []
        w.write_many(batch)
    meta = {"loadgen_version": "bench", "scenario": "report-speed", "engine": "native",
            "mode": "concurrency", "target_url": "http://127.0.0.1:1", "model": "synthetic",
            "endpoint": "completions", "stream": True, "t0_ns": t0, "end_ns": end_ns,
            "in_flight_cap": LANES, "num_requests": n, "warmup_requests": 0,
            "records_written": n, "unsent_requests": 0, "min_duration_s": 0, "min_queries": 0,
            "slo": {"preset": None, "percentile": 99.0},
            "client_cpu": 0.2, "client_load": {"cpu_util": 0.2, "loop_lag_ms_p99": 0.5},
            "power_sources": ["none"], "interrupted": False,
            "client_transport": {"transport": "wire", "stamp_source": "kernel"}}
    (d / "meta.json").write_text(json.dumps(RunMeta.dump(meta), indent=2) + "\n")
    size = store.stat().st_size
    return {"requests": n, "chunks": chunks_total, "records_mb": round(size / 1e6, 1)}


OPEN_RUN = """
import resource, sys, time
t = time.perf_counter()
from loadgen import open_run
r = open_run(sys.argv[1])
a, b = r.records(), r.chunks()
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_SELF)
print(dt, len(a), len(b), ru.ru_maxrss, ru.ru_utime + ru.ru_stime)
"""

MAXRSS_CHILD = """
import resource, subprocess, sys, time
t = time.perf_counter()
rc = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL).returncode
dt = time.perf_counter() - t
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
print(rc, dt, ru.ru_maxrss, ru.ru_utime + ru.ru_stime)
"""


def _env(root: Optional[str]) -> dict:
    """Where a step runs: this checkout, or (``root``) another one's loadgen/ and analysis/,
    imported first (PYTHONPATH) and run from outside both trees (no cwd on sys.path)."""
    if root is None:
        return {}
    return {"env": {**os.environ, "PYTHONPATH": str(Path(root).resolve())},
            "cwd": tempfile.gettempdir()}


def timed(argv: list[str], root: Optional[str] = None) -> dict:
    """``argv`` in a subprocess (itself run by a small parent so that RUSAGE_CHILDREN holds
    this command's peak alone): rc, wall seconds, peak RSS in MB, CPU seconds (user + sys:
    less moved than the wall time by other work on the machine)."""
    out = subprocess.run([sys.executable, "-c", MAXRSS_CHILD, *argv], capture_output=True,
                         text=True, check=True, **_env(root)).stdout.split()
    return {"rc": int(out[0]), "s": round(float(out[1]), 2), "peak_mb": round(int(out[2]) / 1024),
            "cpu_s": round(float(out[3]), 2)}


def _open_run(d: Path, root: Optional[str] = None) -> dict:
    out = subprocess.run([sys.executable, "-c", OPEN_RUN, str(d)], capture_output=True,
                         text=True, check=True, **_env(root)).stdout.split()
    return {"rc": 0, "s": round(float(out[0]), 2), "peak_mb": round(int(out[3]) / 1024),
            "cpu_s": round(float(out[4]), 2), "rows": int(out[1]), "chunk_rows": int(out[2])}


def _best(tries: list[dict]) -> dict:
    """The fastest try, with every try's wall seconds (``s_all``) when there were several."""
    best = dict(min(tries, key=lambda v: v["s"]))
    if len(tries) > 1:
        best["s_all"] = [v["s"] for v in tries]
        best["cpu_s_all"] = [v["cpu_s"] for v in tries]
        best["peak_mb_all"] = [v["peak_mb"] for v in tries]
    return best


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=100_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--keep", default=None, help="synthesise into this directory and keep it")
    ap.add_argument("--reuse", action="store_true",
                    help="with --keep: time the run already synthesised there (same --requests)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="time each step this many times (interleaved); the best, and all")
    ap.add_argument("--against", default=None, metavar="CHECKOUT",
                    help="also time another checkout's code (e.g. a `git archive` of a base "
                         "commit), alternating with this one's, on the same run: an A/B")
    a = ap.parse_args(argv)
    tmp = Path(a.keep) if a.keep else Path(tempfile.mkdtemp(prefix="report_speed-"))
    d = tmp / "run"
    try:
        t = time.perf_counter()
        if a.reuse and a.keep and (d / "meta.json").is_file():
            n = sum(1 for _ in open(d / "records.jsonl", "rb"))
            size = {"requests": n, "chunks": n * (TOKENS + 2),
                    "records_mb": round((d / "records.jsonl").stat().st_size / 1e6, 1),
                    "synthesise_s": 0.0}
        else:
            size = synthesise(d, a.requests, a.seed)
            size["synthesise_s"] = round(time.perf_counter() - t, 1)
        sides = [("", None)] + ([("base ", a.against)] if a.against else [])
        tries: dict[str, list] = {}
        for _ in range(max(1, a.repeat)):
            for label, root in sides:
                loadgen = [sys.executable, "-m", "loadgen.cli"] \
                    if root or not shutil.which("loadgen") else [shutil.which("loadgen")]
                tries.setdefault(label + "report", []).append(
                    timed([*loadgen, "report", str(d.resolve())], root))
                tries.setdefault(label + "report --no-plots", []).append(
                    timed([*loadgen, "report", str(d.resolve()), "--no-plots"], root))
                tries.setdefault(label + "open_run records()+chunks()", []).append(
                    _open_run(d.resolve(), root))
        rows = {k: _best(v) for k, v in tries.items()}
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"run: {size['requests']:,} requests, {size['chunks']:,} chunks, "
          f"records.jsonl {size['records_mb']} MB (synthesised in {size['synthesise_s']} s); "
          f"cpus {os.cpu_count()}, load {os.getloadavg()[0]:.2f}")
    print(f"{'step':<34} {'rc':>3} {'wall s':>8} {'cpu s':>7} {'peak MB':>8}   all wall s")
    for k, v in rows.items():
        print(f"{k:<34} {v['rc']:>3} {v['s']:>8.2f} {v['cpu_s']:>7.2f} {v['peak_mb']:>8}   "
              + " ".join(f"{x:.2f}" for x in v.get("s_all", [v["s"]])))
    goal = {"report_s": 3.0, "report_peak_mb": 300, "open_run_s": 2.0}
    print(json.dumps({"bench": "report_speed", **size, "steps": rows, "goal": goal,
                      "loadavg": round(os.getloadavg()[0], 2)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
