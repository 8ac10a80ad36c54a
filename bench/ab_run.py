"""Benchmark (not a test): before/after of the client on the user's path, in one sitting.

    servers.calib (zero delay: each answer written at once from cached bytes), pinned to core 0
    `loadgen run` as a subprocess, pinned to core 1, for each of two checkouts, alternating:
        A = a git revision (a worktree under a temp dir), B = this working tree
    each run: concurrency C, N requests of T streamed tokens, one token per SSE event
    per run: events/s (output tokens / measured duration, from summary.json), the client's CPU
    seconds per 1000 events (rusage of the child), wall time

A drop is a regression until a same-sitting A/B says otherwise: rounds alternate A, B, A, B, ...
on the same cores, and the table shows every run, then min / median / max per side and the ratio
of medians. Ends with one JSON line.

    python -m bench.ab_run [--base REV|working-tree] [--rounds 3] [--concurrency 64] [--requests 400]
                           [--tokens 1000] [--transport wire|aiohttp]
                           [--a-procs N --b-procs M --client-cpus 0,1]   (e.g. --procs 1 vs 2)
                           [--a-set KEY=VALUE] [--b-set KEY=VALUE]   (e.g. api.traceparent=false)
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
from servers.calib import CalibrationServer

SERVER_CPU, CLIENT_CPU = 0, 1


def scenario(url: str, out: Path, conc: int, n: int, tokens: int) -> str:
    return json.dumps({
        "name": "ab", "target": {"url": url},
        "api": {"endpoint": "completions", "model": "calib-model", "stream": True, "probe": False,
                "timeout_s": 120},
        "workload": {"prompt_tokens": {"dist": "fixed", "value": 8},
                     "output_tokens": {"dist": "fixed", "value": tokens}, "seed": 0},
        "load": {"mode": "concurrency", "concurrency": conc, "num_requests": n, "warmup_requests": conc},
        "output": {"dir": str(out)}})


def one_run(tree: Path, url: str, work: Path, conc: int, n: int, tokens: int, transport: str,
            procs: int = 1, cpus: str = str(CLIENT_CPU), sets: tuple = ()) -> dict:
    out = Path(tempfile.mkdtemp(dir=work))
    sc = out / "scenario.yaml"
    sc.write_text(scenario(url, out / "runs", conc, n, tokens))    # JSON is YAML
    env = dict(os.environ, PYTHONPATH=str(tree), LOADGEN_HTTP=transport, LOADGEN_NO_CALIBRATION="1")
    cmd = ["taskset", "-c", cpus, sys.executable, "-m", "loadgen", "run", str(sc), "--json"]
    if procs != 1:
        cmd += ["--procs", str(procs)]
    for kv in sets:                               # a side's scenario settings (--a-set / --b-set)
        cmd += ["--set", kv]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    p = subprocess.run(cmd, cwd=tree, env=env, capture_output=True, text=True, timeout=900)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    runs = sorted((out / "runs").glob("*/summary.json"))
    if p.returncode != 0 or not runs:
        raise SystemExit(f"loadgen run failed in {tree} (exit {p.returncode}): {p.stderr[-800:]}")
    s = json.loads(runs[-1].read_text())
    meta = json.loads((runs[-1].parent / "meta.json").read_text())
    load_cpu = (meta.get("client_load") or {}).get("cpu_s")
    events = s.get("output_throughput")
    total = (n + conc) * tokens
    shutil.rmtree(out, ignore_errors=True)
    # the client's CPU during the load phase (warm-up + measured) per event: what a core can
    # carry, and steady under a noisy neighbour's steal, unlike events/s
    return {"events_s": events, "load_cpu_us_per_event": None if load_cpu is None else 1e6 * load_cpu / total,
            "cpu_ms_per_1k_events": 1e6 * cpu / total, "wall_s": wall, "ok": s.get("requests_completed")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--base", default="HEAD", help="git revision for side A (default HEAD)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--tokens", type=int, default=1000)
    ap.add_argument("--transport", default="wire", choices=("wire", "aiohttp"))
    ap.add_argument("--a-procs", type=int, default=1, help="--procs for side A")
    ap.add_argument("--b-procs", type=int, default=1, help="--procs for side B")
    ap.add_argument("--a-set", action="append", default=[], metavar="KEY=VALUE",
                    help="a scenario setting for side A only (loadgen run --set), repeatable")
    ap.add_argument("--b-set", action="append", default=[], metavar="KEY=VALUE",
                    help="the same for side B (e.g. --base working-tree --a-set api.traceparent=false)")
    ap.add_argument("--client-cpus", default=str(CLIENT_CPU),
                    help="taskset list for the client (e.g. 0,1: sharing the server's core)")
    a = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="loadgen-ab-"))
    if a.base == "working-tree":                 # both sides this tree (e.g. --procs 1 vs 2)
        base, rev = ROOT, "working tree"
    else:
        base = work / "base"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), a.base],
                       check=True, capture_output=True)
        rev = subprocess.run(["git", "-C", str(base), "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True).stdout.strip()
    sides = {"A": base, "B": ROOT}
    procs = {"A": a.a_procs, "B": a.b_procs}
    sets = {"A": tuple(a.a_set), "B": tuple(a.b_set)}
    rows: dict = {"A": [], "B": []}
    try:
        with CalibrationServer(ttft_ms=0, itl_ms=0, log=False, cpu=SERVER_CPU) as srv:
            for r in range(a.rounds):
                for side in ("A", "B"):
                    res = one_run(sides[side], srv.url, work, a.concurrency, a.requests, a.tokens,
                                  a.transport, procs[side], a.client_cpus, sets[side])
                    rows[side].append(res)
                    print(f"round {r + 1} {side}: {res['events_s']:>10,.0f} events/s  "
                          f"load-phase CPU {res['load_cpu_us_per_event']:5.2f} µs/event  "
                          f"process {res['cpu_ms_per_1k_events']:6.1f} CPU ms/1k events  "
                          f"{res['wall_s']:5.1f} s", flush=True)
    finally:
        if base != ROOT:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                           capture_output=True)
        shutil.rmtree(work, ignore_errors=True)
    out = {"base": rev, "head": "working tree", "a_procs": a.a_procs, "b_procs": a.b_procs,
           "a_set": a.a_set, "b_set": a.b_set,
           "client_cpus": a.client_cpus, "transport": a.transport, "concurrency": a.concurrency,
           "requests": a.requests, "tokens": a.tokens, "rounds": a.rounds,
           "load_average": os.getloadavg()[0]}
    print(f"\nA = {rev} (--procs {a.a_procs}{''.join(' --set ' + x for x in a.a_set)}), B = working tree "
          f"(--procs {a.b_procs}{''.join(' --set ' + x for x in a.b_set)}); {a.transport}, "
          f"concurrency {a.concurrency}, {a.requests} × {a.tokens} tokens, {a.rounds} rounds alternating, "
          f"client on cores {a.client_cpus}, server on core {SERVER_CPU}")
    for side in ("A", "B"):
        ev = [x["events_s"] for x in rows[side]]
        cpu = [x["cpu_ms_per_1k_events"] for x in rows[side]]
        lc = [x["load_cpu_us_per_event"] for x in rows[side]]
        out[side] = {"events_s": ev, "load_cpu_us_per_event": lc, "cpu_ms_per_1k_events": cpu}
        print(f"{side}: events/s min {min(ev):,.0f} / median {statistics.median(ev):,.0f} / "
              f"max {max(ev):,.0f};  load-phase CPU µs/event min {min(lc):.2f} / median "
              f"{statistics.median(lc):.2f} / max {max(lc):.2f};  process CPU ms per 1k events "
              f"median {statistics.median(cpu):.1f}")
    ratio = statistics.median(out["B"]["events_s"]) / statistics.median(out["A"]["events_s"])
    cratio = statistics.median(out["B"]["load_cpu_us_per_event"]) / statistics.median(
        out["A"]["load_cpu_us_per_event"])
    out["ratio_median_events_s"], out["ratio_median_load_cpu_per_event"] = ratio, cratio
    print(f"B / A: median events/s {ratio:.3f}; median load-phase CPU per event {cratio:.3f} "
          "(below 1: B is cheaper)")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
