"""``loadgen run --engine locust``: the CLI side (no gevent here; Locust runs in subprocesses).

A runner.Run whose senders are the Locust processes (as --procs' are engine.procs.parent.Senders):
the native engine's steps (run/harness.py: run dir, server, CPUs, meta.json, summary;
Run._main: readiness, probe, sut.json, power, /metrics, signals) around LocustRun.measure:
``python -m loadgen.engine.locust.worker`` as --role local, or master + N x worker (own
sessions: a terminal Ctrl-C reaches only this process, which tells the master) ─►
locust/master.json + the workers' part files ─► the one merge (engine.core.journal.merge_master)
─► LocustRun.outcome: Outcome(engine "locust") for meta.json. A master error (workers never
connected, ...) is meta.crashed.
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from loadgen.engine import children
from loadgen.run.engines import refusal, workers_error
from loadgen.run.outcome import Outcome, prepare
from loadgen.run.runner import Run
from loadgen.engine.core.describe import locust_blocks
from loadgen.engine.core.journal import Follower, merge_master, worker_status
from loadgen.engine.core.plan import Plan, users_for
from loadgen.scenario.model import ScenarioError
from loadgen.targets.managed import free_port

DEFAULT_PORT = 5557


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
    out = [sys.executable, "-m", "loadgen.engine.locust.worker", "--role", role,
           "--scenario", opts.scenario_path]
    for o in opts.overrides:
        out += ["--set", o]
    return out + list(extra)


def _worker_pids(locust_dir: Path) -> dict[int, int]:
    out = {}
    for f in locust_dir.glob("worker-*.json"):
        with contextlib.suppress(ValueError, OSError, KeyError):
            d = json.loads(f.read_text())
            out[int(d["pid"])] = int(d["index"])
    return out


def _spawn(argv: list[str], log: Path) -> children.Child:
    """In its own session: a terminal Ctrl-C reaches only loadgen, which tells the master."""
    return children.Child(argv, log, new_session=True)


class LocustRun:
    """The Locust processes as runner.Run's senders, as --procs' are (engine.procs.parent.Senders):
    everything around them is the native engine's (run/harness.py: run dir, server, affinity,
    meta.json, device.json, summary; Run._main: readiness, probe, sut.json, power, /metrics,
    signals). ``measure`` runs the processes; ``outcome`` is what meta.json says of them."""

    def __init__(self, sc, opts: LocustOptions, progress=None):
        self.sc, self.opts, self.progress = sc, opts, progress
        self.prep = prepare(sc)         # run_dir, plan, schedule, api key: as the native engine
        self.run = Run(sc, prepared=self.prep, senders=self)   # read here, never written
        self.t0 = self.end = self.interrupted = self.crashed = None   # Run._took takes them
        self.users = users_for(sc, self.prep.schedule, opts.workers)
        bad = (refusal("locust", sc, master=opts.master)      # the rules: run/engines.py
               or workers_error(sc, self.users, opts.workers))
        if bad:
            raise ScenarioError(bad)
        self.dir = self.prep.run_dir / "locust"
        self.procs = children.Children()            # the master (or local) first, then workers
        self.master: Optional[children.Child] = None
        self.exits: dict[int, int] = {}   # worker pid -> exit code (seen before the master ended)
        self.early: Optional[str] = None  # a worker process that died before it joined
        self.merged: dict = {}            # master.json, worker status and pids, merge counts

    def execute(self):
        return self.run.execute()

    async def measure(self, sut: dict) -> None:
        """Inside runner.Run._main (power and /metrics started): the processes to their end,
        then their parts merged (a second signal or a crash: killed first)."""
        self.dir.mkdir(exist_ok=True)
        await self.procs.supervise(self._watch, self._finish)

    def _spawn_all(self) -> None:
        o, r = self.opts, self.run
        common = ["--run-dir", str(self.dir), "--base-url", r.base_url, "--model", r.model,
                  "--connect-timeout", str(o.connect_timeout_s),
                  *[a for f in r.drop_fields for a in ("--drop-field", f)]]
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

    def _finish(self) -> None:
        for c in self.procs:
            c.reap(2.0, terminate=True)
        self._merge()

    async def _watch(self) -> None:
        """The processes started, then until the master exits: the live bar, a worker that died
        before joining, the first signal forwarded to the master, the measured window's marks
        (power, /metrics, host)."""
        self._spawn_all()
        r, follow = self.run, Follower(self.dir)
        if self.progress is not None:
            self.progress.start("locust", Plan(self.sc).owed_count())
        marked = False
        while self.master.alive:
            await asyncio.sleep(0.05)
            if self.progress is not None:
                follow.poll(self.progress)
            self.procs.forward(r.stop, [self.master])   # the first signal (runner.Run._signal)
            for i, c in self.procs.ended():
                p = c.proc
                if c is not self.master:
                    self.exits[p.pid] = p.returncode
                    if p.returncode and p.pid not in _worker_pids(self.dir):
                        self.early = (f"worker process {i - 1} exited with {p.returncode} before "
                                      f"joining (see locust/worker.{i - 1}.log)")
                        self.master.signal(signal.SIGTERM)
            if not marked and self._state().get("t0_ns") is not None:   # go, not an early end
                await r.mark("measure_start")   # runner.Run.mark: power, /metrics, host load
                marked = True
        await r.mark("measure_end")
        for c in self.procs[1:]:                 # the master told them to quit (_finish: the rest)
            with contextlib.suppress(subprocess.TimeoutExpired):
                c.proc.wait(children.KILL_GRACE_S)
        if self.progress is not None:            # after the workers flushed their last rows
            follow.poll(self.progress)
            self.progress.stop()

    def _state(self) -> dict:
        try:
            return json.loads((self.dir / "master.json").read_text())
        except (OSError, ValueError):
            return {}

    def _merge(self) -> None:
        """The workers' records merged into records.jsonl; how the run ended (interrupted,
        crashed) set on the run (meta.json: outcome() below, through runner.Run.meta)."""
        r, st = self.run, self._state()
        r.writer.close()                # empty: the merge writes records.jsonl
        if self.sc.output.records == "arrow":       # issue 42: it writes records.arrow
            r.writer.path.unlink(missing_ok=True)
        n = int(st.get("n_workers") or self.opts.workers or 1)
        status = worker_status(st)
        pids = _worker_pids(self.dir)
        for pid, code in self.exits.items():      # a worker process that died: "dead"
            if code and pid in pids and status.get(pids[pid]) != "done":
                status[pids[pid]] = "dead"
        master_rc = self.master.proc.returncode if self.master is not None else None
        counts = merge_master(self.dir, r.run_dir, Plan(self.sc), st, n, status, r.interrupted)
        stopped = st.get("interrupted") and not self.early   # the master was told to stop
        self.interrupted = r.interrupted or ("SIGTERM" if stopped else None)
        if self.early or st.get("error") or (master_rc not in (0, None) and not self.interrupted):
            why = st.get("error") or f"locust master exited with {master_rc}"
            self.crashed = self.early or f"{why} (logs: {self.dir})"    # the CLI prints it
        self.merged = {"state": st, "n": n, "status": status, "pids": pids, "counts": counts}

    def outcome(self, out: Outcome) -> Outcome:
        """``out`` (runner.Run's: target, power, server metrics, interruption) with what the
        Locust processes did (meta.json, as loadgen.run.meta.run_meta writes it)."""
        m, ld = self.merged, self.sc.load
        st, counts = m["state"], m["counts"]
        unsent = None       # sessions' closed loop: the turns never started are one count
        if self.sc.workload.source == "sessions" and ld.unsent_counted:
            unsent = max(0, ld.num_requests - (counts["records"] - ld.warmup_requests))
        return dataclasses.replace(
            out, engine="locust", t0_ns=st.get("t0_ns"), end_ns=st.get("end_ns"),
            in_flight_cap=st.get("users") or self.users,     # the Locust users bound it
            records_written=counts["records"], unsent_requests=unsent,
            **locust_blocks(st, m["n"], m["status"], self.exits, m["pids"], counts))


def run_locust(sc, opts: LocustOptions, progress=None):
    """Run ``sc`` through Locust; returns runner.RunResult (same run directory files).
    ``progress``: a loadgen.console.progress.RunProgress fed from the workers' files as they grow."""
    return LocustRun(sc, opts, progress).execute()
