"""What a run was set to do (Prepared) and what it did (Outcome): the two inputs of meta.json.

    Scenario ─► prepare(sc) ─► Prepared (scenario, workload plan, seeded schedule, run dir, API key)
        ─► either engine: runner.Run (asyncio)  |  engine.locust.run.LocustRun (Locust workers)
        ─► Outcome (target, clock marks, counts, client load, power, probe, transport, ending)
    (Prepared, Outcome) ─► loadgen.run.meta.run_meta ─► meta.json

Both engines build the same Prepared (one call: the run directory's name holds the time, so it
is made once and handed on) and return the same Outcome; meta.json is made from those two only,
never by reading an engine's attributes. ``t0_ns``/``end_ns`` are in the Outcome: they are
measured (the native engine's marks, the Locust master's ``go``), not planned.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Optional

from loadgen.run.rundir import api_key, run_dir_for
from loadgen.scenario.dataset import check_endpoint
from loadgen.scenario.model import Scenario
from loadgen.scenario.schedule import Schedule, schedule_of, seed_for
from loadgen.scenario.workload import WorkloadPlan, build_workload


@dataclass(frozen=True)
class Prepared:
    """Everything fixed before the first request. Errors (ScenarioError) come before any I/O but
    the output directory's check (rundir.run_dir_for); each engine claims the run directory
    (rundir.claim: made and locked for this process, so two runs never share one) as it starts."""
    sc: Scenario
    plan: WorkloadPlan
    schedule: Schedule
    run_dir: Path
    key: Optional[str]          # api.api_key_env's value, registered with loadgen.redact

    def describe(self) -> dict:
        """meta.json's view of the plan and schedule: {"workload", "schedule", "schedule_seed"}."""
        return {"workload": self.plan.describe(), "schedule": self.schedule.describe(),
                "schedule_seed": seed_for(self.sc)}


def prepare(sc: Scenario) -> Prepared:
    """The workload plan, the seeded schedule (a trace's times from the plan), the API key and
    the run directory (checked, not made) of ``sc``."""
    plan = build_workload(sc.workload)
    if plan.dataset is not None:        # workload.dataset: messages rows need a chat endpoint
        check_endpoint(plan.dataset, sc.workload.dataset.path, sc.api.endpoint)
    schedule = schedule_of(sc.load, seed_for(sc), plan)
    key = api_key(sc)
    return Prepared(sc, plan, schedule, run_dir_for(sc), key)


@dataclass
class Outcome:
    """How a run went, as either engine reports it (meta.json's keys in brackets)."""
    engine: Literal["native", "locust"]
    target_url: Optional[str] = None            # the base URL the requests went to
    model: Optional[str] = None                 # the model asked for (api.model or /v1/models')
    t0_ns: Optional[int] = None                 # start of the measured phase (records' clock)
    end_ns: Optional[int] = None                # its end
    in_flight_cap: Optional[int] = None         # the most requests in flight (Locust: its users)
    records_written: int = 0
    unsent_requests: Optional[int] = None       # a closed loop's never-started remainder
    client_load: Optional[dict] = None          # ClientLoad's result: cpu_util, loop_lag_ms_p99
    power: Optional[dict] = None                # the power sampler's result
    interrupted: Optional[str] = None           # the signal's name (interrupt_signal)
    crashed: Optional[str] = None               # "Type: message" of what ended the run
    managed_server_alive_at_end: Optional[bool] = None
    client_cpus: Optional[list] = None          # CPUs loadgen kept to (target.server.cpus' rest)
    server_metrics: Optional[dict] = None       # the /metrics scrape's description
    probe: Optional[dict] = None                # targets.probe's findings
    client_connections: Optional[dict] = None   # Client.describe(): retries, reuse
    client_transport: Optional[dict] = None     # Client.transport_info(): wire | aiohttp, stamps
    locust: Optional[dict] = None               # the Locust engine's workers (its engine only)
    client_processes: Optional[list] = None     # client.processes > 1: each sender process
    probe_stream: Optional[dict] = None         # load.probe: ProbeStream.describe()
