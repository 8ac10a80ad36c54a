"""meta.json of a run: its settings, schedule, client health, probe and transport, as one dict.

    loadgen.run.outcome: Prepared (scenario, plan, schedule, run dir) + Outcome (either engine's
        report: clock marks, counts, client load, power, probe, transport, how it ended)
        ─► run_meta(prepared, outcome) ─► dict      (never an engine's attributes)
        ─► write_meta(run_dir, meta): analysis.contract.RunMeta.dump (every key named there,
           schema_version set; a key outside the contract is a ContractError, after the raw
           dict was still written so that nothing of the run is lost) ─► meta.json
        ─► analysis/ reads it beside records.jsonl (mode, t0, window, SLO, client load, ...)
"""
from __future__ import annotations

import json
import time
from pathlib import Path

import loadgen
from analysis.contract import ContractError, RunMeta
from loadgen.client import eventloop
from loadgen.run.outcome import Outcome, Prepared
from loadgen.run.storage import atomic_write_text
from loadgen.scenario.cost import cost_meta
from loadgen.scenario.dataset import describe_check


def run_meta(prep: Prepared, out: Outcome) -> dict:
    """meta.json of a run: the load and schedule it was prepared with, and how it went."""
    sc, ld = prep.sc, prep.sc.load
    planned = prep.describe()
    sched = planned["schedule"]
    cpu_info = out.client_load or {}  # ClientLoad: CPU share of one core, loop lag
    power_info = out.power
    meta = {
        "loadgen_version": loadgen.__version__, "scenario": sc.name,
        "run_dir": str(prep.run_dir), "started_at_unix": time.time(),
        "engine": out.engine, "event_loop": eventloop.loop_name(), "mode": ld.mode,
        "target_url": out.target_url, "model": out.model,
        "endpoint": sc.api.endpoint, "stream": sc.api.stream,
        "t0_ns": out.t0_ns, "end_ns": out.end_ns,
        "clock": "time.perf_counter_ns (CLOCK_MONOTONIC)",
        "rate": sched["target_rate"],       # load.rate; None for stages, traces, closed loops
        "scheduled_rate": sched["scheduled_rate"], "schedule": sched,
        "schedule_seed": planned["schedule_seed"],
        "in_flight_cap": out.in_flight_cap, "num_requests": ld.num_requests,
        "duration_s": ld.duration_s, "warmup_requests": ld.warmup_requests,
        "records_written": out.records_written,
        # a closed loop's never-started remainder (load.num_requests − issued), a count, no records
        "unsent_requests": out.unsent_requests,
        "min_duration_s": ld.min_duration_s, "min_queries": ld.min_queries,
        "drain_timeout_s": ld.drain_timeout_s,
        "slo": sc.slo.model_dump(mode="json"),
        "workload": planned["workload"],
        "client_cpu": cpu_info.get("cpu_util"), "client_load": cpu_info,
        "power_sources": (power_info or {}).get("sources") or list(sc.power.sources),
        "power": power_info,
        "interrupted": bool(out.interrupted or out.crashed),
        "interrupt_signal": out.interrupted, "crashed": out.crashed,
        "managed_server_alive_at_end": out.managed_server_alive_at_end,
        "client_cpus": out.client_cpus,
        "server_metrics": out.server_metrics,
        "probe": out.probe,
        "client_connections": out.client_connections,
        # wire | aiohttp, stamp_source kernel | user | mixed, clock method and bracket,
        # coalesced reads, retries (Client.transport_info, kept after the client closed)
        "client_transport": out.client_transport,
    }
    if out.locust is not None:
        meta["locust"] = out.locust
    if out.probe_stream is not None:       # load.probe (loadgen.engine.aio.probe_stream)
        meta["probe_stream"] = out.probe_stream
    if out.client_processes is not None:   # client.processes > 1 (loadgen.engine.procs)
        meta["client_processes"] = out.client_processes
    if sc.workload.dataset is not None:    # the accuracy check ran (scenario/dataset.py)
        meta["accuracy"] = describe_check(sc.workload.dataset)
    if sc.cost is not None:                # prices for summary.json cost (scenario/cost.py)
        meta["cost"] = cost_meta(sc)
    return meta


def write_meta(run_dir: str | Path, meta: dict) -> dict:
    """run_dir/meta.json through the contract (see the module docstring); returns what it wrote."""
    path = Path(run_dir) / "meta.json"
    try:
        out = RunMeta.dump(meta)
    except ContractError:
        atomic_write_text(path, json.dumps(meta, indent=2, default=str) + "\n")
        raise
    atomic_write_text(path, json.dumps(out, indent=2) + "\n")   # temp + os.replace
    return out
