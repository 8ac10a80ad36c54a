"""``python -m loadgen.run.procs.child``: one sender process of a ``client.processes: N`` run.

    stdin: Job (job.py) ─► api key (env) ─► Client (its own loop, wire transport, kernel stamps)
        ─► warm-up share (closed loop) ─► READY ─► waits for "go T0" ─► sleeps until T0
        ─► its share: offline | server/trace (the parent's offsets) | closed loop (its users,
           ids first+k, first+k+n, ...; prompts from the same seeded stream as one process)
        ─► Ledger ─► procs/records.K.jsonl (each record tagged worker="K", flushed as it ends)
        ─► Counters (procs/progress.K.bin) per send and per record ─► procs/result.K.json

The first SIGINT/SIGTERM (the terminal's Ctrl-C reaches the whole process group; the parent
forwards SIGTERM) stops issuing, cancels what is in flight and writes every unfinished request
as "cancelled", as one process does; later signals are ignored (the parent decides when to
give up). "stop REASON" on stdin does the same with that reason; EOF (the parent is gone) too.
Exit 0 when its file is complete; a traceback in procs/client.K.log and exit 1 otherwise.
"""
from __future__ import annotations

import signal
import sys

_early: list[str] = []


def _early_signal(signum, frame) -> None:       # before the loop owns the signals
    _early.append(signal.Signals(signum).name)


class Sender:
    """The run of one child; ``main()`` inside its event loop, ``result()`` after it."""

    def __init__(self, job):
        from loadgen.client.load_monitor import ClientLoad
        from loadgen.run.procs.job import Counters
        from loadgen.run.progress import RunProgress
        self.job = job
        self.ctr = Counters.open(job.counters_path)
        self.counting = RunProgress(None, enabled=False)
        self.load = ClientLoad()
        self.stop = None
        self.go_t0 = None
        self.interrupted = None
        self.stop_reason = None
        self.dispatcher = None
        self.client = None
        self.writer = None
        self.t0 = self.end = None
        self.error = None
        self._inbox = b""

    # -- control ---------------------------------------------------------------------------
    def _on_signal(self, name: str) -> None:
        if self.interrupted is None and self.stop_reason is None:
            self.interrupted = name
            self.stop.set()

    def _on_stop(self, reason: str) -> None:
        if self.stop_reason is None and self.interrupted is None:
            self.stop_reason = reason
            if self.dispatcher is not None:
                self.dispatcher.cancel_reason = f"run stopped before the request ended: {reason}"
            self.stop.set()

    def _on_go(self, t0: int) -> None:
        self.go_t0 = t0

    def _stdin_ready(self) -> None:
        """The parent's lines ("go T0", "stop REASON") on stdin; EOF: the parent went away."""
        import os
        try:
            data = os.read(0, 65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:
            import asyncio
            asyncio.get_running_loop().remove_reader(0)
            self._on_stop("the parent process went away")
            return
        self._inbox += data
        *lines, self._inbox = self._inbox.split(b"\n")
        for raw in lines:
            cmd, _, arg = raw.decode("utf-8", "replace").strip().partition(" ")
            if cmd == "go":
                self._on_go(int(arg))
            elif cmd == "stop":
                self._on_stop(arg or "stopped by the parent")

    # -- counting --------------------------------------------------------------------------
    def _mirror(self) -> None:
        from loadgen.run.procs.job import CANCELLED, FAILED, OK, SENT, TOKENS
        c, v = self.counting, self.ctr
        v[SENT], v[OK], v[FAILED], v[CANCELLED], v[TOKENS] = (
            c.sent, c.completed, c.failed, c.cancelled, c.tokens)

    def _on_send(self, spec) -> None:
        self.counting.on_send(spec)
        self._mirror()

    def _on_done(self, rec) -> None:
        self.counting.on_done(rec)
        self._mirror()

    # -- the run ---------------------------------------------------------------------------
    async def main(self) -> None:
        import asyncio
        import os

        from loadgen.client.balance import open_client
        from loadgen.client.http_client import ClientConfig
        from loadgen.record import RecordWriter, now_ns
        from loadgen.run.dispatch import Dispatcher, Ledger
        from loadgen.run.procs.job import MEASURING, READY, STATE, WARM_ISSUED, WARMING
        from loadgen.run.rundir import api_key

        job, ctr = self.job, self.ctr
        sc, ld = job.sc, job.sc.load
        loop = asyncio.get_running_loop()
        self.stop = asyncio.Event()
        for s in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(s, self._on_signal, s.name)
        if _early:
            self._on_signal(_early[0])
        os.set_blocking(0, False)
        loop.add_reader(0, self._stdin_ready)
        key = api_key(sc)                       # registered with redact before any write
        self.writer = RecordWriter(job.part_path)
        ledger = Ledger(self.writer, self._on_done, tag=str(job.index))
        cfg = ClientConfig.from_api(sc.api, job.base_url, job.model, key, job.drop_fields)
        size = job.cap or max(1, len(job.planned) or job.num_requests or 1)
        try:
            async with open_client(cfg, sc.target.replica_urls, sc.target.balance, size,
                                   first_turn=job.index) as client:
                self.client = client
                ctr[STATE] = WARMING
                if job.warm and not self.stop.is_set():
                    warm = iter(job.warm)

                    def warm_spec():
                        ctr.bump(WARM_ISSUED)
                        return next(warm)
                    d = Dispatcher(client, ledger, self.stop, ld.drain_timeout_s, self._on_send)
                    await d.closed(warm_spec, min(len(job.warm), job.cap or len(job.warm)),
                                   now_ns(), len(job.warm), None)
                self.counting.start("measured")
                self._mirror()
                ctr[STATE] = READY
                while self.go_t0 is None and not self.stop.is_set():
                    await asyncio.sleep(0.005)
                if self.stop.is_set():
                    return
                ctr[STATE] = MEASURING
                self.t0 = self.go_t0
                self.load.start()
                self.dispatcher = Dispatcher(client, ledger, self.stop, ld.drain_timeout_s,
                                             self._on_send)
                await self._measure(self.dispatcher, self.t0)
                self.end = now_ns()
        except BaseException as e:
            self.error = f"{type(e).__name__}: {e}"
            if self.dispatcher is not None:
                self.dispatcher.cancel_reason = f"run aborted ({type(e).__name__})"
                import contextlib
                with contextlib.suppress(BaseException):
                    await self.dispatcher.cancel_all()
            raise
        finally:
            ledger.cancel_many(job.planned, "scheduled but never sent: run ended early")
            if self.load.result is None and self.t0 is not None:
                self.load.stop()
            self.writer.close()

    async def _measure(self, d, t0: int) -> None:
        from loadgen.client.http_client import RequestSpec
        from loadgen.run.dispatch import closed_stages, sleep_until
        from loadgen.run.procs.job import ISSUED
        from loadgen.run.senders.plan import Plan

        job, ld = self.job, self.job.sc.load
        if ld.mode in ("server", "trace"):
            await d.server(job.planned, job.offsets_ns, t0, job.cap)
            return
        if await sleep_until(t0, self.stop):
            return
        if ld.mode == "offline":
            await d.offline(job.planned, t0, job.cap)
            return
        # a closed loop: this process's slice of the one plan (senders/plan.py, the Locust
        # workers' too): ids first+k, first+k+n, ..., prompt i of the one seeded stream
        specs = Plan(job.sc, job.index, job.n).measured_specs()
        ctr = self.ctr

        def make_spec():
            s = next(specs)
            ctr.bump(ISSUED)                   # counted before it can be sent
            return RequestSpec.of(s, s.id)
        if job.stages:
            await closed_stages(d, make_spec, job.stages, t0, job.num_requests)
        else:
            await d.closed(make_spec, job.cap or 1, t0, job.num_requests, ld.duration_s)

    def result(self) -> dict:
        import os
        c = self.client
        return {"index": self.job.index, "pid": os.getpid(), "t0_ns": self.t0,
                "end_ns": self.end, "client_load": self.load.result,
                "unsent_requests": getattr(self.dispatcher, "unsent_requests", None),
                "records": self.writer.count if self.writer is not None else 0,
                "client_connections": c.describe() if c is not None else None,
                "client_transport": c.transport_info() if c is not None else None,
                "first_response_headers": c.first_response_headers if c is not None else None,
                "interrupted": self.interrupted, "stopped": self.stop_reason,
                "error": self.error}


def main() -> int:
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, _early_signal)
    import json

    from loadgen.client import eventloop
    from loadgen.run.procs.job import DONE, STATE, read_job
    from loadgen.run.storage import atomic_write_text

    job = read_job(0)
    sender = Sender(job)
    try:
        eventloop.run(sender.main())
    finally:
        for s in (signal.SIGINT, signal.SIGTERM):   # the loop gave the signals back: ignore them
            signal.signal(s, signal.SIG_IGN)
        atomic_write_text(job.result_path, json.dumps(sender.result(), default=str))
        sender.ctr[STATE] = DONE
        sender.ctr.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
