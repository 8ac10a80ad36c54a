"""``python -m loadgen.engine.procs.child``: one sender process of a ``client.processes: N`` run.

    stdin: Job ─► its slice: engine.core.plan.Plan(sc, K, N), cap, num_requests and stage users
        split by engine.core.partition ─► Client ─► warm-up slice ─► READY ─► "go T0" ─► Dispatcher
        ─► Ledger (worker="K") ─► procs/records.K.jsonl | .arrow; counters ─► procs/result.K.json

The first SIGINT/SIGTERM (the terminal's Ctrl-C reaches the whole process group; the parent
forwards SIGTERM) stops issuing, cancels what is in flight and writes every unfinished request
as "cancelled", as one process does; later signals are ignored (the parent decides when to
give up). "stop REASON" on stdin does the same with that reason; EOF (the parent is gone) too.
Exit 0 when its file is complete; a traceback in procs/client.K.log and exit 1 otherwise.
"""
from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import sys
from typing import Optional

from loadgen.engine.core import counters as cn

_early: list[str] = []


def _early_signal(signum, frame) -> None:       # before the loop owns the signals
    _early.append(signal.Signals(signum).name)


class Sender:
    """The run of one child; ``main()`` inside its event loop, ``result()`` after it."""

    def __init__(self, job):
        from loadgen.client.load_monitor import ClientLoad
        from loadgen.console.progress import RunProgress
        from loadgen.engine.core.plan import Plan
        self.job, self.plan = job, Plan(job.sc, job.index, job.n)
        self.ctr = cn.Counters.open(job.path("progress", "bin"))
        self.counting = RunProgress(None, enabled=False)
        self.load = ClientLoad()
        self.stop = self.go_t0 = self.interrupted = self.stop_reason = self.error = None
        self.dispatcher = self.client = self.writer = self.t0 = None
        self.planned = None                     # planned.Planned: this process's slice
        self._inbox = b""

    # -- control: signals and the parent's lines ------------------------------------------
    def _halt(self, signame: Optional[str] = None, reason: Optional[str] = None) -> None:
        """The first signal, "stop" line or EOF stops issuing; later ones change nothing."""
        if self.interrupted is None and self.stop_reason is None:
            self.interrupted, self.stop_reason = signame, reason
            if reason is not None and self.dispatcher is not None:
                self.dispatcher.cancel_reason = f"run stopped before the request ended: {reason}"
            self.stop.set()

    def _stdin_ready(self) -> None:
        """The parent's lines ("go T0", "stop REASON") on stdin; EOF: the parent went away."""
        try:
            data = os.read(0, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            asyncio.get_running_loop().remove_reader(0)
            self._halt(reason="the parent process went away")
            return
        self._inbox += data
        *lines, self._inbox = self._inbox.split(b"\n")
        for raw in lines:
            cmd, _, arg = raw.decode("utf-8", "replace").strip().partition(" ")
            if cmd == "go":
                self.go_t0 = int(arg)
            elif cmd == "stop":
                self._halt(reason=arg or "stopped by the parent")

    # -- counting: per send and per record, into procs/progress.K.bin ----------------------
    def _on_send(self, spec) -> None:
        self.counting.on_send(spec)
        cn.mirror(self.counting, self.ctr)

    def _on_done(self, rec) -> None:
        self.counting.on_done(rec)
        cn.mirror(self.counting, self.ctr)

    def _spec(self, specs, slot: int):
        """The next of ``specs`` as the client's RequestSpec, counted in ``slot`` before it is
        handed to the client (a killed child's counters still say what it started)."""
        s = next(specs)
        self.ctr.bump(slot)
        return self._of(s, s.id, s.phase)

    # -- the run ---------------------------------------------------------------------------
    async def main(self) -> None:
        from loadgen.client.balance import open_client
        from loadgen.client.http_client import ClientConfig, RequestSpec
        from loadgen.client.hangup import HangupRule
        from loadgen.record import now_ns, store_writer
        from loadgen.engine.aio.dispatch import Dispatcher, Ledger
        from loadgen.run.rundir import api_key
        from loadgen.engine.core.pacing import Closed, slice_pacing
        from loadgen.engine.core.partition import split

        job, ctr, sc = self.job, self.ctr, self.job.sc
        ld, k, n, self._of = sc.load, job.index, job.n, RequestSpec.of
        loop = asyncio.get_running_loop()
        self.stop = asyncio.Event()
        for s in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(s, self._halt, s.name)
        if _early:
            self._halt(_early[0])
        os.set_blocking(0, False)
        loop.add_reader(0, self._stdin_ready)
        key = api_key(sc)                       # registered with redact before any write
        self.writer = store_writer(job.path("records", sc.output.records))   # .jsonl | .arrow
        ledger = Ledger(self.writer, self._on_done, tag=str(k))
        warm, plan, cap = self.plan.warm_specs(), self.plan, split(ld.in_flight_cap, k, n)
        self.pacing = slice_pacing(ld, plan.schedule, k, n)    # its share of the one scheduler
        if self.pacing.planned:                 # each built as it is sent (planned.py)
            from loadgen.engine.aio.planned import Planned
            self.planned = Planned(plan.measured_specs(), RequestSpec.of, plan.warmup + k,
                                   len(range(k, plan.count, n)), step=n)
        cfg = ClientConfig.from_api(sc.api, job.base_url, job.model, key, job.drop_fields)
        cfg.cancel = HangupRule.of_scenario(sc)      # load.cancel: the same ids in every process
        size = cap or max(1, len(self.planned or ()) or split(ld.num_requests, k, n) or 1)
        try:
            async with open_client(cfg, sc.target.replica_urls, sc.target.balance, size,
                                   first_turn=k) as client:
                self.client = client
                ctr[cn.STATE] = cn.WARMING
                if warm and not self.stop.is_set():
                    d = Dispatcher(client, ledger, self.stop, ld.drain_timeout_s, self._on_send)
                    p = Closed(ld.drain_timeout_s, min(len(warm), cap or len(warm)), len(warm))
                    await d.measure(p.begin(now_ns()),
                                    functools.partial(self._spec, iter(warm), cn.WARM_ISSUED))
                self.counting.start("measured")
                cn.mirror(self.counting, ctr)
                ctr[cn.STATE] = cn.READY
                while self.go_t0 is None and not self.stop.is_set():
                    await asyncio.sleep(0.005)
                if self.stop.is_set():
                    return
                ctr[cn.STATE] = cn.MEASURING
                self.t0 = self.go_t0
                self.load.start()
                self.dispatcher = Dispatcher(client, ledger, self.stop, ld.drain_timeout_s,
                                             self._on_send)
                specs = self.planned if self.pacing.planned else functools.partial(
                    self._spec, self.plan.measured_specs(), cn.ISSUED)   # ids W+k, W+k+n, ..
                await self.dispatcher.measure(self.pacing.begin(self.t0), specs, cap)
        except BaseException as e:
            self.error = f"{type(e).__name__}: {e}"
            if self.dispatcher is not None:
                self.dispatcher.cancel_reason = f"run aborted ({type(e).__name__})"
                with contextlib.suppress(BaseException):
                    await self.dispatcher.cancel_all()
            raise
        finally:
            if self.planned:                    # never built, never sent: one line each
                offs, t0 = self.pacing.offsets, self.t0
                at = None if t0 is None or offs is None else (lambda j: t0 + int(offs[j]))
                ledger.cancel_many(self.planned.rest(0, at, ledger.written),
                                   "scheduled but never sent: run ended early")
            if self.load.result is None and self.t0 is not None:
                self.load.stop()
            self.writer.close()

    def result(self) -> dict:
        c = self.client
        return {"client_load": self.load.result, "error": self.error,
                "interrupted": self.interrupted, "stopped": self.stop_reason,
                **({"client_connections": c.describe(), "client_transport": c.transport_info(),
                    "first_response_headers": c.first_response_headers} if c is not None else {})}


def main() -> int:
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, _early_signal)
    import json

    from loadgen.client import eventloop
    from loadgen.engine.procs.job import read_job
    from loadgen.run.storage import atomic_write_text

    job = read_job(0)
    sender = Sender(job)
    try:
        eventloop.run(sender.main())
    finally:
        for s in (signal.SIGINT, signal.SIGTERM):   # the loop gave the signals back: ignore them
            signal.signal(s, signal.SIG_IGN)
        atomic_write_text(job.path("result", "json"), json.dumps(sender.result(), default=str))
        sender.ctr[cn.STATE] = cn.DONE
        sender.ctr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
