"""Benchmark (not a test): the most streamed tokens/s loadgen sustains, per load engine.

    calibration server (subprocess, zero delay, no log; CPU 0) ◄── the real engines, end to end:
        native            loadgen.run.runner.run_scenario (asyncio + aiohttp, this process)
        locust, 1 worker  loadgen.engine.locust.run_locust, --workers 1 (master + 1 worker)
        locust, 2 workers the same with 2 worker processes
    each: closed loop (mode concurrency) at each concurrency level for --duration s of
    128-token streams; throughput from the run's own records.jsonl (ok requests' chunk tokens
    over first send .. last end), not from Locust's statistics.
The machine is small (2 cores) and shared: a second worker competes with the server and the
first worker for the same cores, so "2 workers" measures this box, not Locust's scaling.
Prints a table and ends with ONE JSON line.

    python -m bench.locust_capacity [--quick] [--levels 32,128,256] [--duration 4]
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

TOKENS = 128


def _scenario(tmp: Path, url: str, name: str, conc: int, duration_s: float) -> Path:
    import yaml
    tree = {"name": name, "target": {"url": url},
            "api": {"model": "calib-model", "timeout_s": 60},
            "workload": {"prompt_tokens": {"dist": "fixed", "value": 8},
                         "output_tokens": {"dist": "fixed", "value": TOKENS}},
            "load": {"mode": "concurrency", "concurrency": conc, "duration_s": duration_s,
                     "drain_timeout_s": 10},
            "output": {"dir": str(tmp / "runs"), "run_name": name, "report": "none"}}
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(tree))
    return p


def _rates(run_dir: Path) -> dict:
    from loadgen.record import read_records
    recs = [r for r in read_records(run_dir / "records.jsonl") if r["phase"] == "measured"]
    ok = [r for r in recs if r["status"] == "ok"]
    if not ok:
        return {"tokens_s": None, "req_s": None, "ok": 0, "errors": len(recs)}
    span = (max(r["end_at_ns"] for r in ok) - min(r["sent_at_ns"] for r in ok)) / 1e9
    toks = sum(r["chunk_output_tokens"] or 0 for r in ok)
    meta = json.loads((run_dir / "meta.json").read_text())
    return {"tokens_s": toks / span, "req_s": len(ok) / span, "ok": len(ok),
            "errors": len(recs) - len(ok), "client_cpu": meta.get("client_cpu"),
            "per_worker_cpu": [w.get("cpu_util") for w in
                               (meta.get("locust") or {}).get("worker_reports") or []]}


def one(engine: str, workers: int, url: str, conc: int, duration_s: float, tmp: Path) -> dict:
    from loadgen.scenario.loader import load_scenario
    name = f"{engine}-{workers}-{conc}"
    p = _scenario(tmp, url, name, conc, duration_s)
    sc = load_scenario(p)
    t = time.perf_counter()
    if engine == "native":
        from loadgen.run.runner import run_scenario
        res = run_scenario(sc)
    else:
        from loadgen.engine.locust.run import LocustOptions, run_locust
        res = run_locust(sc, LocustOptions(workers=workers, scenario_path=str(p)))
    out = {"engine": engine, "workers": workers, "concurrency": conc,
           "wall_s": time.perf_counter() - t, **_rates(res.run_dir)}
    shutil.rmtree(res.run_dir, ignore_errors=True)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one level, 2 s each")
    ap.add_argument("--levels", default="32,128,256")
    ap.add_argument("--duration", type=float, default=4.0)
    args = ap.parse_args()
    levels = [64] if args.quick else [int(x) for x in args.levels.split(",")]
    dur = 2.0 if args.quick else args.duration
    from servers.calib import CalibrationServer
    engines = [("native", 1), ("locust", 1), ("locust", 2)]
    rows = []
    t_start = time.time()
    with tempfile.TemporaryDirectory() as d, CalibrationServer(log=False, cpu=0) as server:
        for engine, w in engines:
            for conc in levels:
                rows.append(one(engine, w, server.url, conc, dur, Path(d)))
                r = rows[-1]
                print(f"  {engine:7s} w={w} c={conc:4d}: {r['tokens_s'] or 0:10.0f} tok/s "
                      f"{r['req_s'] or 0:7.1f} req/s  errors {r['errors']}", file=sys.stderr)
    best = {}
    for r in rows:
        key = f"{r['engine']}_{r['workers']}w" if r["engine"] == "locust" else "native"
        if r["tokens_s"] and r["tokens_s"] > (best.get(key) or {}).get("tokens_s", 0):
            best[key] = r
    print(f"{'engine':14s} {'conc':>5s} {'tokens/s':>10s} {'req/s':>8s} {'err':>5s} "
          f"{'cpu(max proc)':>13s}")
    for r in rows:
        label = "native" if r["engine"] == "native" else f"locust {r['workers']}w"
        cpu = f"{r['client_cpu']:.2f}" if r.get("client_cpu") is not None else "n/a"
        print(f"{label:14s} {r['concurrency']:5d} {r['tokens_s'] or 0:10.0f} "
              f"{r['req_s'] or 0:8.1f} {r['errors']:5d} {cpu:>13s}")
    print("best: " + ", ".join(f"{k} {v['tokens_s']:.0f} tok/s at c={v['concurrency']}"
                               for k, v in best.items()))
    print(json.dumps({"bench": "locust_capacity", "evidence": "measured", "tokens": TOKENS,
                      "duration_s": dur, "levels": levels, "cores": _cores(),
                      "best_tokens_s": {k: round(v["tokens_s"]) for k, v in best.items()},
                      "rows": rows, "elapsed_s": round(time.time() - t_start, 1)},
                     separators=(",", ":"), default=float))
    return 0


def _cores():
    import os
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count()


if __name__ == "__main__":
    sys.exit(main())
