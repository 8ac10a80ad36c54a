"""load.probe: a light side stream of small requests — how much the main load slows a light user.

    load.probe {rate, prompt_tokens, output_tokens, alone_requests}
      ─► probe_specs(): seeded prompts of exactly prompt_tokens (the workload's tokenizer, a seed
                        of its own, so the main workload's prompts are the same with or without it)
      ─► ProbeStream.alone()  after the main warm-up, before t0: alone_requests probes one after
                              another, nothing else in flight (phase "probe_alone": the baseline)
      ─► ProbeStream.beside() from t0: one probe every 1/rate s (open loop, constant spacing) until
                              the main load's last request is issued (phase "probe"); those in
                              flight then finish (bounded by load.drain_timeout_s)
      each ─► its own Client (own connections: a probe never waits for a main-load connection)
           ─► Dispatcher._one ─► Ledger ─► probe_stream.jsonl (the record schema of records.jsonl)

records.jsonl keeps exactly the main load's requests, so no main figure changes with a probe;
analysis.metrics.probe_stream compares the two phases (summary.json ``probe_stream``). Every
probe issued has one record; a probe never issued has none (the stream has no planned count).
"""
from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Optional

from loadgen.client.balance import open_client
from loadgen.client.http_client import ClientConfig, RequestSpec
from loadgen.record import RecordWriter, now_ns
from loadgen.engine.aio.dispatch import Dispatcher, Ledger, sleep_until
from loadgen.scenario.model import Dist, Workload
from loadgen.scenario.workload import build_workload

FILE = "probe_stream.jsonl"
SEED_SALT = 7919            # the probe prompts' seed: workload.seed + SEED_SALT
MAX_PROBES = 100_000        # a bound on the stream however long the main load runs
CONNECTIONS = 8             # the probe client's pool (probes are few and light)


def probe_workload(sc) -> Workload:
    """Synthetic prompts of exactly prompt_tokens (by the workload's counter), fixed output."""
    p = sc.load.probe
    return Workload(source="synthetic", tokenizer=sc.workload.tokenizer,
                    prompt_tokens=Dist(dist="fixed", value=p.prompt_tokens),
                    output_tokens=Dist(dist="fixed", value=p.output_tokens),
                    seed=sc.workload.seed + SEED_SALT)


def probe_specs(sc):
    """An endless iterator of RequestSpec factories' inputs (PromptSpec), seeded."""
    return iter(build_workload(probe_workload(sc)))


class ProbeStream:
    """The side stream of one run: ``async with ProbeStream(...) as ps: await ps.alone(); ...``."""

    def __init__(self, sc, run_dir: Path, cfg: ClientConfig, stop: asyncio.Event):
        self.sc, self.p = sc, sc.load.probe
        self.cfg, self.stop = cfg, stop
        self.writer = RecordWriter(Path(run_dir) / FILE)
        self.ledger = Ledger(self.writer)
        self.prompts = probe_specs(sc)
        self.ids = itertools.count()
        self.client = None
        self.issued = {"probe_alone": 0, "probe": 0}
        self.done = asyncio.Event()          # the main load issued its last request
        self._task: Optional[asyncio.Task] = None
        self.dispatcher: Optional[Dispatcher] = None

    async def __aenter__(self) -> "ProbeStream":
        tg = self.sc.target
        self.client = open_client(self.cfg, tg.replica_urls, tg.balance, CONNECTIONS)
        await self.client.__aenter__()
        self.dispatcher = Dispatcher(self.client, self.ledger, self.stop,
                                     self.sc.load.drain_timeout_s)
        return self

    async def __aexit__(self, *exc) -> None:
        try:
            if self._task is not None and not self._task.done():
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)
            await self.dispatcher.cancel_all()
        finally:
            await self.client.__aexit__(*exc)
            self.writer.close()

    def _spec(self, phase: str) -> RequestSpec:
        ps = next(self.prompts)
        self.issued[phase] += 1
        return RequestSpec.of(ps, next(self.ids), phase)

    async def alone(self) -> None:
        """The baseline: alone_requests probes one after another, before the main load."""
        for _ in range(self.p.alone_requests):
            if self.stop.is_set():
                return
            spec = self._spec("probe_alone")
            spec.scheduled_at_ns = now_ns()
            await self.dispatcher._one(spec, None)

    def start_beside(self, t0_ns: int) -> None:
        """From ``t0_ns`` (the main load's t0), one probe every 1/rate s until ``finish``."""
        self._task = asyncio.get_running_loop().create_task(self._beside(t0_ns))

    async def _beside(self, t0_ns: int) -> None:
        gap_ns = int(1e9 / self.p.rate)
        halt = asyncio.Event()               # the run's stop or the main load's end

        async def watch() -> None:
            waits = [asyncio.ensure_future(self.stop.wait()), asyncio.ensure_future(self.done.wait())]
            try:
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for w in waits:
                    w.cancel()
                halt.set()
        watcher = asyncio.ensure_future(watch())
        try:
            for k in range(MAX_PROBES):
                spec = self._spec("probe")
                spec.scheduled_at_ns = t0_ns + k * gap_ns
                if await sleep_until(spec.scheduled_at_ns, halt):
                    self.issued["probe"] -= 1    # drawn, never sent: no record
                    break
                self.dispatcher._spawn(self.dispatcher._one(spec, None))
                self.dispatcher.last_issue_ns = spec.scheduled_at_ns
            await self.dispatcher.drain()
        finally:
            watcher.cancel()

    async def finish(self) -> None:
        """The main load issued everything: stop issuing probes, let those in flight end."""
        self.done.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    def describe(self) -> dict:
        """meta.json ``probe_stream``: what was asked and what was sent."""
        p = self.p
        return {"file": FILE, "rate": p.rate, "prompt_tokens": p.prompt_tokens,
                "output_tokens": p.output_tokens, "alone_requests": p.alone_requests,
                "issued_alone": self.issued["probe_alone"], "issued_beside": self.issued["probe"],
                "records": self.writer.count}
