"""The parent of a ``client.processes: N`` run: N sender processes driven as one measured phase.

    Senders.measure: spawn N children ─► all READY ─► t0 = now + T0_LEAD_NS ─► "go t0" ─► the
      live bar from their counters ─► all exited ─► engine.core.merge ─► records.jsonl | .arrow
    Senders.outcome: meta.json's ``client_processes`` (Child.row), client load, transport
    ``run`` (runner.Run) is read, never written: its t0, end and crashed are this object's
    (``t0``, ``end``, ``crashed``), which the runner takes when ``measure`` returns.

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
import sys
from pathlib import Path
from typing import Optional

from loadgen.record import now_ns
from loadgen.engine import children
from loadgen.run.outcome import Outcome
from loadgen.engine.procs.job import Job
from loadgen.engine.core import counters as cn
from loadgen.engine.core import merge as merge_mod, merge_store
from loadgen.engine.core.partition import planned_count, split
from loadgen.engine.core.plan import Plan

T0_LEAD_NS = 200_000_000     # "go" to t0: time for every process to read it
POLL_S = 0.05                # state and liveness


class Child(children.Child):
    """The parent's handle on sender process ``k`` (spawned with its log, the Job on its
    stdin: engine/children.py): its Job, counters and result."""

    def __init__(self, job: Job):
        self.k, self.job = job.index, job
        self.ctr = cn.Counters.create(job.path("progress", "bin"))
        self.result: Optional[dict] = None
        self.final: list[int] = [0] * cn.SLOTS     # the counters when it ended
        super().__init__([sys.executable, "-m", "loadgen.engine.procs.child"],
                         job.path("client", "log"), stdin=True)

    @property
    def failed(self) -> bool:
        """Exited before its part was complete (no DONE in its counters, or exit code not 0)."""
        return not self.alive and (self.proc.returncode != 0 or self.ctr[cn.STATE] != cn.DONE)


class Senders:
    """``await Senders(run, n).measure(sut)`` inside runner.Run._main; ``outcome(out)`` for meta."""

    def __init__(self, run, n: int):
        self.run, self.n, ld = run, n, run.sc.load
        self.dir = Path(run.run_dir) / "procs"
        self.children = children.Children()
        self.failure: Optional[str] = None
        self.merged: Optional[dict] = None
        self.t0 = self.end = self.crashed = None    # the runner takes them (Run._took)
        self.count = planned_count(ld.closed_loop, run.schedule.count, ld.num_requests, ld.duration_s)

    def _spawn(self) -> None:
        run = self.run
        for k in range(self.n):
            self.children.append(Child(Job(k, self.n, run.sc, run.base_url, run.model,
                                           tuple(run.drop_fields), str(self.dir))))
        for c in self.children:     # a few kB each (the scenario): the slices are the child's
            c.say(c.job.to_bytes())

    def _check(self) -> None:
        """Forward the parent's interrupt once; a dead child stops the rest."""
        self.children.forward(self.run.stop)
        dead = next((c for c in self.children if c.failed), None)
        if self.failure is None and dead is not None:
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
            if not live or (state != cn.DONE and all(c.ctr[cn.STATE] >= state for c in live)) \
                    or (self.failure is not None and state == cn.READY):
                return
            await asyncio.sleep(POLL_S)

    def _show(self) -> None:
        """The live bar: the children's counters summed (measured phase after t0)."""
        cn.show_phase(self.run.progress, [c.ctr.snapshot() for c in self.children],
                      self.t0 is not None)

    async def measure(self, sut: dict) -> None:
        run = self.run
        self.dir.mkdir(parents=True, exist_ok=True)
        await self.children.supervise(self._phases, self._finish, self._aborted)
        first = next((c.result for c in self.children if c.result), None) or {}
        if first.get("first_response_headers"):
            from loadgen.run.rundir import write_json
            from loadgen.targets import sut as sut_mod
            sut["completion_response_headers"] = sut_mod.keep_headers(
                first["first_response_headers"])
            write_json(run.run_dir / "sut.json", sut)

    async def _phases(self) -> None:
        run, ld = self.run, self.run.sc.load
        self._spawn()
        if ld.warmup_requests:
            run.progress.start("warm-up", ld.warmup_requests)
        await self._wait(cn.READY)
        if not run.stop.is_set() and self.failure is None:
            await run.mark("measure_start")
            run.cpu.start()
            self.t0 = now_ns() + T0_LEAD_NS
            for c in self.children:
                c.say(f"go {self.t0}")
            run.progress.start("measured", self.count)
        await self._wait(cn.DONE)
        if self.t0 is not None:
            self.end = now_ns()
            await run.mark("measure_end")

    def _aborted(self, e: BaseException) -> None:
        """A second signal, a bug: the processes go at once (children.supervise kills them)."""
        self.failure = self.failure or (f"run aborted ({type(e).__name__}): the {self.n} "
                                        "client processes were killed")

    def _finish(self) -> None:
        """Every child gone (killed after a grace), results read, parts merged, run.crashed."""
        for c in self.children:
            c.reap(children.KILL_GRACE_S if self.failure is None else 2)
            with contextlib.suppress(OSError, ValueError):
                c.result = json.loads(Path(c.job.path("result", "json")).read_text())
        self._check()
        self._merge()
        if self.failure is not None:
            lost = self.merged["cancelled_unwritten"] if self.merged else 0
            self.crashed = self.crashed or (
                f"{self.failure}: {lost} request(s) it never recorded are 'cancelled' in "
                f"records.{self.run.sc.output.records} (log: {self.dir / 'client.*.log'})")

    def _owed(self, c: Child):
        """Ids child ``c`` owes a record (merge.Owed), in id order: its slice of the plan. A
        child that ended cleanly wrote every one itself (its ledger: the never-sent ones too),
        so only a failed child's slice is walked (prompts rebuilt: 10^6 of them take seconds)."""
        if not c.failed:
            return
        plan = Plan(self.run.sc, c.k, self.n, self.run.plan, self.run.schedule)
        for s, at in plan.started(c.ctr[cn.WARM_ISSUED], c.ctr[cn.ISSUED], self.t0):
            yield merge_mod.Owed(s.id, s.phase, at, s.max_tokens, s.prompt_tokens)

    def _why(self, c: Child) -> str:
        if c.failed:
            return (f"client process {c.k} (pid {c.proc.pid}) {c.how_it_ended()} before "
                    "writing this request's record")
        if self.run.interrupted:
            return "run interrupted before the request was recorded"
        return f"no record from client process {c.k}: run ended early"

    def _merge(self) -> None:
        run, kids = self.run, self.children
        if run.writer is not None:
            run.writer.close()          # empty: the merge writes records.jsonl
        ext = run.sc.output.records     # jsonl | arrow (issue 42: merged a batch at a time)
        self.merged = merge_store.merge(
            [Path(c.job.path("records", ext)) for c in kids], [self._owed(c) for c in kids],
            [self._why(c) for c in kids], run.run_dir / f"records.{ext}", self.end or now_ns())
        for c in kids:                  # records.jsonl holds them now; logs only when written
            c.final = c.ctr.snapshot()
            c.ctr.close()
            for name, ext in (("records", "jsonl"), ("records", "arrow"), ("progress", "bin"),
                              ("result", "json")):
                with contextlib.suppress(OSError):
                    os.unlink(c.job.path(name, ext))
            with contextlib.suppress(OSError):
                if os.path.getsize(c.job.path("client", "log")) == 0:
                    os.unlink(c.job.path("client", "log"))
        with contextlib.suppress(OSError):
            self.dir.rmdir()            # kept only when a process wrote a log

    def outcome(self, out: Outcome) -> Outcome:
        """``out`` (the parent's view) with what the sender processes did (meta.json)."""
        from loadgen.engine.core.describe import (client_load, connections, process_row,
                                                  transport)
        ld, n, m = self.run.sc.load, self.n, self.merged or {}
        unsent = None
        if ld.unsent_counted and not self.run.schedule.stages:
            unsent = sum(max(0, (split(ld.num_requests, c.k, n) or 0) - c.final[cn.ISSUED])
                         for c in self.children)
        results = [c.result or {} for c in self.children]
        procs = [process_row(c.k, c.proc.pid, c.proc.returncode, c.result or {}, ld, n,
                             self.count, w, k) for c, w, k in zip(
            self.children, m.get("written_by_process") or [None] * n,
            m.get("cancelled_by_process") or [None] * n)]
        return dataclasses.replace(
            out, records_written=m.get("records", 0), unsent_requests=unsent,
            client_load=client_load(procs, out.client_load),
            client_connections=connections(results), client_transport=transport(results),
            client_processes=procs)
