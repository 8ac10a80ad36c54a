"""One run: scenario ─► run directory with records, metadata, summary.

    Scenario ─► workload.py (PromptSpecs) + schedule.py (offsets)      [errors before any I/O]
        ─► run_dir/scenario.yaml (resolved; API key never written, only api_key_env's name)
        ─► managed.py (start + health-check target.server; server.log)    or target.url(s)
        ─► ready.py (wait: /health 200, no 503; api.ready_timeout_s, a live line)       [exit 2]
        ─► probe.py (GET /v1/models: reachable, authorised, api.model listed; one small request
                     with the run's body: fields the server rejects dropped or a stop) [exit 2]
           fit.py (largest prompt + output within the server's stated context)         [exit 2]
        ─► sut.py (/v1/models, headers, /info, client host ─► sut.json)
        ─► power (loadgen.power sampler ─► power.jsonl, when power.sources != ["none"])
        ─► server_metrics.py (GET /metrics every target.metrics_interval_s ─► server_metrics.jsonl)
        ─► warm-up (phase "warmup", closed loop) ─► [load.probe: probes alone, probe_stream.py]
        ─► t0 ─► dispatch.py (offline|server|closed)   [+ probes beside it ─► probe_stream.jsonl]
            ─► Client.execute ─► Record ─► records.jsonl (flushed per request)
           (client.processes > 1: loadgen.run.procs, N sender processes, parts merged)
        ─► meta.json (mode, t0, rates, client CPU, interruption) ─► device.json (calibration.py:
           the roofline's device spec, frozen) ─► analysis.metrics.summary ─► summary.json

SIGINT/SIGTERM during the run stop issuing, cancel what is in flight, write every unfinished
request as "cancelled", and still write meta.json and summary.json (``interrupted: true``).
"""
from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from analysis.roofline import host_load
from loadgen.client import eventloop
from analysis.metrics import slo as slo_mod
from loadgen.targets import fit as fit_mod
from loadgen.targets import probe as probe_mod
from loadgen.targets import ready as ready_mod
from loadgen.targets import sut as sut_mod
from loadgen.client.balance import open_client
from loadgen.client.client import Client, ClientConfig, RequestSpec
from loadgen.client.clientload import ClientLoad
from loadgen.run.dispatch import Dispatcher, Ledger, closed_stages, spec_factory
from loadgen.run.probe_stream import ProbeStream
from loadgen.targets.managed import ManagedServer, ServerStartError
from loadgen.run.progress import RunProgress
from loadgen.record import RecordWriter, now_ns
from loadgen.run.storage import atomic_write_text
from loadgen.run.rundir import claim, release, resolved_yaml, summarize_dir, write_json
from loadgen.scenario.model import Scenario, ScenarioError
from loadgen.scenario.schedule import Schedule
from loadgen.targets.scrape import ServerMetricsScraper
from loadgen.scenario.workload import WorkloadPlan
from loadgen.run.calibration import freeze_device
from loadgen.run.meta import run_meta, write_meta
from loadgen.run.outcome import Outcome, Prepared, prepare
from loadgen.run.power_hook import PowerHook
from loadgen.run.procs.parent import Senders
from loadgen.run.senders.partition import for_run as processes_for
from loadgen.run.sessions import SessionDriver

T0_LEAD_NS = 20_000_000     # t0 a little after set-up so the first sends are not born late


@dataclass
class RunResult:
    run_dir: Path
    meta: dict
    summary: Optional[dict]
    interrupted: bool


class Run:
    """State of one run; ``execute()`` is the whole lifecycle."""

    def __init__(self, sc: Scenario, progress: Optional[RunProgress] = None,
                 server: Optional[ManagedServer] = None, prepared: Optional[Prepared] = None):
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
        self.server: Optional[ManagedServer] = None
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
        self.summary: Optional[dict] = None
        self.server_alive_at_end: Optional[bool] = None
        self.client_cpus: Optional[list[int]] = None
        self.scraper: Optional[ServerMetricsScraper] = None
        self.server_metrics: Optional[dict] = None
        self.probe: Optional[dict] = None       # targets.probe's findings (meta.json "probe")
        self.drop_fields: tuple = ()            # fields the server rejected, dropped
        self.client: Optional[Client] = None    # the measured phase's (meta: its retries)
        self.senders = None     # client.processes > 1: loadgen.run.procs.parent.Senders
        self.probe_stream: Optional[ProbeStream] = None   # load.probe

    # -- sync shell: run dir, managed server ----------------------------------------------
    def execute(self) -> RunResult:
        claim(self.run_dir)        # made and locked: a second run here at once gets exit 2
        atomic_write_text(self.run_dir / "scenario.yaml", resolved_yaml(self.sc))
        meta: dict = {}
        self._saved_handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        first: Optional[BaseException] = None     # what ended the run, if it failed
        try:
            with contextlib.ExitStack() as stack:
                base_url = self.sc.target.primary_url
                if self.shared_server is not None:
                    if not self.shared_server.alive:
                        raise ServerStartError(
                            f"target.server: the shared server exited (code "
                            f"{self.shared_server.proc.poll()}; {self.shared_server.log_path})")
                    self.server = self.shared_server
                    base_url = self.server.base_url
                elif self.sc.target.server is not None:
                    self.server = stack.enter_context(ManagedServer(self.sc.target.server,
                                                                    self.run_dir))
                    base_url = self.server.base_url
                stack.enter_context(self.client_affinity())
                eventloop.run(self._main(base_url.rstrip("/")))
        except BaseException as e:
            first = e
            raise
        finally:
            try:
                meta = self._finish(meta)
            except OSError:     # a full disk: records.jsonl failed first, that is the error shown
                if first is None:
                    raise
            for sig, handler in self._saved_handlers.items():   # the second-signal handler off
                with contextlib.suppress(ValueError, TypeError):
                    signal.signal(sig, handler)
            release(self.run_dir)            # the claim (rundir.claim) ends with the run
        return RunResult(self.run_dir, meta, self.summary, bool(self.interrupted))

    def _finish(self, meta: dict) -> dict:
        """meta.json, device.json, summary.json once the load phase began (a second signal:
        meta.json only)."""
        if self.writer is None:
            return meta
        meta = write_meta(self.run_dir, self.meta())
        if self.hurry:
            return meta
        own = self.server is not None and self.shared_server is None  # stopped by now
        meta["calibration"] = freeze_device(self.run_dir, own and not self.crashed)
        meta = write_meta(self.run_dir, meta)                 # device.json written
        try:
            self.summary = summarize_dir(self.run_dir, meta, self.sc.output.report)
        except Exception:
            if not self.crashed:  # after a crash, the crash is the error to show
                raise
        return meta

    @contextlib.contextmanager
    def client_affinity(self):
        """With target.server.cpus, run loadgen on the remaining CPUs for the run's length."""
        cpus = self.server.spec.cpus if self.server is not None else None
        try:
            before = os.sched_getaffinity(0)
        except (AttributeError, OSError):
            before = None
        rest = sorted(before - set(cpus)) if cpus and before else []
        if rest:
            os.sched_setaffinity(0, rest)
            self.client_cpus = rest
        try:
            yield
        finally:
            if rest:
                os.sched_setaffinity(0, before)

    # -- signals ----------------------------------------------------------------------------
    def _on_signal(self, signame: str) -> None:
        """The first SIGINT/SIGTERM: stop issuing, cancel what is in flight, keep every record.
        From then on a plain handler (it runs even while the loop is busy in synchronous code):
        the second signal raises KeyboardInterrupt at once; only meta.json is still written."""
        if self.interrupted is None:
            self.interrupted = signame
            self.stop.set()
            loop = asyncio.get_running_loop()
            for s in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.remove_signal_handler(s)
                    signal.signal(s, self._second_signal)

    def _second_signal(self, signum, frame) -> None:
        self.hurry = True
        raise KeyboardInterrupt

    def _install_signals(self) -> None:
        loop = asyncio.get_running_loop()
        for s in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(s, self._on_signal, s.name)

    # -- async body -------------------------------------------------------------------------
    async def _describe_target(self, base_url: str) -> dict:
        """The model to ask for (api.model, else /v1/models' first id) and sut.json's first form;
        first the wait for readiness (loadgen.targets.ready), then with api.probe the checks of
        loadgen.targets.probe and the context fit (loadgen.targets.fit) (ProbeError: exit 2)."""
        a = self.sc.api
        models, ready = await ready_mod.wait_ready(
            base_url, self.key, a.headers, a.connect_timeout_s,
            ready_mod.ready_timeout_s(a, self.server is not None),
            self.server.spec.health_path if self.server is not None else "/health")
        warnings: list = slo_mod.stream_warnings(self.sc.slo.model_dump(), a.stream)
        if a.probe:
            model, found = probe_mod.check_models(
                base_url, models, a.model, a.api_key_env, managed=self.server is not None,
                where="target.urls" if self.sc.target.urls else None)
            warnings += found
        else:
            model = a.model or sut_mod.first_model_id(models.get("models"))
        if model is None:
            raise ScenarioError(f"api.model: not given, and {base_url}/v1/models named no model "
                                f"({models.get('error') or 'status ' + str(models.get('status'))})")
        self.base_url, self.model = base_url, model
        for other in (self.sc.target.replica_urls or [])[1:]:   # every replica ready, same model
            more, _ = await ready_mod.wait_ready(
                other, self.key, a.headers, a.connect_timeout_s,
                ready_mod.ready_timeout_s(a, False), "/health")
            if a.probe:
                probe_mod.check_models(other, more, model, a.api_key_env, where="target.urls")
        own = await sut_mod.fetch_self_description(base_url, self.key, a.connect_timeout_s)
        if a.probe:
            info = own.get("info") or (self.server.info if self.server is not None else None)
            context = fit_mod.check_context_fit(self.plan, self.sc.load, a.endpoint,
                                                models.get("models"), model, info)
            mt = a.extra_body.get("min_tokens")
            res = await probe_mod.probe_request(
                ClientConfig.from_api(a, base_url, model, self.key), a.drop_rejected_fields,
                mt if isinstance(mt, int) and not isinstance(mt, bool) else 1, ready)
            res.warnings[:0] = warnings
            res.context = context
            if res.warnings and res.status == "ok":
                res.status = "warning"
            self.drop_fields = tuple(res.dropped_fields)
            self.probe = res.to_dict()
        else:
            self.probe = {"status": "skipped", "warnings": warnings, "dropped_fields": [],
                          "ready": ready.describe()}
        warn = getattr(self.progress, "warn", None)
        for w in self.probe["warnings"]:
            if warn is not None:
                warn(w)
        sut = sut_mod.describe_sut(base_url, models,
                                   self.server.describe() if self.server else None, model,
                                   a.endpoint, own)
        write_json(self.run_dir / "sut.json", sut)
        return sut

    async def _main(self, base_url: str) -> None:
        self.stop = asyncio.Event()
        self._install_signals()
        a, ld = self.sc.api, self.sc.load
        sut = await self._describe_target(base_url)
        model = self.model
        cap = self.cap = ld.in_flight_cap
        n = self.schedule.count if self.schedule.count is not None else ld.num_requests
        stream = iter(self.plan)

        def make(p, i: int) -> RequestSpec:
            return RequestSpec(id=i, phase="measured", prompt=p.prompt,
                               prompt_tokens=p.prompt_tokens, max_tokens=p.max_tokens,
                               messages=list(p.messages) if p.messages else None,
                               images=p.images)

        self.writer = RecordWriter(self.run_dir / "records.jsonl")
        ledger = Ledger(self.writer, self.progress.on_done)
        planned: list = []
        try:
            self.power = PowerHook(self.sc.power, self.run_dir).start()
            tg = self.sc.target
            self.scraper = await ServerMetricsScraper(
                base_url, self.run_dir, tg.metrics_interval_s, headers=a.headers,
                path=tg.metrics_path, api_key=self.key, enabled=tg.scrape_metrics).start()
            procs = processes_for(self, self.progress.warn)
            if procs > 1:           # client.processes: N sender processes (loadgen.run.procs)
                self.senders = Senders(self, procs)
                await self.senders.measure(sut)
                return
            cfg = ClientConfig.from_api(a, base_url, model, self.key, self.drop_fields)
            tg = self.sc.target
            async with open_client(cfg, tg.replica_urls, tg.balance,
                                   cap or max(1, n or 1)) as client, \
                    contextlib.AsyncExitStack() as side:
                self.client = client
                w = ld.warmup_requests
                warm = (stream if ld.mode != "trace" and self.plan.sessions is None
                        else self.plan.warmup_specs())
                await self._warmup(client, ledger, spec_factory(warm, make, 0), w, cap)
                if ld.probe is not None:     # load.probe: its own client, its own file
                    self.probe_stream = await side.enter_async_context(
                        ProbeStream(self.sc, self.run_dir, cfg, self.stop))
                    await self.probe_stream.alone()
                self.progress.start("measured", n)
                d = self.dispatcher = Dispatcher(client, ledger, self.stop, ld.drain_timeout_s,
                                                 self.progress.on_send)
                if ld.mode != "concurrency" and self.plan.sessions is None:
                    planned = [make(p, w + i) for i, p in zip(range(n), stream)]
                await self._measure(d, planned, spec_factory(stream, make, w), cap)
                if self.server is not None:
                    self.server_alive_at_end = self.server.alive
                sut["completion_response_headers"] = sut_mod.keep_headers(
                    client.first_response_headers)
                write_json(self.run_dir / "sut.json", sut)
        except BaseException as e:
            # a crash: nothing may stay unrecorded. Cancel what runs, then the never-sent.
            self.crashed = self.crashed or f"{type(e).__name__}: {e}"
            if self.dispatcher is not None:
                self.dispatcher.cancel_reason = f"run aborted ({type(e).__name__})"
                with contextlib.suppress(BaseException):
                    await self.dispatcher.cancel_all()
            raise
        finally:
            await self._close(ledger, planned)

    async def _measure(self, d: Dispatcher, planned: list, next_spec, cap: Optional[int]) -> None:
        """The measured phase between the marks that power, /metrics and client load share."""
        ld = self.sc.load
        self.power.mark("measure_start")
        await self.scraper.mark("measure_start")
        self.cpu.start()
        self.host_at_t0 = host_load.snapshot()       # the whole host's load (issue 29 item 12)
        self.t0 = now_ns() + (T0_LEAD_NS if ld.mode in ("server", "trace") else 0)
        if self.probe_stream is not None:
            self.probe_stream.start_beside(self.t0)
        if self.plan.sessions is not None:
            await self._sessions(d, cap)
        elif ld.mode == "offline":
            await d.offline(planned, self.t0, cap)
        elif ld.mode in ("server", "trace"):     # open loop: the schedule's send times
            await d.server(planned, self.schedule.offsets_ns, self.t0, cap)
        elif self.schedule.stages:
            await closed_stages(d, next_spec, self.schedule.stages, self.t0, ld.num_requests)
        else:
            await d.closed(next_spec, cap or 1, self.t0, ld.num_requests, ld.duration_s)
        self.end = now_ns()
        self.host_load = host_load.over_run(self.host_at_t0)
        if self.probe_stream is not None:     # no new probe; those in flight end
            await self.probe_stream.finish()
        self.power.mark("measure_end")
        await self.scraper.mark("measure_end")

    def _turn_spec(self, turn, k: int, messages: list, session, i: int) -> RequestSpec:
        """One turn of a session: the conversation so far, the answer's text kept for the next."""
        hdr = self.sc.api.session_header
        return RequestSpec(id=i, phase="measured", prompt=turn.user, prompt_tokens=turn.user_tokens,
                           max_tokens=turn.max_tokens, messages=messages, session_id=session.id,
                           turn=k, want_text=True, headers={hdr: session.id} if hdr else None)

    async def _sessions(self, d: Dispatcher, cap: Optional[int]) -> None:
        """Multi-turn sessions: N concurrent ones, or new ones at the schedule's times."""
        ld = self.sc.load
        end = self.t0 + int(ld.duration_s * 1e9) if ld.duration_s else None
        drv = self.session_driver = SessionDriver(d, iter(self.plan.sessions), self._turn_spec,
                                                  ld.warmup_requests, ld.num_requests, end)
        if ld.mode == "server":
            await drv.server(self.schedule.offsets_ns, self.t0)
        else:
            await drv.concurrency(cap or 1, self.t0)

    async def _close(self, ledger: Ledger, planned: list) -> None:
        """Whatever happened: every planned request recorded once, samplers stopped, files closed."""
        ledger.cancel_many(planned, "scheduled but never sent: run ended early")
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
        await self.dispatcher.closed(warm_spec, min(w, cap or w), now_ns(), w, None)

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
