"""The parent of a ``client.processes: N`` run: N sender processes driven as one measured phase.

    runner.Run._main (target ready, probe, sut.json, power, /metrics started) ─► Senders.measure:
      the plan's specs, built once as one process builds them (warm-up ids 0..W-1, then the
      planned requests with their schedule offsets) ─► partition.share: process k gets items
      k, k+n, ... (closed loop: its users, its num_requests and stage users, partition.split)
      ─► N x ``python -m loadgen.run.procs.child`` (same process group; Job on stdin)
      ─► each warms up its share ─► all READY (Counters) ─► t0 = now + T0_LEAD_NS ─► "go t0"
      ─► the live bar from the Counters ─► all exited ─► merge.merge ─► records.jsonl
      ─► Senders.outcome(): records written, unsent, client load per process (meta.json
         ``client_processes``; ``client_cpu`` = the busiest process), transport, connections

Signals: the parent's first SIGINT/SIGTERM (runner: run.stop) is forwarded as SIGTERM; each
child stops issuing and writes every unfinished request "cancelled". A second one: the
children are killed and their unwritten ids become "cancelled" in the merge. A child that dies
(killed, crashed) stops the others ("stop" line) and is the run's ``crashed`` (exit 1).
"""
from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Optional

from loadgen.client.http_client import RequestSpec
from loadgen.record import now_ns
from loadgen.run.outcome import Outcome
from loadgen.run.procs import job as job_mod
from loadgen.run.procs.handle import Child
from loadgen.run.procs.job import Counters, Job
from loadgen.run.senders import merge as merge_mod
from loadgen.run.senders import partition as part

T0_LEAD_NS = 200_000_000     # "go" to t0: time for every process to read it
POLL_S = 0.05                # state and liveness
KILL_GRACE_S = 10.0          # after a second signal or a crash: SIGKILL whoever is still there
ROOT = str(Path(__file__).resolve().parents[3])


class Senders:
    """``await Senders(run, n).measure(sut)`` inside runner.Run._main; ``outcome(out)`` for meta."""

    def __init__(self, run, n: int):
        self.run, self.n = run, n
        self.dir = Path(run.run_dir) / "procs"
        self.children: list[Child] = []
        self.failure: Optional[str] = None
        self.merged: Optional[dict] = None
        self.count = part.planned_count(run.sc.load.mode, run.schedule.count,
                                        run.sc.load.num_requests, run.sc.load.duration_s)

    # -- the plan, split ---------------------------------------------------------------------
    def _specs(self) -> tuple[list, list]:
        """Warm-up and planned specs exactly as runner.Run._main builds them for one process."""
        run, ld = self.run, self.run.sc.load
        w = ld.warmup_requests
        stream = iter(run.plan)
        warm_src = stream if ld.mode != "trace" else run.plan.warmup_specs()
        warm = [RequestSpec.of(p, i, "warmup") for i, p in zip(range(w), warm_src)]
        planned = []
        if ld.mode != "concurrency":
            planned = [RequestSpec.of(p, w + i) for i, p in zip(range(self.count), stream)]
        return warm, planned

    def _jobs(self) -> list[Job]:
        run, ld, n = self.run, self.run.sc.load, self.n
        warm, planned = self._specs()
        self._warm, self._planned = warm, planned
        offs = run.schedule.offsets_ns
        offs = [int(x) for x in offs] if offs is not None and ld.mode in ("server", "trace") else []
        cap = ld.in_flight_cap
        stages = run.schedule.stages if ld.mode == "concurrency" else None
        jobs = []
        for k in range(n):
            jobs.append(Job(
                index=k, n=n, sc=run.sc, base_url=run.base_url, model=run.model,
                drop_fields=tuple(run.drop_fields),
                part_path=str(self.dir / f"records.{k}.jsonl"),
                counters_path=str(self.dir / f"progress.{k}.bin"),
                result_path=str(self.dir / f"result.{k}.json"),
                warm=part.share(warm, k, n), planned=part.share(planned, k, n),
                offsets_ns=part.share(offs, k, n), cap=part.split(cap, k, n),
                num_requests=(part.split(ld.num_requests, k, n) if ld.mode == "concurrency"
                              else None),
                stages=part.stage_share(stages, k, n) if stages else None))
        return jobs

    # -- processes -----------------------------------------------------------------------------
    def _spawn(self, jobs: list[Job]) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        for j in jobs:
            ctr = Counters.create(j.counters_path)
            with open(self.dir / f"client.{j.index}.log", "ab") as log:
                proc = subprocess.Popen([sys.executable, "-m", "loadgen.run.procs.child"],
                                        stdin=subprocess.PIPE, stdout=log, stderr=log, env=env,
                                        close_fds=True)
            self.children.append(Child(j.index, proc, j, ctr))

    def _send_jobs(self) -> None:
        for c in self.children:
            with contextlib.suppress(OSError):
                c.proc.stdin.write(job_mod.job_bytes(c.job))
                c.proc.stdin.flush()

    def _dead(self) -> Optional[Child]:
        """A child that exited before its part was complete (no DONE in its counters, or exit
        code other than 0)."""
        for c in self.children:
            if not c.alive and (c.proc.returncode != 0 or c.ctr[job_mod.STATE] != job_mod.DONE):
                return c
        return None

    def _check(self) -> None:
        """Forward the parent's interrupt once; a dead child stops the rest."""
        if self.run.stop.is_set() and not getattr(self, "_forwarded", False):
            self._forwarded = True
            for c in self.children:
                c.signal(signal.SIGTERM)
        if self.failure is None:
            dead = self._dead()
            if dead is not None:
                self.failure = (f"client process {dead.k} of {self.n} (pid {dead.proc.pid}) "
                                f"{dead.how_it_ended()} mid-run")
                for c in self.children:
                    if c is not dead:
                        c.say(f"stop client process {dead.k} {dead.how_it_ended()}")

    async def _wait(self, state: int) -> None:
        """Until every live child reached ``state`` (or all exited), checking as it waits."""
        while True:
            self._check()
            self._show()
            live = [c for c in self.children if c.alive]
            if not live or (all(c.ctr[job_mod.STATE] >= state for c in live)
                            and state != job_mod.DONE):
                return
            if self.failure is not None and state == job_mod.READY:
                return
            await asyncio.sleep(POLL_S)

    def _show(self) -> None:
        """The live bar: the children's counters summed (measured phase after t0)."""
        p = self.run.progress
        phase = job_mod.MEASURING if self.run.t0 is not None else job_mod.WARMING
        tot = [0] * job_mod.SLOTS
        for c in self.children:
            s = c.ctr.snapshot()
            if (s[job_mod.STATE] >= job_mod.MEASURING) == (phase == job_mod.MEASURING):
                tot = [a + b for a, b in zip(tot, s)]
        p.sent, p.completed, p.failed = tot[job_mod.SENT], tot[job_mod.OK], tot[job_mod.FAILED]
        p.cancelled, p.tokens = tot[job_mod.CANCELLED], tot[job_mod.TOKENS]
        refresh = getattr(p, "_refresh", None)
        if refresh is not None:
            refresh()

    async def measure(self, sut: dict) -> None:
        run, ld = self.run, self.run.sc.load
        self.dir.mkdir(parents=True, exist_ok=True)
        jobs = self._jobs()
        try:
            self._spawn(jobs)
            await asyncio.get_running_loop().run_in_executor(None, self._send_jobs)
            if ld.warmup_requests:
                run.progress.start("warm-up", ld.warmup_requests)
            await self._wait(job_mod.READY)
            if not run.stop.is_set() and self.failure is None:
                run.power.mark("measure_start")
                await run.scraper.mark("measure_start")
                run.cpu.start()
                run.t0 = now_ns() + T0_LEAD_NS
                for c in self.children:
                    c.say(f"go {run.t0}")
                run.progress.start("measured", self.count)
            await self._wait(job_mod.DONE)
            if run.t0 is not None:
                run.end = now_ns()
                run.power.mark("measure_end")
                await run.scraper.mark("measure_end")
        except BaseException as e:     # a second signal, a bug: the processes go at once
            self.failure = self.failure or (f"run aborted ({type(e).__name__}): the {self.n} "
                                            "client processes were killed")
            for c in self.children:
                c.signal(signal.SIGKILL)
            raise
        finally:
            self._finish()
        if run.server is not None:
            run.server_alive_at_end = run.server.alive
        first = next((c.result for c in self.children if c.result), None) or {}
        if first.get("first_response_headers"):
            from loadgen.run.rundir import write_json
            from loadgen.targets import sut as sut_mod
            sut["completion_response_headers"] = sut_mod.keep_headers(
                first["first_response_headers"])
            write_json(run.run_dir / "sut.json", sut)

    def _finish(self) -> None:
        """Every child gone (killed after a grace), results read, parts merged, run.crashed."""
        for c in self.children:
            try:
                c.proc.wait(KILL_GRACE_S if self.failure is None else 2)
            except subprocess.TimeoutExpired:
                c.signal(signal.SIGKILL)
                c.proc.wait()
            with contextlib.suppress(OSError):
                c.proc.stdin.close()
            with contextlib.suppress(OSError, ValueError):
                c.result = json.loads(Path(c.job.result_path).read_text())
        self._check()
        self._merge()
        if self.failure is not None:
            lost = self.merged["cancelled_unwritten"] if self.merged else 0
            self.run.crashed = self.run.crashed or (
                f"{self.failure}: {lost} request(s) it never recorded are 'cancelled' in "
                f"records.jsonl (log: {self.dir / 'client.*.log'})")

    def _owed(self, c: Child):
        """Ids child ``c`` owes a record (merge.Owed), in id order."""
        w, k, n = self.run.sc.load.warmup_requests, c.k, self.n
        t0, offs = self.run.t0, self.run.schedule.offsets_ns
        warm_started = c.ctr[job_mod.WARM_ISSUED]
        for s in c.job.warm[:warm_started]:
            yield merge_mod.Owed(s.id, "warmup", None, s.max_tokens, s.prompt_tokens)
        if self.run.sc.load.mode == "concurrency":
            for i in part.owed_closed(w, k, n, c.ctr[job_mod.ISSUED]):
                yield merge_mod.Owed(i, "measured")
            return
        for s in c.job.planned:
            sched = None
            if t0 is not None:
                sched = t0 if offs is None or self.run.sc.load.mode == "offline" else \
                    t0 + int(offs[s.id - w])
            yield merge_mod.Owed(s.id, "measured", sched, s.max_tokens, s.prompt_tokens)

    def _why(self, c: Child) -> str:
        if c.proc.returncode != 0 or c.ctr[job_mod.STATE] != job_mod.DONE:
            return (f"client process {c.k} (pid {c.proc.pid}) {c.how_it_ended()} before "
                    "writing this request's record")
        if self.run.interrupted:
            return "run interrupted before the request was recorded"
        return f"no record from client process {c.k}: run ended early"

    def _merge(self) -> None:
        run = self.run
        if run.writer is not None:
            run.writer.close()          # empty: the merge writes records.jsonl
        self.merged = merge_mod.merge(
            [Path(c.job.part_path) for c in self.children], [self._owed(c) for c in self.children],
            [self._why(c) for c in self.children], run.run_dir / "records.jsonl",
            run.end or now_ns())
        for c in self.children:         # records.jsonl holds them now; logs only when written
            c.final = c.ctr.snapshot()
            c.ctr.close()
            for p in (Path(c.job.part_path), Path(c.job.counters_path), Path(c.job.result_path)):
                with contextlib.suppress(OSError):
                    p.unlink()
            log = self.dir / f"client.{c.k}.log"
            with contextlib.suppress(OSError):
                if log.stat().st_size == 0:
                    log.unlink()
        with contextlib.suppress(OSError):
            self.dir.rmdir()            # kept only when a process wrote a log

    # -- meta.json -------------------------------------------------------------------------
    def outcome(self, out: Outcome) -> Outcome:
        """``out`` (the parent's view) with what the sender processes did."""
        from loadgen.run.procs.describe import connections, processes, transport
        from loadgen.run.senders.describe import client_load
        ld = self.run.sc.load
        unsent = None
        if ld.mode == "concurrency" and not self.run.schedule.stages and ld.num_requests \
                and not ld.duration_s:
            unsent = sum(max(0, (part.split(ld.num_requests, c.k, self.n) or 0)
                             - c.final[job_mod.ISSUED]) for c in self.children)
        results = [c.result or {} for c in self.children]
        procs = processes(self.children, results, self.merged)
        return dataclasses.replace(
            out, records_written=(self.merged or {}).get("records", 0), unsent_requests=unsent,
            client_load=client_load(procs, out.client_load),
            client_connections=connections(results), client_transport=transport(results),
            client_processes=procs)
