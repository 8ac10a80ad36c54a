"""The senders' own figures summed into the run's meta.json blocks, one rule for both engines:
the --procs children (procs/parent.py) and the Locust workers (engine/locust/run.py).

    each sender's {index, cpu_s, wall_s, cpu_util, loop_lag_ms_p99, loop_lag_ms_max}
        ─► client_load(): cpu_util and loop lag of the BUSIEST sender (each is one event loop
           or gevent hub on one core: saturation is judged per sender), cpu_s of all of them
           and of the parent
    each sender's replica picks {balance, replicas: [{url, requests_sent}]} (balance.Picker)
        ─► replicas(): each URL's sends summed over every sender, in the senders' URL order
    each sender's client_transport / client_connections block
        ─► transport(), connections(): one block as one process would write it (counts summed)
    the Locust master's state, worker status and reports ─► locust_blocks(): client_load,
        client_connections, client_transport and the ``locust`` block of meta.json
Pure.
"""
from __future__ import annotations

from typing import Optional


def _max(vals) -> Optional[float]:
    vals = [v for v in vals if isinstance(v, (int, float))]
    return max(vals) if vals else None


def client_load(procs: list[dict], parent: Optional[dict]) -> dict:
    """The run's client_load: per-sender figures of the busiest one; CPU seconds summed."""
    utils = [(p["cpu_util"], p["index"]) for p in procs if p.get("cpu_util") is not None]
    busiest = max(utils)[1] if utils else None
    cpu = [p["cpu_s"] for p in procs if p.get("cpu_s") is not None]
    parent_cpu = (parent or {}).get("cpu_s")
    return {"cpu_util": max(utils)[0] if utils else None,
            "loop_lag_ms_p99": _max(p.get("loop_lag_ms_p99") for p in procs),
            "loop_lag_ms_max": _max(p.get("loop_lag_ms_max") for p in procs),
            "cpu_s": round(sum(cpu) + (parent_cpu or 0), 3) if cpu else None,
            "senders_cpu_s": round(sum(cpu), 3) if cpu else None,
            "parent_cpu_s": parent_cpu, "wall_s": _max(p.get("wall_s") for p in procs),
            "processes": len(procs), "busiest_process": busiest,
            "rule": "cpu_util and loop lag: the busiest sender process (each is one event "
                    "loop: saturation is judged per process); cpu_s: all processes",
            "evidence": "measured" if utils else "unmeasured"}


def replicas(blocks: list[dict]) -> Optional[dict]:
    """meta.json ``client_connections``' replica rows of a run over target.urls: the balance
    and each URL's ``requests_sent`` summed over the senders (each picks its own: least_in_flight
    counts its own requests in flight); None without several URLs."""
    each = [b for b in blocks if b and b.get("replicas")]
    if not each:
        return None
    sent: dict = {}
    for d in each:
        for row in d["replicas"]:
            sent[row["url"]] = sent.get(row["url"], 0) + int(row["requests_sent"])
    return {"balance": each[0]["balance"], "balanced_per": "sender process",
            "replicas": [{"url": u, "requests_sent": n} for u, n in sent.items()]}


def transport_info(reports: list, transport: str = "gwire") -> dict:
    """meta.json ``client_transport`` over senders that each report their stamping
    (kernel_stamps.Stamps.describe, the Locust workers'): the stamp source of all of them."""
    per = {str(x["index"]): x["stamps"] for x in reports if x.get("stamps") and "index" in x}
    sources = {v.get("stamp_source") for v in per.values()}
    source = (None if not sources or None in sources
              else sources.pop() if len(sources) == 1 else "mixed")
    reads = [v.get("reads") or 0 for v in per.values()]
    kernel = [v.get("kernel_stamped_reads") or 0 for v in per.values()]
    return {"transport": transport, "stamp_source": source, "reads": sum(reads),
            "kernel_stamped_reads": sum(kernel), "workers": per}


def transport(results: list[dict]) -> Optional[dict]:
    """meta.json ``client_transport`` of the senders' results: the first's, counts summed."""
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
    """meta.json ``client_connections`` of the senders' results: stale retries and each
    replica's sends summed."""
    blocks = [r.get("client_connections") for r in results if r.get("client_connections")]
    if not blocks:
        return None
    out = dict(blocks[0])
    out["stale_connection_retries"] = sum(b.get("stale_connection_retries") or 0 for b in blocks)
    out.update(replicas(blocks) or {})         # each URL's sends over every process
    return out


def process_row(k: int, pid: int, exit_code: Optional[int], res: dict, ld, n: int,
                count: Optional[int], written, made) -> dict:
    """meta.json ``client_processes``' row of --procs sender ``k`` (its result.K.json ``res``)."""
    from loadgen.engine.core.clock import clock_estimate
    from loadgen.engine.core.partition import split
    load = res.get("client_load") or {}
    status = ("died" if exit_code != 0 or not res else "failed" if res.get("error")
              else "stopped" if res.get("interrupted") or res.get("stopped") else "done")
    return {"index": k, "pid": pid, "status": status, "exit_code": exit_code,
            **{f: load.get(f) for f in ("cpu_s", "wall_s", "cpu_util", "loop_lag_ms_p99",
                                        "loop_lag_ms_max")},
            "records": written, "cancelled_unwritten": made,
            "warmup_requests": split(ld.warmup_requests, k, n),
            "planned_requests": (split(count, k, n) or None
                                 if not ld.closed_loop else None),
            "in_flight_cap": split(ld.in_flight_cap, k, n), "error": res.get("error"),
            "stopped": res.get("stopped"),
            "clock": clock_estimate(True)}   # one host, one CLOCK_MONOTONIC: a Locust worker's record


def locust_blocks(st: dict, n: int, status: dict, exits: dict, pids: dict, counts: dict) -> dict:
    """meta.json's client blocks and ``locust`` block of a Locust run: ``st`` the master's state
    (master.json), ``status`` each worker's, ``exits`` worker pid ─► exit code (``pids``: pid ─►
    index), ``counts`` the merge's."""
    from loadgen.engine.core.clock import clock_info
    from loadgen.targets.sut import package_versions
    reports = [w.get("report") or {} for w in (st.get("workers") or {}).values()]
    return {"client_load": dict(client_load(reports, None),   # the one rule
                                scope="the busiest Locust process (gevent hub lag)"),
            "client_connections": replicas([x.get("replicas") for x in reports]),
            "client_transport": transport_info(reports),
            "locust": {"workers": n, "users": st.get("users"), "role": st.get("role"),
                       "users_by_worker": st.get("users_by_worker"),
                       "clock": clock_info({str(x["index"]): x["clock"] for x in reports
                                            if x.get("clock") and "index" in x}),
                       "worker_status": {str(k): v for k, v in sorted(status.items())},
                       "worker_exit_codes": {str(pids.get(p, p)): c for p, c in exits.items()},
                       "worker_reports": reports, "merge": counts, "error": st.get("error"),
                       "locust_version": package_versions(("locust",))["locust"]}}
