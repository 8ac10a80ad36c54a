"""Benchmark (not a test): the Locust engine across K simulated hosts, each its own clock and network.

    bench.hosts.Hosts(K): the master + calibration server in one network namespace, K workers
        each in its own network + time (CLOCK_MONOTONIC + 10 min .. 3 days) + UTS namespace,
        veth pairs on a bridge, netem delay where the kernel has it (else said, and none)
    ``loadgen run --engine locust --master --workers K`` + K ``loadgen run --worker``
        (bench.hosts.Cluster); concurrency ``--streams`` per worker, completions streaming
    tcpdump on each worker's eth0 (inside its namespace) ─► bench.wire (pcap → HTTP → SSE) ─►
        each record matched by its prompt tag ─► TTFT / ITL error, client − wire (durations on
        one clock each: the worker's own stamps, the capture's own)
    meta.json locust.clock: each worker's offset and uncertainty; the harness knows each
        worker's true offset (its time namespace), so the offset's real error is printed too
Prints a table per K, ends with one JSON line. Needs root, tcpdump, dpkt.

    python -m bench.many_hosts [--ks 1,2,4] [--streams 4] [--requests 40] [--delay-ms 2]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from bench.hosts import netns
from bench.hosts.cluster import Cluster
from bench.hosts.netns import Hosts
from bench.wire import compare, http, pcap
from bench.wire.capture import Capture
from bench.wire.scenario import scenario, write_prompts

SEC = 1_000_000_000
OFFSETS_S = [600, 3600, 86400, 3 * 86400]        # ten minutes .. three days ahead
TTFT_MS, ITL_MS, TOKENS = 50.0, 10.0, 32


def one_k(k: int, args, tmp: Path) -> dict:
    offsets = [OFFSETS_S[i % len(OFFSETS_S)] + 60 * (i // len(OFFSETS_S)) for i in range(k)]
    load0 = os.getloadavg()
    with Hosts(k, offsets, delay_ms=args.delay_ms, jitter_ms=args.jitter_ms) as h:
        c = Cluster(h, tmp / f"k{k}")
        c.start_server(ttft_ms=TTFT_MS, itl_ms=ITL_MS)
        n = args.requests * k
        streams = args.streams * k
        prompts = write_prompts(c.dir / "prompts.jsonl", n + streams)
        tree = scenario(f"many-hosts-k{k}", c.url, prompts, streams, n, streams, TOKENS,
                        c.dir / "runs", f"k{k}")
        tree["api"]["model"] = "calib-model"
        path = c.write(tree)
        caps = []
        for i in range(k):
            cap = Capture(c.port, c.dir / f"w{i}.pcap", iface="eth0")
            cap.argv = ["ip", "netns", "exec", h.worker(i), *cap.argv]   # on the worker's veth
            caps.append(cap.start())
        try:
            t = time.perf_counter()
            c.start(path)
            rc = c.wait(args.run_timeout_s)
            wall = time.perf_counter() - t
        finally:
            cap_stats = [cap.stop() for cap in caps]
        if rc != 0:
            raise RuntimeError(f"K={k}: master exited {rc}\n{c.logs()}")
        meta, recs = c.meta(), c.records()
        summary = json.loads((c.run_dir / "summary.json").read_text())
        hosts = {str(w["index"]): w["host"] for w in meta["locust"]["worker_reports"]}
        pairs = []
        for i in range(k):
            exs = http.exchanges(pcap.tcp_connections(c.dir / f"w{i}.pcap", c.port))
            idx = [x for x, host in hosts.items() if host == h.hostname(h.worker(i))]
            mine = [r for r in recs if r["worker"] in idx]
            pairs += compare.match(exs, mine)["pairs"]
        err = compare.errors(pairs)
        desc = h.describe()
    clock = meta["locust"]["clock"]
    true_err = []
    for x, cl in clock["workers"].items():
        off = offsets[int(hosts[x].rsplit("-w", 1)[1])]
        true_err.append(abs(cl["shift_ns"] + off * SEC) / 1e6)
    measured = [r for r in recs if r["phase"] == "measured" and r["status"] == "ok"]
    events = sum(len(r["chunks"]) for r in measured)
    dur = summary.get("duration_s")
    return {
        "k": k, "offsets_s": offsets, "netem": desc["netem"], "rc": rc, "wall_s": round(wall, 1),
        "records": len(recs), "ok": len(measured),
        "methods": sorted({cl["method"] for cl in clock["workers"].values()}),
        "unplaced": clock["unplaced"],
        "clock_uncertainty_ms_max": (None if clock["max_uncertainty_ns"] is None
                                     else clock["max_uncertainty_ns"] / 1e6),
        "clock_true_error_ms_max": max(true_err) if true_err else None,
        "matched": len(pairs), "ttft_err_ms": err["ttft_err_ms"],
        "itl_gap_abs_err_ms_p99": err["itl_gap_abs_err_ms_p99"],
        "itl_err_ms_mean": err["itl_err_ms_mean"],
        "events_per_s": round(events / dur, 1) if dur else None,
        "requests_per_s": summary.get("request_throughput"),
        "verdict_valid": (summary.get("verdict") or {}).get("valid"),
        "capture": cap_stats, "loadavg_before": load0, "loadavg_after": os.getloadavg(),
    }


def _f(v: Optional[float], fmt: str = "{:.3f}") -> str:
    return "n/a" if v is None else fmt.format(v)


def table(rows: list[dict]) -> str:
    head = (f"{'K':>2} {'clock':>10} {'unc ms':>8} {'true err ms':>11} {'matched':>7} "
            f"{'TTFT err ms mean':>16} {'p99':>7} {'ITL err mean':>12} {'ITL |gap| p99':>13} "
            f"{'events/s':>9} "
            f"{'load':>5}")
    out = [head]
    for r in rows:
        e = r["ttft_err_ms"]
        out.append(f"{r['k']:>2} {','.join(r['methods']):>10} "
                   f"{_f(r['clock_uncertainty_ms_max']):>8} {_f(r['clock_true_error_ms_max']):>11} "
                   f"{r['matched']:>7} {_f(e['mean']):>16} {_f(e['p99']):>7} "
                   f"{_f(r['itl_err_ms_mean']):>12} "
                   f"{_f(r['itl_gap_abs_err_ms_p99']):>13} {_f(r['events_per_s'], '{:.0f}'):>9} "
                   f"{r['loadavg_before'][0]:>5.2f}")
    return "\n".join(out)


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ks", default="1,2,4", help="simulated worker hosts per row")
    ap.add_argument("--streams", type=int, default=4, help="concurrent streams per worker")
    ap.add_argument("--requests", type=int, default=40, help="measured requests per worker")
    ap.add_argument("--delay-ms", type=float, default=2.0, help="netem delay (where available)")
    ap.add_argument("--jitter-ms", type=float, default=0.0)
    ap.add_argument("--run-timeout-s", type=float, default=300.0)
    args = ap.parse_args(argv)
    why = netns.unavailable()
    if why:
        print(f"bench.many_hosts: {why}", file=sys.stderr)
        return 2
    ks = [int(x) for x in args.ks.split(",") if x]
    rows = []
    load0 = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="many-hosts-") as td:
        for k in ks:
            print(f"# K={k} (load {os.getloadavg()[0]:.2f})", file=sys.stderr, flush=True)
            rows.append(one_k(k, args, Path(td)))
    print(table(rows))
    if rows and rows[0]["netem"]["why"]:
        print(f"netem: {rows[0]['netem']['why']}")
    print(json.dumps({"bench": "many_hosts", "evidence": "measured",
                      "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      "server": {"ttft_ms": TTFT_MS, "itl_ms": ITL_MS, "tokens": TOKENS},
                      "cpus": os.cpu_count(), "loadavg_at_start": load0,
                      "loadavg_at_end": os.getloadavg(), "rows": rows},
                     separators=(",", ":"), default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
