"""``loadgen run --engine locust``: the CLI side (no gevent here; Locust runs in subprocesses).

The native engine's steps (run.outcome.prepare, runner.Run's target steps: server, sut.json;
the /metrics scrape process, power) ─► ``python -m loadgen.locust_engine.worker`` as --role
local, or master + N x worker (own sessions: a terminal Ctrl-C reaches only this process,
which tells the master) ─► locust/master.json + the workers' part files ─► the one merge
(senders.journal.merge_parts) ─► Outcome(engine "locust") ─► meta.json, summary.json as the
native engine's. A master error (workers never connected, ...) is meta.crashed.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from analysis.roofline import host_load
from loadgen.run.calibration import freeze_device
from loadgen.run.engines import refusal, workers_error
from loadgen.run.meta import run_meta, write_meta
from loadgen.run.outcome import Outcome, prepare
from loadgen.run.power_hook import PowerHook
from loadgen.run.rundir import claim, defer_summary, resolved_yaml, summarize_dir
from loadgen.run.runner import Run, RunResult
from loadgen.run.senders.clock import clock_info
from loadgen.run.senders.describe import client_load, replicas, transport_info
from loadgen.run.senders.journal import Follower, merge_parts
from loadgen.run.senders.plan import Plan, users_for
from loadgen.scenario.model import ScenarioError
from loadgen.targets.managed import ManagedServer, free_port
from loadgen.targets.scrape import ScrapeProcess

DEFAULT_PORT = 5557
KILL_GRACE_S = 10.0


@dataclass
class LocustOptions:
    workers: Optional[int] = None        # local workers (or, with master, how many to expect)
    master: bool = False                 # this host runs only the master
    master_port: int = DEFAULT_PORT
    bind_host: Optional[str] = None      # None: 127.0.0.1 for local workers, "*" for --master
    connect_timeout_s: float = 60.0
    scenario_path: str = ""
    overrides: list = field(default_factory=list)


def _argv(role: str, opts: LocustOptions, *extra: str) -> list[str]:
    out = [sys.executable, "-m", "loadgen.locust_engine.worker", "--role", role,
           "--scenario", opts.scenario_path]
    for o in opts.overrides:
        out += ["--set", o]
    return out + list(extra)


def _spawn(argv: list[str], log: Path) -> subprocess.Popen:
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with open(log, "ab") as f:
        return subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)


def _stop(p: subprocess.Popen, grace_s: float = KILL_GRACE_S) -> None:
    if p.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            p.terminate()
        try:
            p.wait(grace_s)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _worker_pids(locust_dir: Path) -> dict[int, int]:
    out = {}
    for f in locust_dir.glob("worker-*.json"):
        with contextlib.suppress(ValueError, OSError, KeyError):
            d = json.loads(f.read_text())
            out[int(d["pid"])] = int(d["index"])
    return out


class LocustRun:
    def __init__(self, sc, opts: LocustOptions, progress=None):
        self.sc, self.opts, self.progress = sc, opts, progress
        self.prep = prepare(sc)         # run_dir, plan, schedule, api key: as the native engine
        # the native engine's target steps only (server, affinity, probe, sut.json): never meta
        self.run = Run(sc, prepared=self.prep)
        self.users = users_for(sc, self.prep.schedule, opts.workers)
        bad = (refusal("locust", sc, master=opts.master)      # the rules: run/engines.py
               or workers_error(sc, self.users, opts.workers))
        if bad:
            raise ScenarioError(bad)
        self.dir = self.prep.run_dir / "locust"
        self.interrupted: Optional[str] = None
        self.procs: list[subprocess.Popen] = []
        self.master: Optional[subprocess.Popen] = None
        self.exits: dict[int, int] = {}   # worker pid -> exit code (seen before the master ended)
        self.early: Optional[str] = None  # a worker process that died before it joined
        self.scrape = None                # targets.scrape.ScrapeProcess, once the SUT answered
        self.server_metrics: Optional[dict] = None   # the scrape's description (meta)
        self.server_alive_at_end: Optional[bool] = None
        self.power = None                 # run.power_hook.PowerHook around the workers' run
        self.host_load: Optional[dict] = None   # meta host_load over the measured phase

    def _on_signal(self, signum, frame) -> None:
        if self.interrupted is None:
            self.interrupted = signal.Signals(signum).name
            if self.master is not None and self.master.poll() is None:
                self.master.send_signal(signal.SIGTERM)
        else:
            for p in self.procs:
                with contextlib.suppress(ProcessLookupError):
                    p.kill()

    def execute(self):
        r, run_dir = self.run, self.prep.run_dir
        claim(run_dir)      # made and locked: a second run here at once gets exit 2 (rundir.py)
        self.dir.mkdir(exist_ok=True)
        (run_dir / "scenario.yaml").write_text(resolved_yaml(self.sc), encoding="utf-8")
        old = {}
        if threading.current_thread() is threading.main_thread():  # signals: main thread only
            old = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            with contextlib.ExitStack() as stack:
                base_url = self.sc.target.primary_url     # target.urls: the first one's
                if self.sc.target.server is not None:
                    r.server = stack.enter_context(ManagedServer(self.sc.target.server, run_dir))
                    base_url = r.server.base_url
                stack.enter_context(r.client_affinity())   # target.server.cpus: the rest
                # sut.json as the native engine writes it; /metrics in its own process
                asyncio.run(r._describe_target(base_url.rstrip("/")))
                tg, a = self.sc.target, self.sc.api
                self.scrape = ScrapeProcess(r.base_url, run_dir, tg.metrics_interval_s,
                                            headers=a.headers, path=tg.metrics_path,
                                            api_key=self.prep.key, enabled=tg.scrape_metrics,
                                            timeout_s=min(5.0, a.timeout_s)).start()
                try:
                    self._processes()
                finally:            # before a managed server stops: the last scrape sees it
                    self.server_metrics = self.scrape.stop()
                self.server_alive_at_end = r.server.alive if r.server is not None else None
        finally:
            for s, h in old.items():
                signal.signal(s, h)
            for p in self.procs:
                _stop(p, 2.0)
        return self._finish()

    def _processes(self) -> None:
        o, r = self.opts, self.run
        common = ["--run-dir", str(self.dir), "--base-url", r.base_url, "--model", r.model,
                  "--connect-timeout", str(o.connect_timeout_s),
                  *[a for f in r.drop_fields for a in ("--drop-field", f)]]
        power = self.power = PowerHook(self.sc.power, self.prep.run_dir).start()
        if not o.workers:
            self.master = _spawn(_argv("local", o, *common), self.dir / "local.log")
        else:
            port = o.master_port if o.master else free_port()
            bind = o.bind_host or ("*" if o.master else "127.0.0.1")
            self.master = _spawn(_argv("master", o, *common, "--workers", str(o.workers),
                                       "--master-port", str(port), "--bind-host", bind),
                                 self.dir / "master.log")
        self.procs.append(self.master)
        if o.workers and not o.master:
            for i in range(o.workers):
                self.procs.append(_spawn(_argv(
                    "worker", o, "--records-dir", str(self.dir), "--master-host",
                    "127.0.0.1", "--master-port", str(port)), self.dir / f"worker.{i}.log"))
        follow = Follower(self.dir)
        if self.progress is not None:
            self.progress.start("locust", Plan(self.sc).owed_count())
        marked = False
        while self.master.poll() is None:
            time.sleep(0.05)
            if self.progress is not None:
                follow.poll(self.progress)
            for i, p in enumerate(self.procs[1:]):
                if p.pid not in self.exits and p.poll() is not None:
                    self.exits[p.pid] = p.returncode
                    if p.returncode and p.pid not in _worker_pids(self.dir):
                        self.early = (f"worker process {i} exited with {p.returncode} before "
                                      f"joining (see locust/worker.{i}.log)")
                        self.master.send_signal(signal.SIGTERM)
            if not marked and self._state().get("t0_ns") is not None:   # go, not an early end
                self.host_at_t0 = host_load.snapshot()   # the whole host's load, as natively
                power.mark("measure_start")
                if self.scrape is not None:
                    self.scrape.mark("measure_start")
                marked = True
        if marked:
            self.host_load = host_load.over_run(self.host_at_t0)
        power.mark("measure_end")
        if self.scrape is not None:
            self.scrape.mark("measure_end")
        power.stop()
        for p in self.procs[1:]:                 # the master told them to quit
            try:
                p.wait(KILL_GRACE_S)
            except subprocess.TimeoutExpired:
                _stop(p, 2.0)
        if self.progress is not None:            # after the workers flushed their last rows
            follow.poll(self.progress)
            self.progress.stop()

    def _state(self) -> dict:
        try:
            return json.loads((self.dir / "master.json").read_text())
        except (OSError, ValueError):
            return {}

    def _finish(self):
        """The workers' records merged, then meta.json from (Prepared, Outcome) as the native
        engine's (loadgen.run.meta.run_meta), device.json, summary.json."""
        r, st, run_dir = self.run, self._state(), self.prep.run_dir
        n = int(st.get("n_workers") or self.opts.workers or 1)
        status = {int(k): v.get("status") for k, v in (st.get("workers") or {}).items()}
        pids = _worker_pids(self.dir)
        for pid, code in self.exits.items():      # a worker process that died: "dead"
            if code and pid in pids and status.get(pids[pid]) != "done":
                status[pids[pid]] = "dead"
        master_rc = self.master.returncode if self.master is not None else None
        t0, end = st.get("t0_ns"), st.get("end_ns")
        counts = merge_parts(self.dir, run_dir / "records.jsonl", Plan(self.sc), n, status,
                             t0, bool(self.interrupted or st.get("interrupted")), end)
        reports = [w.get("report") or {} for w in (st.get("workers") or {}).values()]
        stopped = st.get("interrupted") and not self.early   # the master was told to stop
        interrupted = self.interrupted or ("SIGTERM" if stopped else None)
        crashed = None
        if self.early or st.get("error") or (master_rc not in (0, None) and not interrupted):
            crashed = self.early or st.get("error") or f"locust master exited with {master_rc}"
        ld = self.sc.load
        unsent = None       # sessions' closed loop: the turns never started are one count
        if (self.sc.workload.source == "sessions" and ld.mode == "concurrency"
                and ld.num_requests and not ld.duration_s):
            unsent = max(0, ld.num_requests - (counts["records"] - ld.warmup_requests))
        out = Outcome(
            engine="locust", target_url=r.base_url, model=r.model, t0_ns=t0, end_ns=end,
            in_flight_cap=st.get("users") or self.users,     # the Locust users bound it
            records_written=counts["records"], unsent_requests=unsent,
            client_load=dict(client_load(reports, None),   # the one rule (senders/)
                             scope="the busiest Locust process (gevent hub lag)"),
            power=self.power.result if self.power is not None else None,
            interrupted=interrupted, crashed=crashed,
            managed_server_alive_at_end=self.server_alive_at_end, client_cpus=r.client_cpus,
            server_metrics=self.server_metrics, probe=r.probe,
            client_connections=replicas([x.get("replicas") for x in reports]),
            client_transport=transport_info(reports),
            locust={"workers": n, "users": st.get("users"), "role": st.get("role"),
                    "users_by_worker": st.get("users_by_worker"),
                    "clock": clock_info({str(x["index"]): x["clock"] for x in reports
                                         if x.get("clock") and "index" in x}),
                    "worker_status": {str(k): v for k, v in sorted(status.items())},
                    "worker_exit_codes": {str(pids.get(p, p)): c for p, c in self.exits.items()},
                    "worker_reports": reports, "merge": counts, "error": st.get("error"),
                    "locust_version": _locust_version()})
        meta = run_meta(self.prep, out)
        meta["host_load"] = self.host_load              # busy host vs saturated client
        meta["calibration"] = freeze_device(run_dir, False)   # device.json: the frozen spec
        meta = write_meta(run_dir, meta)
        if defer_summary(run_dir, meta, interrupted) is not None:   # every engine's rule
            return RunResult(run_dir, meta, None, True)
        summary = summarize_dir(run_dir, meta, self.sc.output.report)
        return RunResult(run_dir, meta, summary, bool(interrupted))


def _locust_version() -> Optional[str]:
    import importlib.metadata as md
    with contextlib.suppress(md.PackageNotFoundError):
        return md.version("locust")
    return None


def run_locust(sc, opts: LocustOptions, progress=None):
    """Run ``sc`` through Locust; returns runner.RunResult (same run directory files).
    ``progress``: a loadgen.run.progress.RunProgress fed from the workers' files as they grow."""
    return LocustRun(sc, opts, progress).execute()
