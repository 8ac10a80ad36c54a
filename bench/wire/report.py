"""The timing-truth bench's figures around the errors, and its table (bench/timing_truth.py).

    tick_stats(GET /calib/clock)   decode steps: lateness (start − planned) and burst width
                                   (first to last write of a step), streams per step
    server_log_stats(GET /calib/log)  the server's own TTFT / ITL as written (its clock)
    profile_top(cProfile dump)     the functions with the most own time
    table(rows)                    one line per run, the legend under it
"""
from __future__ import annotations

from pathlib import Path

from bench.wire import compare


def tick_stats(clocks: list[dict]) -> dict:
    late, width, n = [], [], []
    for c in clocks:
        for _k, planned, start, end, streams in c["ticks"]:
            if streams:
                late.append((start - planned) / 1e6)
                width.append((end - start) / 1e6)
                n.append(streams)
    return {"ticks": len(late), "late_ms": compare.stats(late), "burst_ms": compare.stats(width),
            "streams_per_tick_max": max(n) if n else None}


def server_log_stats(log: list[dict]) -> dict:
    """Per-request server figures: TTFT and ITL as written (the server's own perf_counter clock)."""
    ttft, itl = [], []
    for e in log:
        tok = [(t, n) for t, n in e["chunks"] if n > 0]
        if tok:
            ttft.append((tok[0][0] - e["arrival_ns"]) / 1e6)
            itl.extend(compare.per_token_itl(tok))
    return {"ttft_ms": compare.stats(ttft), "itl_ms": compare.stats(itl)}


def profile_top(path: Path, n: int = 25) -> list:
    """The ``n`` functions with the most own time in a cProfile dump: [own_s, cum_s, calls, where]."""
    import pstats
    st = pstats.Stats(str(path))
    rows = []
    for (file, line, fn), (_cc, nc, tt, ct, _callers) in st.stats.items():
        where = f"{Path(file).name}:{line}({fn})" if line else fn
        if "site-packages/" in file:
            where = file.split("site-packages/", 1)[1] + f":{line}({fn})"
        rows.append([round(tt, 4), round(ct, 4), nc, where])
    return sorted(rows, key=lambda r: -r[0])[:n]


def _f(v, nd: int = 2) -> str:
    return "n/a" if v is None else f"{v:.{nd}f}"


def table(rows: list[dict]) -> str:
    hdr = (f"{'engine':7} {'mode':9} {'strm':>4} {'n':>5} {'TTFT err':>8} {'p99':>7} {'ITL err':>7} "
           f"{'p99':>6} {'|gap|p99':>8} {'send':>6} {'recv p99':>8} {'cpu':>5} {'lag p99':>7} "
           f"{'cmd cpu':>7} {'other':>5} {'steal':>5} {'burst':>6} {'load':>5}")
    out = [hdr]
    for r in rows:
        sp = r.get("split_estimate") or {}
        cpu = r["client_cpu_fraction"]
        cmd_cpu = r["command_cpu_s"] / r["command_wall_s"] if r["command_wall_s"] else None
        out.append(
            f"{r['engine']:7} {r['mode']:9} {r['streams']:4d} {r['requests']:5d} "
            f"{_f(r['ttft_err_ms']['mean']):>8} {_f(r['ttft_err_ms']['p99']):>7} "
            f"{_f(r['itl_err_ms_mean']):>7} {_f(r['itl_err_ms_p99']):>6} "
            f"{_f(r['itl_gap_abs_err_ms_p99']):>8} "
            f"{_f((sp.get('send_lag_ms') or {}).get('mean')):>6} "
            f"{_f((sp.get('recv_lag_all_chunks_ms') or {}).get('p99')):>8} "
            f"{_f(cpu):>5} {_f(r['client_loop_lag_ms_p99'], 1):>7} {_f(cmd_cpu):>7} "
            f"{_f(r['cpu']['client_core_other_share']):>5} {_f(r['cpu']['steal_max']):>5} "
            f"{_f(r['server_clock']['burst_ms']['p99']):>6} {r['loadavg_before'][0]:5.2f}")
    out.append("ms, client minus wire. TTFT err: per request (mean, p99); ITL err: mean(client) − "
               "mean(wire), p99(client) − p99(wire), per token; |gap|p99: per chunk gap; send/recv: "
               "stamp↔wire split by one clock offset (estimate); cpu/lag p99: summary.json client block; "
               "cmd cpu: the command's rusage / wall (start-up included); other: share of the client's core "
               "busy with anything else and steal: the largest VM steal share of a CPU (both should be ~0); burst: server decode step "
               "write span p99; load: 1-min load average before the run.")
    return "\n".join(out)
