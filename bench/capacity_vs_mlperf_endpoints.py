"""Benchmark (not a test): loadgen's per-core speed beside the fastest published Python client.

    the MLPerf Inference-Endpoints project's max_throughput_server (its own, --stream,
    --stream-interval 1, --output-length 1000: 1,000 one-character SSE events per answer), core 0
    client on core 1, alternating, ROUNDS times each:
        theirs  inference_endpoint.utils.benchmark_httpclient -w 1 -c 64 --stream (its SSE-pkts/s)
        ours    `loadgen run` (a subprocess, as a user runs it): chat, stream, concurrency 64,
                every event kept with its kernel receive stamp (events/s from summary.json)
    per run: events/s, requests/s, the client process's CPU µs per event (rusage of the child,
    start-up included, for both), and for loadgen also its load phase alone (meta.json client_load)

Their package is not part of loadgen and is not installed by anything here: pass an interpreter
in which ``inference_endpoint`` imports (``--peer-python``). Prints a table and the ratio of medians,
then one JSON line.

    python -m bench.capacity_vs_mlperf_endpoints --peer-python PATH [--rounds 3] [--duration 10]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVER_CPU, CLIENT_CPU = 0, 1
TOKENS, CONC = 1000, 64


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_cpu(run) -> tuple:
    """(result of run(), CPU seconds of the children it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = run()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return out, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def theirs(peer: str, url: str, duration: float) -> dict:
    cmd = ["taskset", "-c", str(CLIENT_CPU), peer, "-m", "inference_endpoint.utils.benchmark_httpclient",
           "--endpoint", url + "/v1/chat/completions", "-w", "1", "-c", str(CONC),
           "--max-concurrency", str(CONC), "-d", str(duration), "--stream", "--stream-interval", "1",
           "--no-pin"]
    p, cpu = child_cpu(lambda: subprocess.run(cmd, capture_output=True, text=True, timeout=duration + 120))
    text = p.stdout + p.stderr
    ev = re.findall(r"SSE-pkts/s:\s+([\d,]+)", text)
    rq = re.findall(r"Recv Rate:\s+([\d,]+)", text)
    total = re.findall(r"Total Recv:\s+([\d,]+)", text)
    if p.returncode != 0 or not ev or not total:
        raise SystemExit(f"their client failed (exit {p.returncode}): {text[-800:]}")
    events = int(total[-1].replace(",", "")) * TOKENS
    return {"events_s": float(ev[-1].replace(",", "")), "requests_s": float(rq[-1].replace(",", "")),
            "cpu_us_per_event": 1e6 * cpu / events, "load_cpu_us_per_event": None}


def ours(url: str, duration: float, expect_events_s: float, work: Path) -> dict:
    n = max(200, int(expect_events_s * duration / TOKENS))
    sc = work / "scenario.yaml"
    sc.write_text(json.dumps({
        "name": "vs-mlperf-endpoints", "target": {"url": url},
        "api": {"endpoint": "chat", "model": "max-tp", "stream": True, "probe": False, "timeout_s": 120},
        "workload": {"prompt_tokens": {"dist": "fixed", "value": 8},
                     "output_tokens": {"dist": "fixed", "value": TOKENS}, "seed": 0},
        "load": {"mode": "concurrency", "concurrency": CONC, "num_requests": n, "warmup_requests": CONC},
        "output": {"dir": str(work / "runs")}}))
    env = dict(os.environ, LOADGEN_NO_CALIBRATION="1")
    cmd = ["taskset", "-c", str(CLIENT_CPU), sys.executable, "-m", "loadgen", "run", str(sc), "--json"]
    p, cpu = child_cpu(lambda: subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True,
                                              timeout=duration * 20 + 300))
    if p.returncode != 0:
        raise SystemExit(f"loadgen run failed (exit {p.returncode}): {p.stderr[-800:]}")
    run_dir = Path(json.loads(p.stdout)["run_dir"])
    s = json.loads((run_dir / "summary.json").read_text())
    meta = json.loads((run_dir / "meta.json").read_text())
    load_cpu = (meta.get("client_load") or {}).get("cpu_s")
    events = (n + CONC) * TOKENS
    return {"events_s": s["output_throughput"], "requests_s": s["request_throughput"],
            # the whole process (start-up, summary and report included), as for theirs; and the
            # load phase alone (warm-up + measured), which their harness does not report
            "cpu_us_per_event": 1e6 * cpu / events,
            "load_cpu_us_per_event": None if load_cpu is None else 1e6 * load_cpu / events}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--peer-python", required=True,
                    help="an interpreter in which the package inference_endpoint imports")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per run of their client")
    a = ap.parse_args()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    srv = subprocess.Popen(["taskset", "-c", str(SERVER_CPU), a.peer_python, "-m",
                            "inference_endpoint.testing.max_throughput_server", "--port", str(port),
                            "--stream", "--stream-interval", "1", "--output-length", str(TOKENS),
                            "--num-workers", "1"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    rows: dict = {"theirs": [], "ours": []}
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(a.rounds):
                t = theirs(a.peer_python, url, a.duration)
                rows["theirs"].append(t)
                o = ours(url, a.duration, t["events_s"], Path(tmp))
                rows["ours"].append(o)
                for who, x in (("theirs", t), ("ours", o)):
                    lc = x["load_cpu_us_per_event"]
                    print(f"round {r + 1} {who:6}: {x['events_s']:>10,.0f} events/s  {x['requests_s']:7.1f} req/s  "
                          f"client process CPU {x['cpu_us_per_event']:.2f} µs/event"
                          + (f" (load phase {lc:.2f})" if lc is not None else ""), flush=True)
    finally:
        srv.terminate()
        srv.wait(10)
    med = {w: statistics.median(x["events_s"] for x in rows[w]) for w in rows}
    cpu = {w: statistics.median(x["cpu_us_per_event"] for x in rows[w]) for w in rows}
    ratio = med["ours"] / med["theirs"]
    print(f"\nmedian events/s: theirs {med['theirs']:,.0f}, ours {med['ours']:,.0f} → ours/theirs {ratio:.2f}×; "
          f"client process CPU per event (start-up included): theirs {cpu['theirs']:.2f} µs, ours {cpu['ours']:.2f} µs "
          f"(load average {os.getloadavg()[0]:.2f})")
    print(json.dumps({"bench": "capacity_vs_mlperf_endpoints", "evidence": "measured", "rounds": a.rounds,
                      "server": "max_throughput_server --stream --stream-interval 1 --output-length 1000",
                      "client_cpu": CLIENT_CPU, "concurrency": CONC, "rows": rows, "median_events_s": med,
                      "median_cpu_us_per_event": cpu, "ratio_events_s": ratio,
                      "load_average": os.getloadavg()}))


if __name__ == "__main__":
    main()
