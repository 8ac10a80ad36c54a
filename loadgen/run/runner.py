"""One run: scenario ─► run directory with records, metadata, summary.

    Scenario ─► workload.py (PromptSpecs) + schedule.py (offsets)      [errors before any I/O]
        ─► rundir.claim (made and locked) ─► scenario.yaml (resolved; secrets redacted)
        ─► managed.py (start + health-check target.server; server.log)    or target.url(s)
        ─► preflight.py: readiness, probe, context fit [exit 2] ─► sut.json
        ─► power (power.jsonl) ─► server_metrics.py (server_metrics.jsonl)
        ─► fdlimit.py (RLIMIT_NOFILE raised to the hard limit; one warning line if too few)
        ─► warm-up (phase "warmup", closed loop) ─► [load.probe: probes alone, probe_stream.py]
        ─► t0 ─► dispatch.py drives engine/core/pacing.py (the mode's strategy)  [+ probe_stream.jsonl]
            planned runs: planned.py builds each request as it is sent (memory: what is in
            flight) ─► Client.execute ─► Record ─► records.jsonl (one write per record)
           (client.processes > 1: loadgen.engine.procs, N sender processes, parts merged)
        ─► meta.json (mode, t0, rates, client CPU, interruption) ─► device.json (calibration.py:
           the roofline's device spec, frozen) ─► analysis.metrics.summary ─► summary.json
    The run dir, the server, the CPUs and the end (meta, device, summary) are harness.py's,
    every engine's; the Locust engine's processes run here as ``senders`` (as --procs' do).

Signals (plain handlers, so they work while the loop runs synchronous code): the first SIGINT/
SIGTERM in the load phase stops issuing, cancels what is in flight, writes every unfinished
request as "cancelled", and still writes meta.json and summary.json (``interrupted: true``);
in any other phase, or the second signal anywhere, ends the run at once (KeyboardInterrupt;
after the load began, meta.json is still written).
"""
from __future__ import annotations

import asyncio
import contextlib
import signal
from typing import Optional

from analysis.roofline import host_load
from loadgen.client import eventloop
from loadgen.targets import sut as sut_mod
from loadgen.client.balance import open_client
from loadgen.client.hangup import HangupRule
from loadgen.client.http_client import Client, ClientConfig, RequestSpec
from loadgen.client.load_monitor import ClientLoad
from loadgen.engine.aio.dispatch import Dispatcher, Ledger, spec_factory
from loadgen.engine.aio.probe_stream import ProbeStream
from loadgen.scenario.session_turns import turn_headers
from loadgen.targets.managed import ManagedServer
from loadgen.console.progress import RunProgress
from loadgen.record import RecordWriter, arrow_writer, now_ns
from loadgen.run.rundir import write_json
from loadgen.scenario.model import Scenario
from loadgen.scenario.schedule import Schedule
from loadgen.targets.scrape import ServerMetricsScraper
from loadgen.scenario.workload import PromptSpec, WorkloadPlan
from loadgen.run.harness import Placed, RunResult, around
from loadgen.run.meta import run_meta
from loadgen.run.outcome import Outcome, Prepared, prepare
from loadgen.engine.aio.planned import Planned
from loadgen.run.preflight import TargetFacts, describe_target
from loadgen.run import fdlimit
from loadgen.run.power_hook import PowerHook
from loadgen.engine.procs.parent import Senders
from loadgen.engine.core.partition import for_run as processes_for
from loadgen.engine.core.pacing import Closed, Pacing, pacing_for
from loadgen.engine.core.plan import Plan
from loadgen.engine.aio.sessions import SessionDriver

class Run:
    """State of one run; ``execute()`` is the whole lifecycle."""

    def __init__(self, sc: Scenario, progress: Optional[RunProgress] = None,
                 server: Optional[ManagedServer] = None, prepared: Optional[Prepared] = None,
                 senders=None):
        self.sc = sc
        self.shared_server = server          # already running (a sweep's); not stopped here
        self.prepared = prepared or prepare(sc)     # plan, schedule, API key, run dir (outcome.py)
        self.plan: WorkloadPlan = self.prepared.plan
        self.schedule: Schedule = self.prepared.schedule
        self.key = self.prepared.key
        self.run_dir = self.prepared.run_dir
        self.progress = progress or RunProgress(None, enabled=False)
        self.stop = None                    # asyncio.Event, made inside the loop
        self.interrupted: Optional[str] = None
        self.hurry = False                  # a second signal came: finish with meta.json only
        self.cooperative = True             # a first signal stops the load (else it raises)
        self.placed: Optional[Placed] = None   # harness.around's: base URL, server, CPUs
        self.base_url: Optional[str] = None
        self.model: Optional[str] = None
        self.cap: Optional[int] = None
        self.writer: Optional[RecordWriter] = None
        self.dispatcher: Optional[Dispatcher] = None
        self.session_driver: Optional[SessionDriver] = None
        self.power: Optional[PowerHook] = None
        self.cpu = ClientLoad()
        self.t0: Optional[int] = None
        self.end: Optional[int] = None
        self.crashed: Optional[str] = None
        self.server_alive_at_end: Optional[bool] = None
        self.scraper: Optional[ServerMetricsScraper] = None
        self.server_metrics: Optional[dict] = None
        self.probe: Optional[dict] = None       # targets.probe's findings (meta.json "probe")
        self.drop_fields: tuple = ()            # fields the server rejected, dropped
        self.client: Optional[Client] = None    # the measured phase's (meta: its retries)
        # sender processes run by _main, their outcome(out) meta's: client.processes > 1's
        # engine.procs.parent.Senders, or the Locust engine's LocustRun (given to Run())
        self.senders = senders
        self.facts: Optional[TargetFacts] = None     # preflight's (frozen)
        self.probe_stream: Optional[ProbeStream] = None   # load.probe

    # -- sync shell: run dir, managed server, meta/summary (harness.py, every engine's) -----
    def execute(self) -> RunResult:
        return around(self, lambda placed: eventloop.run(self._main(placed)))

    @property
    def server(self) -> Optional[ManagedServer]:
        """The managed server of this run (harness.Placed), or None."""
        return self.placed.server if self.placed is not None else None

    @property
    def client_cpus(self) -> Optional[list[int]]:
        """The CPUs loadgen kept to (target.server.cpus' rest), or None."""
        cpus = self.placed.client_cpus if self.placed is not None else None
        return list(cpus) if cpus else None

    # -- signals ----------------------------------------------------------------------------
    def _install_signals(self) -> None:
        """Plain SIGINT/SIGTERM handlers (see the module doc): ``cooperative`` phases stop at
        the first signal; elsewhere, or at the second (``hurry``), KeyboardInterrupt at once."""
        self._loop = asyncio.get_running_loop()
        for s in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError, TypeError):     # not the main thread
                signal.signal(s, self._signal)

    def _signal(self, signum, frame) -> None:
        if self.interrupted is not None:
            self.hurry = True
            raise KeyboardInterrupt
        self.interrupted = signal.Signals(signum).name
        loop = getattr(self, "_loop", None)
        if self.cooperative and loop is not None and loop.is_running():
            loop.call_soon_threadsafe(self.stop.set)
            return
        raise KeyboardInterrupt

    # -- async body -------------------------------------------------------------------------
    async def _describe_target(self, base_url: str) -> dict:
        """Readiness, probe, context fit, sut.json (loadgen.run.preflight; both engines): the
        target's facts kept (``facts``, frozen), sut.json's form returned."""
        f = self.facts = await describe_target(self, base_url)
        self.base_url, self.model, self.drop_fields, self.probe = (
            f.base_url, f.model, f.drop_fields, f.probe)
        return f.sut

    async def _main(self, placed: Placed) -> None:
        self.placed, base_url = placed, placed.base_url
        self.stop = asyncio.Event()
        self._install_signals()
        a, ld = self.sc.api, self.sc.load
        self.cooperative = False            # readiness, probe, fit: a signal ends the run here
        sut = await self._describe_target(base_url)
        self.cooperative = True
        model = self.model
        cap = self.cap = ld.in_flight_cap
        n = self.schedule.count if self.schedule.count is not None else ld.num_requests
        # which prompt each id gets: the senders' rule (a --procs child's or Locust worker's too)
        warm, stream = Plan(self.sc, 0, 1, self.plan, self.schedule).prompt_streams()

        make = RequestSpec.of               # (PromptSpec, id) ─► a measured RequestSpec

        self.writer = RecordWriter(self.run_dir / "records.jsonl")
        ledger = Ledger(self.writer, self.progress.on_done)
        planned: Optional[Planned] = None
        try:
            self.power = PowerHook(self.sc.power, self.run_dir).start()
            tg = self.sc.target
            self.scraper = await ServerMetricsScraper(
                base_url, self.run_dir, tg.metrics_interval_s, headers=a.headers,
                path=tg.metrics_path, api_key=self.key, enabled=tg.scrape_metrics,
                timeout_s=min(5.0, a.timeout_s)).start()
            if self.senders is None:    # else the Locust engine's (engine/locust/run.py)
                procs = processes_for(self, self.progress.warn)
                bound = fdlimit.check(self.sc, self.schedule, procs, self.progress)
                if procs > 1:       # client.processes: N sender processes (loadgen.engine.procs)
                    self.senders = Senders(self, procs)
            if self.senders is not None:
                try:
                    await self.senders.measure(sut)
                finally:
                    self._took(self.senders)
                if self.server is not None:
                    self.server_alive_at_end = self.server.alive
                return
            if self.sc.output.records == "arrow":    # issue 42: records.arrow
                self.writer = ledger.writer = arrow_writer(self.writer, self.run_dir)
            cfg = ClientConfig.from_api(a, base_url, model, self.key, self.drop_fields)
            cfg.cancel = HangupRule.of_scenario(self.sc)     # load.cancel (client/hangup.py)
            tg = self.sc.target
            async with open_client(cfg, tg.replica_urls, tg.balance,
                                   cap or min(max(1, n or 1), bound)) as client, \
                    contextlib.AsyncExitStack() as side:
                self.client = client
                w = ld.warmup_requests
                await self._warmup(client, ledger, spec_factory(warm, make, 0), w, cap)
                if ld.probe is not None:     # load.probe: its own client, its own file
                    self.probe_stream = await side.enter_async_context(
                        ProbeStream(self.sc, self.run_dir, cfg, self.stop))
                    await self.probe_stream.alone()
                self.progress.start("measured", n)
                d = self.dispatcher = Dispatcher(client, ledger, self.stop, ld.drain_timeout_s,
                                                 self.progress.on_send)
                d.max_in_flight = bound        # no cap: what the descriptors allow (fdlimit.py)
                pacing = pacing_for(ld, self.schedule, self.plan.sessions is not None)
                if pacing.planned:
                    planned = Planned(stream, make, w, n)     # built as sent (planned.py)
                specs = planned if pacing.planned else spec_factory(stream, make, w)
                await self._measure(d, pacing, specs, cap)
                if self.server is not None:
                    self.server_alive_at_end = self.server.alive
                sut["completion_response_headers"] = sut_mod.keep_headers(
                    client.first_response_headers)
                write_json(self.run_dir / "sut.json", sut)
        except BaseException as e:
            # a crash: nothing may stay unrecorded. Cancel what runs, then the never-sent.
            self.crashed = self.crashed or f"{type(e).__name__}: {e}"
            if self.dispatcher is not None and not self.hurry:
                self.dispatcher.cancel_reason = f"run aborted ({type(e).__name__})"
                with contextlib.suppress(BaseException):
                    await self.dispatcher.cancel_all()
            raise
        finally:
            await self._close(ledger, planned)

    def _took(self, s) -> None:
        """What the sender processes found (they read the run, never write it): the measured
        window, an interruption (Locust's master told to stop), a crash."""
        self.t0 = self.t0 if s.t0 is None else s.t0
        self.end = self.end if s.end is None else s.end
        self.interrupted = self.interrupted or getattr(s, "interrupted", None)
        self.crashed = self.crashed or s.crashed

    async def _measure(self, d: Dispatcher, pacing: Pacing, specs, cap: Optional[int]) -> None:
        """The measured phase between the marks that power, /metrics and client load share:
        ``pacing`` (the mode's strategy, engine/core/pacing.py) driven from t0 on ``specs``."""
        await self.mark("measure_start")
        self.cpu.start()
        self.t0 = now_ns() + pacing.t0_lead_ns
        pacing.begin(self.t0)
        if self.probe_stream is not None:
            self.probe_stream.start_beside(self.t0)
        if pacing.sessions:
            await self._sessions(d, pacing)
        else:
            await d.measure(pacing, specs, cap)
        self.end = now_ns()
        if self.probe_stream is not None:     # no new probe; those in flight end
            await self.probe_stream.finish()
        await self.mark("measure_end")

    async def mark(self, what: str) -> None:
        """An edge of the measured window ("measure_start" / "measure_end"), every engine's:
        marked in power.jsonl and the /metrics scrape; the whole host's load between the two
        (meta.json ``host_load``: a busy host told from a saturated client, issue 29 item 12)."""
        self.power.mark(what)
        await self.scraper.mark(what)
        server = self._server_cpu()     # target.server: the system under test, counted apart
        if what == "measure_start":
            self.host_at_t0 = host_load.snapshot(server_cpu=server)
        elif getattr(self, "host_at_t0", None) is not None:
            self.host_load = host_load.over_run(self.host_at_t0, server_cpu=server)

    def _server_cpu(self):
        """The managed server's CPU-seconds reader (its process tree), or None (no target.server)."""
        proc = getattr(self.server, "proc", None) if self.server is not None else None
        pid = getattr(proc, "pid", None)
        return (lambda: host_load.tree_cpu_s(pid)) if pid else None

    def _turn_spec(self, turn, k: int, messages: list, session, i: int) -> RequestSpec:
        """One turn of a session: the conversation so far, the answer's text kept for the next."""
        return RequestSpec.of(PromptSpec(turn.user, turn.user_tokens, turn.max_tokens), i,
                              messages=messages, session_id=session.id, turn=k, want_text=True,
                              headers=turn_headers(self.sc.api.session_header, session.id))

    async def _sessions(self, d: Dispatcher, p: Pacing) -> None:
        """Multi-turn sessions: new ones at the schedule's times, or N concurrent ones."""
        ld = self.sc.load
        drv = self.session_driver = SessionDriver(d, iter(self.plan.sessions), self._turn_spec,
                                                  ld.warmup_requests, ld.num_requests, p.end_ns)
        if p.offsets is not None:
            await drv.server(p.offsets, self.t0)
        else:
            await drv.concurrency(p.users, self.t0)

    async def _close(self, ledger: Ledger, planned: Optional[Planned]) -> None:
        """Whatever happened: every planned request recorded once (but after a second signal),
        samplers stopped, files closed."""
        if planned is not None and not self.hurry:
            self.cooperative = False
            at = None if self.t0 is None else (lambda k: self.t0 + int(self.schedule.offsets_ns[k]))
            ledger.cancel_many(planned.rest(0, at, ledger.written),
                               "scheduled but never sent: run ended early")
        if self.cpu.result is None and self.t0 is not None:
            self.cpu.stop()
        if self.power is not None:
            self.power.stop()
        if self.scraper is not None:
            self.server_metrics = await self.scraper.stop()
        self.writer.close()
        self.progress.stop()
        if ledger.failed is not None:   # records.jsonl could not be written (disk full): a crash
            self.crashed = self.crashed or str(ledger.failed)
            raise ledger.failed

    async def _warmup(self, client: Client, ledger: Ledger, next_spec, w: int,
                      cap: Optional[int]) -> None:
        """``w`` warm-up requests, closed loop, recorded with phase "warmup" (not measured)."""
        if not w:
            return

        def warm_spec():
            s = next_spec()
            s.phase = "warmup"
            return s
        self.progress.start("warm-up", w)
        self.dispatcher = Dispatcher(client, ledger, self.stop, self.sc.load.drain_timeout_s,
                                     self.progress.on_send)
        warm = Closed(self.sc.load.drain_timeout_s, min(w, cap or w), w).begin(now_ns())
        await self.dispatcher.measure(warm, warm_spec)

    def outcome(self) -> Outcome:
        """How the run went, for meta.json (loadgen.run.outcome; the Locust engine makes its own)."""
        return Outcome(
            engine="native", target_url=self.base_url, model=self.model, t0_ns=self.t0,
            end_ns=self.end, in_flight_cap=self.sc.load.in_flight_cap,
            records_written=self.writer.count if self.writer else 0,
            unsent_requests=getattr(self.dispatcher, "unsent_requests", None),
            client_load=self.cpu.result, power=self.power.result if self.power is not None else None,
            interrupted=self.interrupted, crashed=self.crashed,
            managed_server_alive_at_end=self.server_alive_at_end, client_cpus=self.client_cpus,
            server_metrics=self.server_metrics, probe=self.probe,
            client_connections=self.client.describe() if self.client is not None else None,
            client_transport=self.client.transport_info() if self.client is not None else None,
            probe_stream=self.probe_stream.describe() if self.probe_stream is not None else None)

    def meta(self) -> dict:
        """meta.json: what was prepared and how it went (loadgen.run.meta.run_meta)."""
        out = self.outcome()
        meta = run_meta(self.prepared, self.senders.outcome(out) if self.senders else out)
        meta["host_load"] = getattr(self, "host_load", None)   # busy host vs saturated client
        return meta

def run_scenario(sc: Scenario, progress: Optional[RunProgress] = None,
                 server: Optional[ManagedServer] = None) -> RunResult:
    """Run ``sc`` to the end (or to an interrupt) and return where its files are. ``server``:
    an already running managed server to use instead of starting target.server."""
    return Run(sc, progress, server).execute()
