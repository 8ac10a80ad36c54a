"""meta.json: how a run went — its settings, clock marks, schedule, client health, probe, transport.

    loadgen/run/meta.py (either engine) ─► RunMeta.dump ─► meta.json ─► RunMeta.read ─► analysis
    loadgen/multirun/sweep.py adds cache_hygiene, runner.py calibration, the Locust engine locust

Times are integers of ``time.perf_counter_ns`` (the records' clock). Blocks written by other
modules (the probe, the client transport, the power sampler, the /metrics scraper) name the keys
analysis reads and keep the rest as their writer gave it.
"""
from __future__ import annotations

from typing import Any, Literal, Optional, Union

from pydantic import Field, field_validator

from analysis.contract.base import Open, RunFile
from analysis.contract.device import HostLoad as CalibrationHostLoad

Mode = Literal["offline", "server", "concurrency", "trace"]


Num = Union[int, float]          # a configured number as given (a rate of 2 stays 2)


class StageShape(Open):
    """One stage of load.stages as the schedule describes it."""
    index: int
    rate: Optional[Num] = None
    concurrency: Optional[int] = None
    start_s: Num = 0
    duration_s: Num = 0


class ImagesShape(Open):
    """workload.images: the pool the prompts' images came from."""
    count: Optional[int] = None
    width: Optional[int] = None
    height: Optional[int] = None
    format: Optional[str] = None
    pool: Optional[Any] = None
    bytes_mean: Optional[float] = None
    bytes_max: Optional[int] = None


class AudioShape(Open):
    """workload.audio as given: the clips' seconds, sample rate, format, pool."""
    seconds: Optional[Any] = None
    sample_rate: Optional[Any] = None
    format: Optional[Any] = None
    pool: Optional[Any] = None


class ProbeAsked(Open):
    """load.probe: the side stream asked for."""
    rate: Optional[Num] = None
    prompt_tokens: Optional[int] = None
    output_tokens: Optional[int] = None


class Schedule(Open):
    """loadgen.scenario.schedule.Schedule.describe(): what the seeded schedule holds."""
    mode: Optional[str] = None
    target_rate: Optional[float] = None
    scheduled_count: Optional[int] = None
    scheduled_rate: Optional[float] = None
    stages: Optional[list[StageShape]] = None
    time_scale: Optional[float] = None


class Workload(Open):
    """WorkloadPlan.describe(): where the prompts came from and how they were counted."""
    source: Optional[str] = None
    path: Optional[str] = None
    tokenizer: Optional[str] = None
    token_count: Optional[str] = None
    seed: Optional[int] = None
    file_prompts: Optional[int] = None
    prefix: Optional[dict[str, Any]] = Field(None, description="workload.prefix: groups, tokens")
    shared_prefix_tokens: Optional[int] = None
    trace: Optional[dict[str, Any]] = None
    sessions: Optional[dict[str, Any]] = None
    images: Optional[ImagesShape] = Field(
        None, description="workload.images: count, width, height, format, pool, bytes_mean/max")
    audio: Optional[AudioShape] = None


class ClientLoad(Open):
    """loadgen.client.load_monitor.ClientLoad's result: CPU share of one core and event-loop lag."""
    cpu_util: Optional[float] = None
    loop_lag_ms_p99: Optional[float] = None


class Probe(Open):
    """loadgen.targets.probe's findings before the run (status, dropped fields, warnings)."""
    status: Optional[str] = None
    dropped_fields: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)


class HostLoad(CalibrationHostLoad):
    """analysis.roofline.host_load.over_run: the whole host over the measured phase (the
    calibration's host-load block, and the managed server's CPUs counted apart)."""
    server_cpus: Optional[float] = Field(None, description="the managed server's CPUs, apart")


class CostPrice(Open):
    """The scenario's cost block (loadgen.scenario.cost.cost_meta): the prices as given."""
    usd_per_hour: Optional[float] = Field(None, description="per accelerator")
    usd_per_kwh: Optional[float] = None
    accelerators: Optional[int] = None
    accelerators_source: Optional[str] = None


class ClientTransport(Open):
    """Client.transport_info(): wire | aiohttp, the stamp source (kernel | user | mixed), clock."""
    transport: Optional[str] = None
    stamp_source: Optional[str] = None


class ClientProcess(Open):
    """One sender process of a ``client.processes: N`` run (loadgen.engine.procs.parent)."""
    index: Optional[int] = None
    pid: Optional[int] = None
    status: Optional[str] = Field(None, description="done | stopped | failed | died")
    exit_code: Optional[int] = None
    cpu_s: Optional[float] = None
    cpu_util: Optional[float] = Field(None, description="its CPU share of one core")
    loop_lag_ms_p99: Optional[float] = None
    records: Optional[int] = Field(None, description="records it wrote")
    cancelled_unwritten: Optional[int] = Field(
        None, description="requests it owed but never wrote, recorded 'cancelled' by the merge")


class ServerMetricsScrape(Open):
    """targets.scrape's description of the /metrics scrape (status, file, counts)."""
    status: Optional[str] = None


class CacheHygiene(Open):
    """loadgen.multirun.cache_hygiene: what earlier sweep points left in a prefix cache."""
    prompts_seen_before: Optional[int] = None
    reset: Optional[Any] = None
    warning: Optional[str] = None


class RunMeta(RunFile):
    """meta.json (see docs/architecture.md, "The run directory")."""
    loadgen_version: Optional[str] = None
    scenario: Optional[str] = None
    run_dir: Optional[str] = None
    started_at_unix: Optional[float] = None
    engine: Optional[Literal["native", "locust"]] = None
    event_loop: Optional[str] = None
    mode: Optional[Mode] = None
    target_url: Optional[str] = None
    model: Optional[str] = None
    endpoint: Optional[str] = None
    stream: Optional[bool] = None
    t0_ns: Optional[int] = Field(None, description="start of the measured phase (records' clock)")
    end_ns: Optional[int] = Field(None, description="end of the measured phase")
    clock: Optional[str] = None
    rate: Optional[float] = Field(None, description="load.rate in server mode, else null")
    scheduled_rate: Optional[float] = None
    schedule: Optional[Schedule] = None
    schedule_seed: Optional[int] = None
    in_flight_cap: Optional[int] = Field(
        None, description="the most requests in flight: load.concurrency (closed loop), "
                          "load.max_concurrency (open loop, offline), the Locust users; null: none")
    num_requests: Optional[int] = None
    duration_s: Optional[float] = None
    warmup_requests: Optional[int] = None
    records_written: Optional[int] = None
    unsent_requests: Optional[int] = Field(
        None, description="planned requests never sent (the run ended early); null: not counted")
    min_duration_s: Optional[float] = None
    min_queries: Optional[int] = None
    drain_timeout_s: Optional[float] = None
    slo: Optional[dict[str, Any]] = Field(None, description="the scenario's slo block")
    workload: Optional[Workload] = None
    client_cpu: Optional[float] = Field(
        None, description="client CPU share of one core (several processes: the busiest one's)")
    client_load: Optional[ClientLoad] = None
    power_sources: Optional[list[Union[str, dict[str, Any]]]] = None
    power: Optional[dict[str, Any]] = None
    interrupted: Optional[bool] = None
    interrupt_signal: Optional[str] = None
    crashed: Optional[str] = None
    managed_server_alive_at_end: Optional[bool] = None
    client_cpus: Optional[list[int]] = None
    server_metrics: Optional[ServerMetricsScrape] = None
    probe: Optional[Probe] = None
    client_connections: Optional[dict[str, Any]] = None
    client_transport: Optional[ClientTransport] = None
    host_load: Optional[HostLoad] = Field(
        None, description="the whole host over the measured phase (analysis.roofline.host_load: "
                          "loadavg_1m, ncpu, other_cpus, steal_fraction, seconds, busy, reasons)")
    calibration: Optional[dict[str, Any]] = Field(
        None, description="loadgen.run.calibration: the host calibration after the run")
    cache_hygiene: Optional[CacheHygiene] = None
    locust: Optional[dict[str, Any]] = Field(None, description="the Locust engine's workers")
    client_processes: Optional[list[ClientProcess]] = Field(
        None, description="client.processes > 1: each sender process (records' worker = index)")
    probe_stream: Optional[ProbeAsked] = Field(
        None, description="load.probe: the side stream asked for and sent (probe_stream.jsonl)")
    device_spec: Optional[str] = Field(None, description="a device-spec file for the roofline")
    accuracy: Optional[Any] = Field(None, description="an accuracy check, when one ran")
    cost: Optional[CostPrice] = Field(
        None, description="the scenario's cost block: usd_per_hour (per accelerator), usd_per_kwh, "
                          "accelerators (analysis.metrics.cost prices the run with them)")
    running_after: Optional[dict[str, Any]] = Field(
        None, description="load.cancel: the server's running-requests gauge after the run "
                          "(loadgen.run.running_after: metric, value, waited_s, leaked, reason)")

    def model_name(self, sut=None) -> Optional[str]:
        """The model the run measured, from one place in a fixed order: meta.json's ``model``
        (the name every request carried), else sut.json's (what /v1/models served), else the
        managed server's preset (its /info). ``sut``: the run's Sut, or None."""
        if self.model:
            return self.model
        if sut is None:
            return None
        return sut.model or sut.info.get("preset")

    @field_validator("client_cpu", mode="before")
    @classmethod
    def _cpu_number(cls, v):
        """Older writers gave a dict ({"fraction"} or {"mean"}): read as the number."""
        if isinstance(v, dict):
            v = v.get("fraction", v.get("mean"))
        return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None
