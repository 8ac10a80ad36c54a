"""meta.json of a run: its settings, schedule, client health, probe and transport, as one dict.

    runner.Run (after the measured phase, or after a crash) ─► run_meta(run) ─► dict
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
from loadgen.run.storage import atomic_write_text
from loadgen.scenario.schedule import seed_for


def run_meta(run) -> dict:
    """meta.json of a ``runner.Run``: the load, the schedule, the client's health, what was found."""
    sc, ld = run.sc, run.sc.load
    sched = run.schedule.describe()
    cpu_info = run.cpu.result or {}  # ClientLoad: CPU share of one core, loop lag
    power_info = run.power.result if run.power is not None else None
    return {
        "loadgen_version": loadgen.__version__, "scenario": sc.name,
        "run_dir": str(run.run_dir), "started_at_unix": time.time(),
        "engine": "native", "event_loop": eventloop.loop_name(), "mode": ld.mode,
        "target_url": run.base_url, "model": run.model,
        "endpoint": sc.api.endpoint, "stream": sc.api.stream,
        "t0_ns": run.t0, "end_ns": run.end, "clock": "time.perf_counter_ns (CLOCK_MONOTONIC)",
        "rate": ld.rate if ld.mode == "server" else None,   # None for stages and traces
        "scheduled_rate": sched["scheduled_rate"], "schedule": sched,
        "schedule_seed": seed_for(sc),
        "in_flight_cap": ld.in_flight_cap, "num_requests": ld.num_requests,
        "duration_s": ld.duration_s, "warmup_requests": ld.warmup_requests,
        "records_written": run.writer.count if run.writer else 0,
        # a closed loop's never-started remainder (load.num_requests − issued), a count, no records
        "unsent_requests": getattr(run.dispatcher, "unsent_requests", None),
        "min_duration_s": ld.min_duration_s, "min_queries": ld.min_queries,
        "drain_timeout_s": ld.drain_timeout_s,
        "slo": sc.slo.model_dump(mode="json"),
        "workload": run.plan.describe(),
        "client_cpu": cpu_info.get("cpu_util"), "client_load": cpu_info,
        "power_sources": (power_info or {}).get("sources") or list(sc.power.sources),
        "power": power_info,
        "interrupted": bool(run.interrupted or run.crashed),
        "interrupt_signal": run.interrupted, "crashed": run.crashed,
        "managed_server_alive_at_end": run.server_alive_at_end,
        "client_cpus": run.client_cpus,
        "server_metrics": run.server_metrics,
        "probe": run.probe,
        "client_connections": run.client.describe() if run.client is not None else None,
        # wire | aiohttp, stamp_source kernel | user | mixed, clock method and bracket,
        # coalesced reads, retries (Client.transport_info, kept after the client closed)
        "client_transport": run.client.transport_info() if run.client is not None else None,
    }


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
