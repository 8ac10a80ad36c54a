"""meta.json's view of the sender processes (what Senders.outcome puts into the Outcome).

    children (exit) + result.K.json (client load, transport, connections) + merge counts
        ─► processes()   client_processes: [{index, pid, status, exit_code, cpu_s, cpu_util,
                          loop_lag_ms_p99, records, cancelled_unwritten, clock, ...}]
        ─► senders/describe.py: the run's client_load (the busiest process) and each
                          URL's sends summed (target.urls), Locust's too
        ─► transport(), connections()   one block as one process would write it
"""
from __future__ import annotations

from typing import Optional

from loadgen.run.senders.clock import clock_estimate
from loadgen.run.senders.describe import replicas


def _status(c, res: dict) -> str:
    rc = c.proc.returncode
    if rc != 0 or not res:
        return "died"
    if res.get("error"):
        return "failed"
    return "stopped" if (res.get("interrupted") or res.get("stopped")) else "done"


def processes(children, results: list[dict], merged: Optional[dict]) -> list[dict]:
    merged = merged or {}
    written = merged.get("written_by_process") or [None] * len(children)
    made = merged.get("cancelled_by_process") or [None] * len(children)
    out = []
    for c, res, w, m in zip(children, results, written, made):
        load = res.get("client_load") or {}
        out.append({"index": c.k, "pid": c.proc.pid, "status": _status(c, res),
                    "exit_code": c.proc.returncode, "cpu_s": load.get("cpu_s"),
                    "wall_s": load.get("wall_s"), "cpu_util": load.get("cpu_util"),
                    "loop_lag_ms_p99": load.get("loop_lag_ms_p99"),
                    "loop_lag_ms_max": load.get("loop_lag_ms_max"),
                    "records": w, "cancelled_unwritten": m,
                    "warmup_requests": len(c.job.warm),
                    "planned_requests": len(c.job.planned) or None,
                    "in_flight_cap": c.job.cap, "error": res.get("error"),
                    "stopped": res.get("stopped"),
                    # one host, one CLOCK_MONOTONIC: the same record as a Locust worker's
                    "clock": clock_estimate(True)})
    return out


def transport(results: list[dict]) -> Optional[dict]:
    blocks = [r.get("client_transport") for r in results if r.get("client_transport")]
    if not blocks:
        return None
    out = dict(blocks[0])
    for key, v in blocks[0].items():        # counts (reads, responses, ...) of all processes
        if isinstance(v, int) and not isinstance(v, bool) and key not in ("probe_tries",):
            out[key] = sum(b.get(key) or 0 for b in blocks)
    lags = [(b.get("read_lag_ns") or {}, b.get("reads") or 0) for b in blocks]
    if all(lag for lag, _ in lags):
        total = sum(n for _, n in lags)
        out["read_lag_ns"] = {"max": max(lag.get("max") or 0 for lag, _ in lags),
                              "mean": (sum((lag.get("mean") or 0) * n for lag, n in lags) / total
                                       if total else None)}
    if len({b.get("stamp_source") for b in blocks}) > 1:
        out["stamp_source"] = "mixed"
    out["processes"] = len(results)
    out["clock_per_process"] = [b.get("clock") for b in blocks]
    return out


def connections(results: list[dict]) -> Optional[dict]:
    blocks = [r.get("client_connections") for r in results if r.get("client_connections")]
    if not blocks:
        return None
    out = dict(blocks[0])
    out["stale_connection_retries"] = sum(b.get("stale_connection_retries") or 0 for b in blocks)
    out.update(replicas(blocks) or {})         # each URL's sends over every process
    return out
