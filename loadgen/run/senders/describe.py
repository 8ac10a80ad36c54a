"""The senders' own figures summed into the run's meta.json blocks, one rule for both engines:
the --procs children (procs/describe.py) and the Locust workers (locust_engine/run.py).

    each sender's {index, cpu_s, wall_s, cpu_util, loop_lag_ms_p99, loop_lag_ms_max}
        ─► client_load(): cpu_util and loop lag of the BUSIEST sender (each is one event loop
           or gevent hub on one core: saturation is judged per sender), cpu_s of all of them
           and of the parent
    each sender's replica picks {balance, replicas: [{url, requests_sent}]} (balance.Picker)
        ─► replicas(): each URL's sends summed over every sender, in the senders' URL order
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
