"""The asyncio driver of the one scheduler (engine/core/pacing.py), and the one-record-per-request ledger.

    pacing (engine.core.pacing.pacing_for: the mode's strategy, begun at t0) + specs
        ─► Dispatcher.measure   planned (offline, server, trace): request i created as a task
                                at pacing.due(i) whatever earlier ones are doing (up to ``cap``
                                in flight); users (closed loop, stages): user k sends whenever
                                pacing.when(k, now) lets it (scheduled_at = the user was free)
        ─► drain                until done, stopped, or pacing.drain_due(now, last send)
        each task ─► Client.execute(spec) ─► Ledger.write(Record) (flushed as it ends)
One process runs this driver with n = 1; each --procs child the same driver on its slice.

Open loop never coordinates omission: ``scheduled_at_ns`` is the schedule's time, fixed before
the task exists; an in-flight cap only delays ``sent_at_ns``, so the lag shows in the records.
Stopping (interrupt, drain timeout) cancels what is in flight and writes every unfinished or
never-sent request as a "cancelled" record; the ledger writes each id exactly once.
The rule: every request that was scheduled (open loop, offline) or started has one record; a
closed loop's never-started remainder (load.num_requests − issued) is ONE count,
``Dispatcher.unsent_requests`` (meta.json and summary.json ``unsent_requests``), never lines.
A records.jsonl write that fails (disk full) stops the run: ``Ledger.failed`` keeps the error,
the stop event is set, nothing more is written (the runner raises it at the end).
"""
from __future__ import annotations

import asyncio
from typing import Callable, Iterator, Optional

from loadgen.record import Record, now_ns
from loadgen.engine.aio.planned import remainder
from loadgen.engine.core.clock import MAX_NAP_S, nap_s
from loadgen.engine.core.ledger import Ledger  # noqa: F401  (the one ledger, re-exported)
from loadgen.engine.core.pacing import Pacing


async def sleep_until(deadline_ns: int, stop: asyncio.Event) -> bool:
    """Sleep until ``deadline_ns`` (perf_counter_ns) by the senders' nap rule (engine.core.clock:
    nap, then yield-spin the last ms). Returns True if ``stop`` was set first."""
    while not stop.is_set():
        nap = nap_s(deadline_ns, now_ns())
        if nap is None:
            return False
        await asyncio.sleep(nap)
    return True


class Dispatcher:
    """Runs one phase's requests through ``client`` and records them all in ``ledger``."""

    def __init__(self, client, ledger: Ledger, stop: asyncio.Event, drain_timeout_s: float,
                 on_send: Optional[Callable[[object], None]] = None):
        self.client = client
        self.ledger = ledger
        self.stop = stop
        self.drain_timeout_s = drain_timeout_s
        self.on_send = on_send
        self.tasks: set[asyncio.Task] = set()
        self.cancel_reason = "run interrupted before the request ended"
        self.last_issue_ns: Optional[int] = None
        self.unsent_requests: Optional[int] = None   # closed loop: the never-started remainder
        self.max_in_flight: Optional[int] = None     # planned runs without a cap: the fd bound
        self._freed: Optional[asyncio.Event] = None  # set when a request ends (_slot waits)
        ledger.stop_on_failure(stop)

    # -- one request -------------------------------------------------------------------------
    async def _one(self, spec, sem: Optional[asyncio.Semaphore]) -> Optional[Record]:
        """Send ``spec``, write its record, and return it (a session's next turn reads it)."""
        try:
            if sem is not None:
                async with sem:
                    return await self._execute(spec)
            return await self._execute(spec)
        except asyncio.CancelledError:
            self.ledger.cancel(spec, self.cancel_reason)
            raise
        except BaseException as e:  # a bug or KeyboardInterrupt mid-request: still one record
            self.ledger.cancel(spec, f"run aborted ({type(e).__name__}) before the request ended")
            raise

    async def _execute(self, spec) -> Record:
        if self.on_send is not None:
            self.on_send(spec)
        rec = self.client.new_record(spec)   # filled in place, even when cancelled mid-way
        self.last_issue_ns = now_ns()          # the drain timeout counts from the last send
        try:
            await self.client.execute(spec, rec)
        except asyncio.CancelledError:
            if rec.status != "ok":
                rec.status, rec.error_kind, rec.error = "cancelled", "cancelled", self.cancel_reason
            if rec.end_at_ns is None:
                rec.end_at_ns = now_ns()
            self.ledger.write(rec)
            raise
        except Exception as e:  # the client promises not to raise; keep the record anyway
            rec.status, rec.error_kind = "error", "client"
            rec.error = f"{type(e).__name__}: {e}"
            rec.end_at_ns = rec.end_at_ns or now_ns()
        self.ledger.write(rec)
        return rec

    def _spawn(self, coro) -> asyncio.Task:
        t = asyncio.get_running_loop().create_task(coro)
        self.tasks.add(t)
        t.add_done_callback(self._ended)
        return t

    def _ended(self, t: asyncio.Task) -> None:
        self.tasks.discard(t)
        if self._freed is not None:
            self._freed.set()

    async def _slot(self, bound: Optional[int]) -> bool:
        """Wait until fewer than ``bound`` requests are in flight (None: no bound); False when
        stopped first. A planned request waits here unbuilt, not as a task holding its prompt."""
        while bound and len(self.tasks) >= bound and not self.stop.is_set():
            self._freed = self._freed or asyncio.Event()
            self._freed.clear()
            try:
                await asyncio.wait_for(self._freed.wait(), MAX_NAP_S)
            except asyncio.TimeoutError:
                pass
        return not self.stop.is_set()

    async def _planned(self, specs, count: int, at: Callable[[int], int],
                       bound: Optional[int]) -> int:
        """Request i of ``specs`` (a list, or a lazy loadgen.engine.aio.planned.Planned: built only
        now) sent at ``at(i)`` once fewer than ``bound`` are in flight; returns how many were
        issued. Yields to the loop every few sends, so a stop (a signal) is seen even when the
        schedule is far ahead of what the client can send."""
        it, issued = iter(specs), 0
        for i in range(count):
            due = at(i)
            if await sleep_until(due, self.stop) or not await self._slot(bound):
                break
            s = next(it, None)
            if s is None:
                break
            s.scheduled_at_ns = due
            self._spawn(self._one(s, None))
            self.last_issue_ns = max(self.last_issue_ns or due, due)
            issued += 1
            if not issued & 15:
                await asyncio.sleep(0)
        return issued

    # -- ending --------------------------------------------------------------------------------
    async def drain(self, pacing: Optional[Pacing] = None) -> None:
        """Wait for in-flight tasks until done, stop, or ``pacing.drain_due`` (a planned run:
        drain_timeout_s after the last send; a capped run keeps sending while it drains; a
        closed loop: after its duration or last stage); then cancel the rest (each writes a
        cancelled record). No ``pacing``: the planned rule."""
        pacing = pacing or Pacing(self.drain_timeout_s)
        while self.tasks and not self.stop.is_set():
            why = pacing.drain_due(now_ns(), self.last_issue_ns)
            if why is not None:
                self.cancel_reason = why
                break
            left = pacing.drain_left_s(now_ns(), self.last_issue_ns)
            await asyncio.wait(set(self.tasks), timeout=min(left, MAX_NAP_S * 2))
        await self.cancel_all()

    async def cancel_all(self) -> None:
        pending = list(self.tasks)
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    # -- the one driver of the pacing strategies (engine/core/pacing.py) ---------------------------
    async def measure(self, pacing: Pacing, specs, cap: Optional[int] = None) -> int:
        """Run ``pacing`` (begun at its t0) to its end and drain; returns how many were issued.
        Planned (offline, server, trace): ``specs`` a list or a lazy Planned, request i sent
        at ``pacing.due(i)`` with at most ``cap`` (None: ``max_in_flight``) in flight; the
        never-sent rest written as cancelled. Users (closed loop, stages): ``specs`` a zero-arg
        factory; user k sends whenever ``pacing.when(k, now)`` lets it; a closed loop's
        never-started remainder is the count ``unsent_requests``."""
        if pacing.planned:
            self.last_issue_ns = pacing.t0
            n = len(specs) if pacing.offsets is None else min(len(specs), len(pacing.offsets))
            issued = await self._planned(specs, n, pacing.due, cap or self.max_in_flight)
            await self.drain(pacing)
            self.ledger.cancel_many(remainder(specs, issued, pacing.due),
                                    "scheduled but never sent: run interrupted")
            return issued

        async def user(k: int) -> None:
            while not self.stop.is_set():
                now = now_ns()
                t = pacing.when(k, now)
                if t is None:
                    return
                if t > now:                      # t0, or a stage that needs this user, later
                    if await sleep_until(t, self.stop):
                        return
                    continue
                pacing.took()
                spec = make_spec()
                spec.scheduled_at_ns = t
                await self._one(spec, None)

        make_spec = specs
        for k in range(pacing.users):            # the user tasks are all that is in flight
            self._spawn(user(k))
        await self.drain(pacing)
        self.unsent_requests = pacing.unsent()
        return pacing.issued



def spec_factory(specs: Iterator, make: Callable[[object, int], object], first_id: int):
    """Wrap a PromptSpec iterator into a zero-arg factory of RequestSpecs with sequential ids."""
    state = {"next": first_id}

    def make_spec():
        i = state["next"]
        state["next"] += 1
        return make(next(specs), i)
    return make_spec
