"""Benchmark (not a test): how exact is ``loadgen run`` against the wire, under lockstep token bursts.

    calibration server (CPU 0, 50 ms TTFT, 10 ms ITL, 128 tokens)      tcpdump -i lo (CPU 0)
        lockstep: one global decode clock, every running stream's next token in the same step
        staggered: per-request deadlines, starts spread by a constant arrival rate (labelled row)
    ◄── ``loadgen run SCENARIO`` (the real command, a subprocess pinned to CPU 1), --engine native
        and --engine locust, concurrency mode, 3 rounds of ``streams`` requests after one warm-up round
    pcap ─► bench.wire: per request TTFT_wire = first request byte → first packet with a token,
        ITL_wire = gaps between token packets (per token) ─► matched to records.jsonl by the request
        id in the prompt ─► client − wire errors (durations; the two clocks are never mixed for these)
    + summary.json's ``client`` block (CPU share, loop lag p99), the command's own CPU (rusage),
      the server's decode-step stats (lateness, burst width) and the load average at each run.
Goal (issue 12): at 256 lockstep streams, TTFT error mean <= 3 ms and ITL p99 error <= 1.5 ms.
Prints a table, ends with one JSON line.

    python -m bench.timing_truth [--quick] [--levels 1,32,256] [--engines native,locust,locust1,procs2]
    (procs2: the native engine with --procs 2 on CPUs 0-1, sharing CPU 0 with the server: labelled)
                                 [--stagger-levels 256] [--loop asyncio|uvloop] [--keep DIR]
                                 [--set KEY=VALUE ...]   (e.g. api.traceparent=false: tracing off)
Needs: tcpdump (root or CAP_NET_RAW), dpkt, 2 CPUs.
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

ROOT = Path(__file__).resolve().parents[1]

from bench.wire import compare, http, pcap
from bench.wire.capture import Capture, clock_offset_ns, counter_delta, tcp_counters
from bench.wire.host import cpu_share, cpu_times, run_in_pty
from bench.wire.report import profile_top, server_log_stats, table, tick_stats
from bench.wire.scenario import scenario, write_prompts, write_scenario

SERVER_CPU, CLIENT_CPU = 0, 1
TTFT_MS, ITL_MS, TOKENS = 50.0, 10.0, 128
REQUEST_S = (TTFT_MS + (TOKENS - 1) * ITL_MS) / 1e3
GOAL_TTFT_MS, GOAL_ITL_P99_MS = 3.0, 1.5


def _pin(cpu) -> None:
    cpus = cpu if isinstance(cpu, (set, frozenset)) else {cpu}
    os.sched_setaffinity(0, {c % os.cpu_count() for c in cpus})


def _engine_args(engine: str) -> tuple[list[str], frozenset]:
    """(the flags of ``loadgen run`` for an engine name, the CPUs its client is pinned to).
    native / locust: ``--engine``, CPU 1; locustN: ``--engine locust --workers N`` (master and
    N worker processes), CPU 1; procsN: the native engine with ``--procs N`` on CPUs
    0..N-1 (on this 2-core box it shares CPU 0 with the server and tcpdump: labelled so)."""
    if engine.startswith("procs"):
        n = int(engine[5:] or 2)
        return ["--procs", str(n)], frozenset(range(n))
    if engine.startswith("locust") and engine[6:].isdigit():    # locustN: --workers N, CPU 1
        return ["--engine", "locust", "--workers", engine[6:]], frozenset({CLIENT_CPU})
    return ([] if engine == "native" else ["--engine", engine]), frozenset({CLIENT_CPU})


def _loadgen_argv(root: Optional[str]) -> list[str]:
    """The ``loadgen`` command, or ``python -m loadgen`` run from another source tree (``root``)."""
    exe = Path(sys.executable).parent / "loadgen"
    return [str(exe)] if exe.exists() and not root else [sys.executable, "-m", "loadgen"]


def _requests(streams: int, quick: bool) -> int:
    if streams == 1:
        return 5 if quick else 20
    return streams * (1 if quick else 3)


def one_run(engine: str, mode: str, streams: int, args, tmp: Path,
            profile: Optional[Path] = None, rep: int = 0) -> dict:
    """One ``loadgen run`` under capture; the errors and the figures around them.
    ``profile``: run the native engine under cProfile (main thread) and write the dump there."""
    from servers.calib import CalibrationServer
    n = _requests(streams, args.quick)
    warm = streams
    name = f"{engine}-{mode}-c{streams}" + ("-cprofile" if profile else "") + (f"-r{rep}" if rep else "")
    prompts = write_prompts(tmp / f"{name}.prompts.jsonl", warm + n + streams)
    pcap_path = tmp / f"{name}.pcap"
    env = dict(os.environ)
    cwd = ROOT
    if args.loadgen_root:                # e.g. `git archive HEAD | tar -x -C DIR`: a fixed snapshot
        cwd = Path(args.loadgen_root).resolve()
        env["PYTHONPATH"] = str(cwd) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("LOADGEN_EVENT_LOOP", None)
    if args.loop != "asyncio":
        env["LOADGEN_EVENT_LOOP"] = args.loop
    load_before = os.getloadavg()
    with CalibrationServer(ttft_ms=TTFT_MS, itl_ms=ITL_MS, lockstep=mode == "lockstep",
                           cpu=SERVER_CPU) as srv:
        sc = scenario(f"timing-truth-{name}", srv.url, prompts, streams, n, warm, TOKENS,
                      tmp / "runs", name, staggered=mode == "staggered", request_s=REQUEST_S)
        scen = write_scenario(tmp / f"{name}.yaml", sc)
        argv = _loadgen_argv(args.loadgen_root) + ["run", str(scen)]
        if profile is not None:
            argv = [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "loadgen", "run", str(scen)]
        eng_flags, client_cpus = _engine_args(engine)
        argv += eng_flags
        for kv in args.set or ():                  # scenario settings (e.g. api.traceparent=false)
            argv += ["--set", kv]
        cap = Capture(srv.port, pcap_path, cpu=SERVER_CPU).start()
        try:
            off0 = clock_offset_ns()
            tcp0 = tcp_counters()
            ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu0 = cpu_times()
            t0 = time.perf_counter()
            if args.tty:
                rc, out = run_in_pty(argv, cwd, env, preexec_fn=lambda: _pin(client_cpus),
                                     timeout=args.run_timeout_s)
            else:
                p = subprocess.run(argv, cwd=cwd, env=env, preexec_fn=lambda: _pin(client_cpus),
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                   timeout=args.run_timeout_s)
                rc, out = p.returncode, p.stdout
            wall = time.perf_counter() - t0
            cpu1 = cpu_times()
            ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            off1 = clock_offset_ns()
            tcp1 = tcp_counters()
        finally:
            cap_stats = cap.stop()
        server_log = srv.log()
        clocks = srv.clock() if mode == "lockstep" else []
    if rc != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {rc}:\n{out[-3000:]}")
    run_dir = tmp / "runs" / name
    records = [json.loads(ln) for ln in open(run_dir / "records.jsonl") if ln.strip()]
    summary = json.loads((run_dir / "summary.json").read_text())
    t_parse = time.perf_counter()
    conns = pcap.tcp_connections(pcap_path, srv.port)
    exs = http.exchanges(conns)
    m = compare.match(exs, records)
    offset = (off0["offset_ns"] + off1["offset_ns"]) // 2
    err = compare.errors(m["pairs"], offset)
    client = summary.get("client") or {}
    cmd_cpu = (ru1.ru_utime + ru1.ru_stime) - (ru0.ru_utime + ru0.ru_stime)
    shares = cpu_share(cpu0, cpu1)
    row = {
        "engine": engine, "mode": mode, "streams": streams, "rep": rep, "requests_planned": n,
        "loop": args.loop, "loadavg_before": load_before, "loadavg_after": os.getloadavg(),
        "matched": len(m["pairs"]), **{k: v for k, v in m.items() if k != "pairs"},
        **err,
        "client_cpu_fraction": client.get("cpu_fraction"),
        "client_loop_lag_ms_p99": client.get("loop_lag_ms_p99"),
        "client_saturated": client.get("saturated"), "client_warnings": client.get("warnings"),
        "command_cpu_s": cmd_cpu, "client_cpus": sorted(client_cpus),
        "command_wall_s": wall, "tty": args.tty,
        # the client core's busy share minus the command's own CPU: other work on that core
        "cpu": {**{f"cpu{c}_busy": v["busy"] for c, v in shares.items()},
                "client_core_other_share": (shares[CLIENT_CPU]["busy_s"] - cmd_cpu) / wall,
                "steal_max": max((v["steal"] or 0.0) for v in shares.values())},
        "measured_duration_s": summary.get("duration_s"),
        "loadgen_ttft_ms": summary.get("ttft_ms"), "loadgen_itl_ms": summary.get("itl_ms"),
        "server_to_wire_ms": compare.server_to_wire(server_log, exs, offset),
        "server": server_log_stats(server_log), "server_clock": tick_stats(clocks),
        "clock_offset": {"offset_ns": offset, "drift_ns": off1["offset_ns"] - off0["offset_ns"],
                         "uncertainty_ns": max(off0["uncertainty_ns"], off1["uncertainty_ns"])},
        "capture": {**cap_stats, "connections": len(conns), "exchanges": len(exs),
                    "retransmitted_bytes": sum(c.up.retransmitted_bytes + c.down.retransmitted_bytes
                                               for c in conns),
                    "host_tcp_counters_delta": counter_delta(tcp0, tcp1),
                    "parse_s": round(time.perf_counter() - t_parse, 2)},
    }
    if args.keep:
        dest = Path(args.keep) / name
        dest.mkdir(parents=True, exist_ok=True)
        for f in (pcap_path, scen):
            shutil.copy2(f, dest / f.name)
        shutil.copytree(run_dir, dest / "run", dirs_exist_ok=True)
        (dest / "server_log.json").write_text(json.dumps(server_log))
        (dest / "server_clock.json").write_text(json.dumps(clocks))
    pcap_path.unlink(missing_ok=True)
    return row


def _git_state(root: Optional[str]) -> dict:
    """Which loadgen was measured: HEAD and the files under loadgen/ that differ from it."""
    if root:
        return {"loadgen_root": str(Path(root).resolve()), "checkout_head_at_run": _git_state(None)["head"]}
    def git(*a: str) -> str:
        try:
            return subprocess.run(["git", *a], cwd=ROOT, capture_output=True, text=True,
                                  timeout=10).stdout.rstrip("\n")
        except (OSError, subprocess.TimeoutExpired):
            return ""
    return {"head": git("rev-parse", "HEAD").strip() or None,
            "loadgen_uncommitted": [ln[3:] for ln in git("status", "--porcelain", "--", "loadgen").splitlines()]}


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one round per level (5 requests at 1 stream)")
    ap.add_argument("--levels", default="1,32,256", help="lockstep stream counts")
    ap.add_argument("--stagger-levels", default=None,
                    help="staggered-row stream counts (default: the highest level >= 32)")
    ap.add_argument("--engines", default="native,locust")
    ap.add_argument("--loop", default="asyncio", choices=["asyncio", "uvloop"],
                    help="LOADGEN_EVENT_LOOP for the native engine runs")
    ap.add_argument("--keep", default=None, help="copy pcaps, scenarios and run dirs here")
    ap.add_argument("--run-timeout-s", type=float, default=600.0)
    ap.add_argument("--profile", action="store_true",
                    help="one more native lockstep run at the top level under cProfile: where the "
                         "client's main thread spends its time (slower, so not a timing row)")
    ap.add_argument("--loadgen-root", default=None,
                    help="run `python -m loadgen` from this source tree (a snapshot, e.g. "
                         "`git archive HEAD | tar -x -C DIR`) instead of this checkout's command")
    ap.add_argument("--repeat", type=int, default=1, help="run the whole plan this many times")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a scenario setting for every run (loadgen run --set), repeatable")
    ap.add_argument("--no-tty", dest="tty", action="store_false",
                    help="run loadgen with pipes instead of a terminal (no live progress drawn)")
    args = ap.parse_args(argv)
    if (os.cpu_count() or 1) < 2:
        print("needs 2 CPUs (server and capture on CPU 0, client on CPU 1)", file=sys.stderr)
        return 2
    _pin(SERVER_CPU)                     # this driver, the server and tcpdump share CPU 0
    levels = [int(x) for x in args.levels.split(",") if x]
    if args.stagger_levels is None:
        stag = [max(levels)] if max(levels) >= 32 else []
    else:
        stag = [int(x) for x in args.stagger_levels.split(",") if x]
    engines = [e for e in args.engines.split(",") if e]
    plan = [(e, "lockstep", s, r) for r in range(args.repeat) for s in levels for e in engines] + \
           [(e, "staggered", s, r) for r in range(args.repeat) for s in stag for e in engines]
    t_start = time.perf_counter()
    load0 = os.getloadavg()
    rows = []
    with tempfile.TemporaryDirectory(prefix="timing-truth-") as td:
        for engine, mode, streams, rep in plan:
            print(f"# {engine} {mode} {streams} streams (load {os.getloadavg()[0]:.2f})",
                  file=sys.stderr, flush=True)
            rows.append(one_run(engine, mode, streams, args, Path(td), rep=rep))
        prof = None
        if args.profile:
            top = max(levels)
            print(f"# native lockstep {top} streams under cProfile", file=sys.stderr, flush=True)
            dump = Path(td) / "loadgen.prof"
            prow = one_run("native", "lockstep", top, args, Path(td), profile=dump)
            prof = {"streams": top, "ttft_err_ms_mean": prow["ttft_err_ms"]["mean"],
                    "client_cpu_fraction": prow["client_cpu_fraction"],
                    "top_own_time": profile_top(dump)}
            if args.keep:
                shutil.copy2(dump, Path(args.keep) / "loadgen.prof")
    if prof:
        print(f"cProfile, native lockstep {prof['streams']} streams (main thread; own s, cum s, calls):")
        for tt, ct, nc, where in prof["top_own_time"][:15]:
            print(f"  {tt:8.3f} {ct:8.3f} {nc:>8} {where}")
    print(table(rows))
    goals = {}
    for r in rows:
        if r["engine"] == "native" and r["mode"] == "lockstep" and r["streams"] == 256:
            goals = {"ttft_err_mean_le_3ms": r["ttft_err_ms"]["mean"] is not None
                     and r["ttft_err_ms"]["mean"] <= GOAL_TTFT_MS,
                     "itl_p99_err_le_1p5ms": r["itl_err_ms_p99"] is not None
                     and abs(r["itl_err_ms_p99"]) <= GOAL_ITL_P99_MS}
    if goals:
        print("goals at 256 lockstep (native): " +
              ", ".join(f"{k}={'PASS' if v else 'MISS'}" for k, v in goals.items()))
    other = max(r["cpu"]["client_core_other_share"] for r in rows)
    steal = max(r["cpu"]["steal_max"] for r in rows)
    if load0[0] >= 0.5 or other > 0.05 or steal > 0.05:   # the bench's own runs raise the load average
        print(f"warning: load average {load0[0]:.2f} at start, up to {other:.0%} of the client core "
              f"busy with other work, up to {steal:.0%} VM steal: rows above 5% are not evidence")
    print(json.dumps({"bench": "timing_truth", "evidence": "measured", "quick": args.quick,
                      "set": args.set,
                      "server": {"ttft_ms": TTFT_MS, "itl_ms": ITL_MS, "tokens": TOKENS},
                      "cpus": os.cpu_count(), "git": _git_state(args.loadgen_root), "loadavg_at_start": load0, "loadavg_at_end": os.getloadavg(),
                      "wall_s": round(time.perf_counter() - t_start, 1), "rows": rows, "goals": goals,
                      "profile": prof},
                     separators=(",", ":"), default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
