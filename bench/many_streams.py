"""Benchmark (not a test): how many slow streams one load machine holds at once (issue 32's 100,000).

    bench.hosts.Hosts(1): the servers in one network namespace, the client in another (its own
        ephemeral port range, widened to 1024-65535 there only; no descriptor limit shared with
        the server, as bench.held_streams had: 20,000 for both)
    --servers S calibration servers on S ports of 10.77.0.1 (each (address, port) its own
        4-tuple space of ~64,000 client ports; each server process its own descriptor limit),
        TTFT 0, one token every --itl-s seconds, --tokens tokens: every stream stays open
    ``loadgen run --procs P`` (native engine, wire transport, kernel stamps), concurrency N,
        N requests, target.urls = the S servers (round robin); RLIMIT_NOFILE raised (root)
    sampled every 2 s: established TCP connections in the client's namespace (``ss -s``), the
        client's and servers' resident memory, the host's MemAvailable (a guard stops the run
        below --min-free-gib: a measured stop, said so)
    tcpdump on the client's eth0, a sample: the first server port's connections whose client
        port is 0 mod --sample (a BPF filter) ─► bench.wire ─► TTFT error, client − wire
    ─► streams held at the peak, bytes per stream (client RSS at the peak / held, and the
       marginal (RSS peak − RSS at the first connection) / held), records by status, where it
       stopped (the peak short of N: the first errors, the guard, or the time bound)
Ends with one JSON line. Needs root (namespaces, the descriptor limits).

    python -m bench.many_streams [--streams 100000] [--procs 2] [--servers 4] [--itl-s 60]
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Optional

from bench.hosts import netns
from bench.hosts.cluster import ROOT, child_env
from bench.hosts.netns import MASTER_IP, Hosts
from bench.record_counts import count, print_counts
from bench.wire import compare, http, pcap
from bench.wire.capture import Capture
from bench.wire.scenario import write_prompts

SAMPLE_S = 2.0


def _nofile(n: int):
    """RLIMIT_NOFILE n, the hard limit too where this process may raise it (CAP_SYS_RESOURCE),
    else the soft one up to the hard limit."""
    def pre() -> None:
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (n, max(n, hard)))
        except (ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(n, hard), hard))
    return pre


def _hard_limit() -> tuple[int, bool]:
    """(the descriptor limit one process can have, whether that is above today's hard limit)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard + 1))
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
        return 1 << 20, True
    except (ValueError, OSError):
        return hard, False


def _rss_kib(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            for ln in Path(f"/proc/{p}/status").read_text().splitlines():
                if ln.startswith("VmRSS:"):
                    total += int(ln.split()[1])
        except OSError:
            pass
    return total


def _pids(ns: str) -> list[int]:
    out = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout
    return [int(x) for x in out.split()]


def _estab(ns: str) -> int:
    out = subprocess.run(["ip", "netns", "exec", ns, "ss", "-s"], capture_output=True,
                         text=True).stdout
    mo = re.search(r"estab (\d+)", out)
    return int(mo.group(1)) if mo else 0


def _mem_available_gib() -> float:
    for ln in Path("/proc/meminfo").read_text().splitlines():
        if ln.startswith("MemAvailable:"):
            return int(ln.split()[1]) / 2**20
    return float("nan")


def _tcp_mem_pages() -> Optional[int]:
    mo = re.search(r"TCP: .* mem (\d+)", Path("/proc/net/sockstat").read_text())
    return int(mo.group(1)) if mo else None


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--streams", type=int, default=100_000)
    ap.add_argument("--procs", type=int, default=None,
                    help="client sender processes (default: enough for the descriptor limit)")
    ap.add_argument("--servers", type=int, default=None,
                    help="server processes / ports (default: as many as the client's)")
    ap.add_argument("--tokens", type=int, default=6)
    ap.add_argument("--itl-s", type=float, default=60.0, help="seconds between two tokens")
    ap.add_argument("--min-free-gib", type=float, default=2.0,
                    help="stop the run when the host's MemAvailable falls below this")
    ap.add_argument("--timeout-s", type=float, default=900.0)
    ap.add_argument("--sample", type=int, default=64,
                    help="capture 1 in this many of the first server port's connections")
    a = ap.parse_args(argv)
    why = netns.unavailable()
    if why:
        print(f"bench.many_streams: {why}", file=sys.stderr)
        return 2
    n, load0 = a.streams, os.getloadavg()
    fd_max, raisable = _hard_limit()
    fit = max(1, fd_max - 1024)                 # streams one process can hold
    a.procs = a.procs or max(2, -(-n // fit))
    a.servers = a.servers or max(2, -(-n // fit))
    limit_note = (f"RLIMIT_NOFILE: {fd_max:,} per process, "
                  + ("raisable (CAP_SYS_RESOURCE)" if raisable else
                     "the hard limit, not raisable here (no CAP_SYS_RESOURCE)")
                  + f": {a.procs} client and {a.servers} server processes")
    print(f"# {limit_note}", file=sys.stderr, flush=True)
    per_server = -(-n // a.servers) + 1024
    per_proc = -(-n // a.procs) + 1024
    samples: list[dict] = []
    stopped_by = None
    with Hosts(1, [0]) as h, tempfile.TemporaryDirectory(prefix="many-streams-") as tmp:
        out = Path(tmp)
        cl = h.worker(0)
        subprocess.run(["ip", "netns", "exec", cl, "sysctl", "-qw",
                        "net.ipv4.ip_local_port_range=1024 65535"], check=True)
        for k in ("net.core.somaxconn=65535", "net.ipv4.tcp_max_syn_backlog=65535"):
            subprocess.run(["ip", "netns", "exec", h.master, "sysctl", "-qw", k], check=True)
        urls = []
        for s in range(a.servers):
            p = h.run(h.master, [sys.executable, "-m", "servers.calib", "--host", MASTER_IP,
                                 "--port", "0", "--ttft-ms", "0",
                                 "--itl-ms", str(a.itl_s * 1000), "--no-log"],
                      stdout=subprocess.PIPE, text=True, cwd=ROOT, env=child_env(),
                      preexec_fn=_nofile(per_server))
            line = p.stdout.readline()
            if not line.startswith("PORT "):
                raise RuntimeError(f"server {s} did not start: {line!r}")
            urls.append(f"http://{MASTER_IP}:{int(line.split()[1])}")
        server_pids = _pids(h.master)
        sc = out / "s.yaml"
        sc.write_text(json.dumps({                                     # JSON is YAML
            "name": "many-streams", "target": {"urls": urls, "scrape_metrics": False},
            "api": {"endpoint": "completions", "model": "calib-model", "stream": True,
                    "probe": False, "timeout_s": a.timeout_s, "connect_timeout_s": 300},
            "workload": {"source": "jsonl", "path": str(write_prompts(out / "p.jsonl", n)),
                         "output_tokens": {"dist": "fixed", "value": a.tokens}},
            "load": {"mode": "concurrency", "concurrency": n, "num_requests": n},
            "output": {"dir": str(out / "runs"), "report": "none"}}))
        mem0 = _tcp_mem_pages()
        p0 = int(urls[0].rsplit(":", 1)[1])
        m = a.sample - 1
        cap = Capture(p0, out / "sample.pcap", iface="eth0")
        cap.argv = ["ip", "netns", "exec", cl, *cap.argv[:-1],
                    f"tcp port {p0} and ((dst port {p0} and tcp[0:2] & {m} == 0) or "
                    f"(src port {p0} and tcp[2:2] & {m} == 0))"]
        cap.start()
        t0 = time.monotonic()
        client = h.run(cl, [sys.executable, "-m", "loadgen", "run", str(sc), "--procs",
                            str(a.procs), "--json"],
                       cwd=ROOT, env=dict(child_env(), LOADGEN_NO_CALIBRATION="1"),
                       stdout=open(out / "client.out", "w"), stderr=open(out / "client.err", "w"),
                       preexec_fn=_nofile(per_proc))
        while client.poll() is None:
            time.sleep(SAMPLE_S)
            pids = [p for p in _pids(cl)]
            s = {"t_s": round(time.monotonic() - t0, 1), "estab": _estab(cl),
                 "client_rss_kib": _rss_kib(pids), "server_rss_kib": _rss_kib(server_pids),
                 "mem_available_gib": round(_mem_available_gib(), 2),
                 "tcp_mem_pages": _tcp_mem_pages()}
            samples.append(s)
            print(f"# {s}", file=sys.stderr, flush=True)
            if s["mem_available_gib"] < a.min_free_gib:
                stopped_by = (f"memory guard: MemAvailable {s['mem_available_gib']} GiB < "
                              f"{a.min_free_gib} GiB at {s['estab']:,} streams")
                break
            if time.monotonic() - t0 > a.timeout_s:
                stopped_by = f"time bound {a.timeout_s:g} s"
                break
        if client.poll() is None:
            for p in _pids(cl):
                os.kill(p, 15)
            client.wait(30)
        wall = time.monotonic() - t0
        cap_stats = cap.stop()
        counts: collections.Counter = collections.Counter()
        errors: collections.Counter = collections.Counter()
        recs = []                           # the first server port's: the sample's side
        for f in (out / "runs").glob("*/records.jsonl"):
            for line in open(f):
                r = json.loads(line)
                count(r, counts, errors)
                if (r.get("target_url") or urls[0]).rstrip("/") == urls[0]:
                    recs.append(r)
        err_tail = (out / "client.err").read_text()[-1500:]
        exs = http.exchanges(pcap.tcp_connections(out / "sample.pcap", p0))
        sample = compare.errors(compare.match(exs, recs)["pairs"])
        del recs
    held = max((s["estab"] for s in samples), default=0)
    at_held = [s for s in samples if held and s["estab"] == held]
    # memory while every stream is held: its largest sample (buffers grow as tokens flow);
    # marginal: over the last sample before the first connection (the plan loaded, no socket)
    peak = max(at_held, key=lambda s: s["client_rss_kib"]) if at_held else None
    base = None
    for s in samples:
        if s["estab"]:
            break
        base = s
    per_stream = marginal = kernel = None
    if held:
        per_stream = peak["client_rss_kib"] * 1024 / held
        if base is not None:
            marginal = (peak["client_rss_kib"] - base["client_rss_kib"]) * 1024 / held
        pages = [s["tcp_mem_pages"] for s in at_held if s["tcp_mem_pages"] is not None]
        if mem0 is not None and pages:
            kernel = (max(pages) - mem0) * 4096 / held
    if stopped_by is None and held < n:
        if not errors and counts.get("measured/ok") == n:
            stopped_by = (f"held {held:,} of {n:,} at once, every request ok: the first streams "
                          "ended before the last connected (the ramp outlasted a stream's "
                          f"{(a.tokens - 1) * a.itl_s:g} s: raise --tokens or --itl-s)")
        else:
            stopped_by = (f"held {held:,} of {n:,}: " + (errors.most_common(1)[0][0] if errors
                          else f"client exit {client.returncode}; {err_tail[-300:]!r}"))
    server_per = (max(s["server_rss_kib"] for s in at_held) * 1024 / held) if held else None
    first = next((s["t_s"] for s in at_held), None)
    print(f"{held:,} of {n:,} streams held at once (all held from {first} s, for "
          f"{len(at_held) * SAMPLE_S:.0f} s), "
          f"--procs {a.procs}, {a.servers} server ports, {a.tokens} tokens every {a.itl_s:g} s")
    if held:
        def b(v):
            return "n/a" if v is None else f"{v:,.0f} B"
        print(f"  client RSS {peak['client_rss_kib'] / 2**20:.2f} GiB = {b(per_stream)} per "
              f"stream (marginal {b(marginal)}); servers {b(server_per)} per stream; "
              f"kernel TCP buffers {b(kernel)} per stream (both ends, /proc/net/sockstat)")
    print(f"  stopped: {stopped_by or 'no: every stream held'}; exit {client.returncode}, "
          f"{wall:.0f} s; load average {load0[0]:.2f} at start")
    print(f"  {limit_note}")
    e = sample["ttft_err_ms"]
    print(f"  TTFT error vs capture on a sample of {e['n']} streams: mean "
          f"{e['mean'] if e['mean'] is None else round(e['mean'], 3)} ms, p99 "
          f"{e['p99'] if e['p99'] is None else round(e['p99'], 3)} ms (client − wire)")
    print_counts(counts, errors, 8)
    print(json.dumps({"bench": "many_streams", "evidence": "measured",
                      "utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                      "streams_asked": n, "streams_held_peak": held, "procs": a.procs,
                      "fd_limit": limit_note,
                      "servers": a.servers, "tokens": a.tokens, "itl_s": a.itl_s,
                      "client_bytes_per_stream": per_stream,
                      "client_marginal_bytes_per_stream": marginal,
                      "server_bytes_per_stream": server_per,
                      "kernel_tcp_bytes_per_stream": kernel, "stopped_by": stopped_by,
                      "rc": client.returncode, "wall_s": round(wall, 1), "counts": counts,
                      "errors": dict(errors), "loadavg_at_start": load0,
                      "sample_ttft_err_ms": sample["ttft_err_ms"],
                      "sample_itl_gap_abs_err_ms_p99": sample["itl_gap_abs_err_ms_p99"],
                      "sample_capture": cap_stats,
                      "loadavg_at_end": os.getloadavg(), "cpus": os.cpu_count(),
                      "peak": peak, "samples": samples[-400:]}, default=float))
    return 0 if held >= n else 1


if __name__ == "__main__":
    sys.exit(main())
