"""Benchmark (not a test): per-read CPU cost and stamp error, aiohttp client vs the wire transport.

    calibration server (subprocess, CPU 0, --lockstep: one decode clock, every stream's next chunk
    written back to back each ITL step) ◄── this process (CPU 1): N streams started at once,
    ROUNDS rounds per transport, transports alternating per level
        aiohttp:   loadgen.client.http_client.Client(transport="aiohttp").execute (user-space stamp per read)
        wire-user: loadgen.client.wire.pool.WirePool(stamps="user").request + WirePool.fill (user-space stamp)
        wire:      the same with kernel receive stamps (SO_TIMESTAMPNS), the default
    truth: the server's own write log (GET /calib/log; perf_counter_ns, the same clock on this host)

Per transport and level: chunk stamp error (client stamp − server write stamp, every chunk), the
first token's stamp error, ITL p99 (client) − ITL p99 (server), send → server arrival, process CPU
per chunk (wire: split into the hot path and the after-the-fact fill_record), and for wire how late
the loop read each segment after the kernel stamped it (what a user-space stamp would have been
off by) and how many reads carried more than one token chunk. Prints a table, then one JSON line.

    python -m bench.wire_vs_aiohttp [--levels 32,256] [--rounds 2] [--tokens 128] [--ttft-ms 50]
                                    [--itl-ms 10] [--no-pin] [--fill sliced|inline] [--mux epoll|loop]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time

from loadgen.client.http_client import Client, ClientConfig, RequestSpec, build_base_body
from loadgen.scenario.workload import PromptSpec
from loadgen.client.load_monitor import gc_hold, gc_release
from loadgen.client.request import request_body, request_headers
from loadgen.client.request import finish
from loadgen.client.sse import StreamTally
from loadgen.client.wire.record_fill import fill_record
from loadgen.client.wire.pool import WirePool
from servers.calib import CalibrationServer

SERVER_CPU, CLIENT_CPU = 0, 1
MUX = "epoll"
KINDS = ("aiohttp", "wire-user", "wire")   # wire-user: the wire transport stamping in user space
FILL = "sliced"     # --fill: "sliced" (WirePool.fill, RecordFiller) or "inline" (fill_record in the task)


def _pct(v: list, q: float):
    if not v:
        return None
    v = sorted(v)
    return v[min(len(v) - 1, max(0, round(q / 100 * (len(v) - 1))))]


def _ms(x):
    return None if x is None else round(x / 1e6, 3)


async def _rounds(kind: str, url: str, n: int, rounds: int, tokens: int, calib: dict, tag: str) -> dict:
    cfg = ClientConfig(base_url=url, model="calib-model", timeout_s=120, extra_body={"calib": calib})
    specs_all, recs, cpu, fill_s = [], [], 0.0, 0.0
    ctr = iter(range(10**7))

    def mk(max_tokens: int) -> RequestSpec:
        i = next(ctr)
        return RequestSpec.of(PromptSpec(f"{tag}-{kind}-{i:07d} hello", 2, max_tokens), i)

    if kind == "aiohttp":
        async with Client(cfg, n, transport="aiohttp") as c:
            await asyncio.gather(*(c.execute(mk(2)) for _ in range(n)))      # warm: n connections
            for _ in range(rounds):
                specs = [mk(tokens) for _ in range(n)]
                c0 = time.process_time()
                recs += await asyncio.gather(*(c.execute(s) for s in specs))
                cpu += time.process_time() - c0
                specs_all += specs
        info = {}
    else:
        base, chat = build_base_body(cfg), False
        headers = request_headers(cfg, None)
        path = url + "/v1/completions"

        async def one(pool: WirePool, s: RequestSpec):
            nonlocal fill_s
            resp = await pool.request("POST", path, headers, request_body(base, chat, s.prompt, s.max_tokens))
            rec = Client.new_record(s)
            if FILL == "sliced":                # RecordFiller: bounded slices between loop turns
                tally = StreamTally()
                await pool.fill(resp, rec, tally, stream=True)
                finish(rec, tally, s.prompt_tokens)
            else:
                f0 = time.process_time()
                fill_record(resp, rec, stream=True, workload_prompt_tokens=s.prompt_tokens)
                fill_s += time.process_time() - f0
            return rec

        gc_hold()
        try:
            stamps = "user" if kind == "wire-user" else "auto"
            async with WirePool(limit=n, timeout_s=120, mux=MUX, stamps=stamps) as pool:
                await asyncio.gather(*(one(pool, mk(2)) for _ in range(n)))
                st = pool.stamps
                r0, k0, ls0 = st.reads, st.kernel_reads, st.lag_sum_ns
                st.lag_max_ns = 0
                fill_s = 0.0
                for _ in range(rounds):
                    specs = [mk(tokens) for _ in range(n)]
                    c0 = time.process_time()
                    recs += await asyncio.gather(*(one(pool, s) for s in specs))
                    cpu += time.process_time() - c0
                    specs_all += specs
                info = pool.describe()
                info["reads_measured"] = st.reads - r0
                info["kernel_reads_measured"] = st.kernel_reads - k0
                info["lag_mean_ns_measured"] = ((st.lag_sum_ns - ls0) // max(1, st.kernel_reads - k0))
        finally:
            gc_release()
    return {"recs": recs, "cpu_s": cpu, "fill_s": fill_s, "info": info}


def _errors(pairs: list) -> dict:
    """``pairs``: (record, the server's log entry for it or None)."""
    chunk_err, first_err, send_arr, itl_c, itl_s, bad, coalesced = [], [], [], [], [], 0, 0
    for r, e in pairs:
        if e is None or r.status != "ok" or len(r.chunks) != len(e["chunks"]):
            bad += 1
            continue
        coalesced += getattr(r, "coalesced_reads", 0) or 0
        for (tc, _), (ts, _) in zip(r.chunks, e["chunks"]):
            chunk_err.append(tc - ts)
        tok_c = [t for t, n in r.chunks if n]
        tok_s = [t for t, n in e["chunks"] if n]
        first_err.append(tok_c[0] - tok_s[0])
        send_arr.append(e["arrival_ns"] - r.sent_at_ns)
        itl_c += [b - a for a, b in zip(tok_c, tok_c[1:])]
        itl_s += [b - a for a, b in zip(tok_s, tok_s[1:])]
    p99c, p99s = _pct(itl_c, 99), _pct(itl_s, 99)
    return {"requests": len(pairs), "unmatched_or_failed": bad,
            "chunk_err_ms": {"mean": _ms(statistics.fmean(chunk_err)) if chunk_err else None,
                             "p50": _ms(_pct(chunk_err, 50)), "p99": _ms(_pct(chunk_err, 99)),
                             "max": _ms(max(chunk_err)) if chunk_err else None},
            "first_token_err_ms": {"mean": _ms(statistics.fmean(first_err)) if first_err else None,
                                   "p99": _ms(_pct(first_err, 99))},
            "itl_p99_err_ms": _ms(p99c - p99s) if p99c is not None else None,
            "send_to_arrival_ms": {"mean": _ms(statistics.fmean(send_arr)) if send_arr else None,
                                   "p99": _ms(_pct(send_arr, 99))},
            "chunks": len(chunk_err), "coalesced_reads": coalesced}


def run_level(server: CalibrationServer, kind: str, n: int, rounds: int, tokens: int, calib: dict) -> dict:
    server.clear()
    tag = f"L{n}"
    out = asyncio.run(_rounds(kind, server.url, n, rounds, tokens, calib, tag))
    by_prompt = {e["prompt"]: e for e in server.log(clear=True)}
    res = _errors([(r, by_prompt.get(f"{tag}-{kind}-{r.id:07d} hello")) for r in out["recs"]])
    chunks = max(1, res["chunks"])
    res["cpu_us_per_chunk"] = round(out["cpu_s"] / chunks * 1e6, 2)
    if kind.startswith("wire"):
        info = out["info"]
        if FILL == "inline":
            res["fill_us_per_chunk"] = round(out["fill_s"] / chunks * 1e6, 2)
            res["hot_us_per_chunk"] = round((out["cpu_s"] - out["fill_s"]) / chunks * 1e6, 2)
        res["fill"], res["mux"] = FILL, MUX
        res["reads_per_chunk"] = round(info["reads_measured"] / chunks, 3)
        res["stamp_source"] = info["stamp_source"]
        res["kernel_reads"] = info["kernel_reads_measured"]
        if info["kernel_reads_measured"]:
            res["loop_read_lag_ms"] = {"mean": _ms(info["lag_mean_ns_measured"]),
                                       "max": _ms(info["read_lag_ns"]["max"])}
        res["clock"] = info["clock"]
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--levels", default="32,256")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--ttft-ms", type=float, default=50.0)
    ap.add_argument("--itl-ms", type=float, default=10.0)
    ap.add_argument("--no-pin", action="store_true")
    ap.add_argument("--fill", choices=("sliced", "inline"), default="sliced",
                    help="wire: records filled by the pool's RecordFiller (default) or inline per task")
    ap.add_argument("--mux", choices=("epoll", "loop"), default="epoll")
    args = ap.parse_args()
    global FILL, MUX
    FILL, MUX = args.fill, args.mux
    pin = not args.no_pin and (os.cpu_count() or 1) >= 2
    if pin:
        os.sched_setaffinity(0, {CLIENT_CPU})
    load0 = os.getloadavg()
    calib = {"ttft_ms": args.ttft_ms, "itl_ms": args.itl_ms, "lockstep": True}
    rows = {}
    t0 = time.time()
    with CalibrationServer(cpu=SERVER_CPU if pin else None, lockstep=True) as server:
        for n in [int(x) for x in args.levels.split(",")]:
            for kind in KINDS:
                rows[f"{kind}@{n}"] = run_level(server, kind, n, args.rounds, args.tokens, calib)
    load1 = os.getloadavg()
    hdr = (f"{'row':<14} {'chunk err ms mean/p50/p99/max':<30} {'1st tok err mean/p99':<21} "
           f"{'ITL p99 err':>11} {'CPU us/chunk':>12} {'coalesced':>9} {'loop lag mean/max':>18}")
    print(f"lockstep calibration server: ttft {args.ttft_ms} ms, itl {args.itl_ms} ms, {args.tokens} tokens, "
          f"{args.rounds} rounds; server CPU {SERVER_CPU if pin else '-'}, client CPU {CLIENT_CPU if pin else '-'}")
    print(hdr)
    for k, r in rows.items():
        ce, fe = r["chunk_err_ms"], r["first_token_err_ms"]
        cpu = f"{r['cpu_us_per_chunk']}"
        if "hot_us_per_chunk" in r:
            cpu += f" ({r['hot_us_per_chunk']}+{r['fill_us_per_chunk']})"
        lag = r.get("loop_read_lag_ms")
        print(f"{k:<14} {ce['mean']}/{ce['p50']}/{ce['p99']}/{ce['max']:<10} {fe['mean']}/{fe['p99']:<12} "
              f"{r['itl_p99_err_ms']:>11} {cpu:>12} {r['coalesced_reads']:>9} "
              f"{(str(lag['mean']) + '/' + str(lag['max'])) if lag else '-':>18}"
              + (f"  [{r['unmatched_or_failed']} unmatched/failed]" if r["unmatched_or_failed"] else ""))
    print(f"load average before {load0[0]:.2f} after {load1[0]:.2f}; {time.time() - t0:.0f} s")
    print(json.dumps({"bench": "wire_vs_aiohttp", "levels": args.levels, "rounds": args.rounds,
                      "tokens": args.tokens, "ttft_ms": args.ttft_ms, "itl_ms": args.itl_ms, "pinned": pin,
                      "loadavg_before": load0, "loadavg_after": load1, "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
