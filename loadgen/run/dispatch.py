"""Load loops: when each request is handed to the client, and the one-record-per-request ledger.

    specs + schedule ─► Dispatcher.offline  (all at t0, up to ``cap`` in flight)
                     ─► Dispatcher.server   (open loop: one task per request, created at its
                                             scheduled time whatever earlier ones are doing)
                     ─► Dispatcher.closed   (N virtual users; scheduled_at = user became free)
        each task ─► Client.execute(spec) ─► Ledger.write(Record) (flushed as it ends)

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
from typing import Callable, Iterable, Iterator, Optional

from loadgen.record import Record, now_ns
from loadgen.run.planned import remainder
from loadgen.run.senders.clock import MAX_NAP_S, nap_s
from loadgen.run.senders.ledger import Ledger  # noqa: F401  (the one ledger, re-exported)
from loadgen.run.senders.sender import drain_why
from loadgen.run.senders.stages import StageGate



async def sleep_until(deadline_ns: int, stop: asyncio.Event) -> bool:
    """Sleep until ``deadline_ns`` (perf_counter_ns) by the senders' nap rule (senders.clock:
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
        """Request i of ``specs`` (a list, or a lazy loadgen.run.planned.Planned: built only
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
    async def drain(self) -> None:
        """Wait for in-flight tasks until done, stop, or drain_timeout_s after the last send
        (a capped run keeps sending while it drains); then cancel the rest (each writes a
        cancelled record)."""
        while self.tasks and not self.stop.is_set():
            start = self.last_issue_ns or now_ns()
            left = (start + int(self.drain_timeout_s * 1e9) - now_ns()) / 1e9
            if left <= 0:
                self.cancel_reason = drain_why(self.drain_timeout_s)
                break
            await asyncio.wait(set(self.tasks), timeout=min(left, MAX_NAP_S * 2))
        await self.cancel_all()

    async def cancel_all(self) -> None:
        pending = list(self.tasks)
        for t in pending:
            t.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)

    def _unsent(self, specs: Iterable, why: str) -> None:
        self.ledger.cancel_many(specs, why)

    # -- the three loops -------------------------------------------------------------------
    async def offline(self, specs, t0_ns: int, cap: Optional[int]) -> None:
        """Every request available at t0; at most ``cap`` in flight (None: ``max_in_flight``)."""
        self.last_issue_ns = t0_ns
        issued = await self._planned(specs, len(specs), lambda i: t0_ns, cap or self.max_in_flight)
        await self.drain()
        self._unsent(remainder(specs, issued, lambda i: t0_ns),
                     "scheduled but never sent: run interrupted")

    async def server(self, specs, offsets_ns, t0_ns: int, cap: Optional[int]) -> None:
        """Open loop: request i is sent at t0 + offsets[i], never later by design (but for
        ``cap``, else ``max_in_flight``: a wait that shows as lag in its record)."""
        def at(i: int) -> int:
            return t0_ns + int(offsets_ns[i])
        n = min(len(specs), len(offsets_ns))
        issued = await self._planned(specs, n, at, cap or self.max_in_flight)
        await self.drain()
        self._unsent(remainder(specs, issued, at), "scheduled but never sent: run interrupted")

    async def closed(self, make_spec: Callable[[], object], users: int, t0_ns: int,
                     num_requests: Optional[int], duration_s: Optional[float]) -> int:
        """``users`` virtual users, each sending its next request when its last one ended.
        Returns how many requests were issued; a stop before ``num_requests`` leaves the rest
        as the count ``unsent_requests`` (no records: 10^12 of them would never end)."""
        end_ns = t0_ns + int(duration_s * 1e9) if duration_s else None
        state = {"issued": 0}

        async def user() -> None:
            while not self.stop.is_set():
                t = now_ns()
                if num_requests is not None and state["issued"] >= num_requests:
                    return
                if end_ns is not None and t >= end_ns:
                    return
                state["issued"] += 1
                spec = make_spec()
                spec.scheduled_at_ns = t
                await self._one(spec, None)

        users_t = [self._spawn(user()) for _ in range(users)]
        # a user task ends by itself; wait for them (bounded as drain() bounds stragglers)
        while not self.stop.is_set() and any(not t.done() for t in users_t):
            if end_ns is not None:
                over = now_ns() - end_ns - int(self.drain_timeout_s * 1e9)
                if over > 0:
                    self.cancel_reason = drain_why(self.drain_timeout_s, "load.duration_s")
                    break
            await asyncio.wait([t for t in users_t if not t.done()], timeout=MAX_NAP_S * 2)
        await self.cancel_all()
        issued = state["issued"]
        if num_requests is not None and end_ns is None:
            self.unsent_requests = max(0, num_requests - issued)
        return issued


async def closed_stages(d: "Dispatcher", make_spec: Callable[[], object], stages: list[dict],
                        t0_ns: int, num_requests: Optional[int]) -> int:
    """Closed loop whose number of users changes by stage: user i sends only while i < the
    current stage's concurrency (a user over the limit finishes its request, then waits for a
    stage that needs it); stops at the end of the last stage or after ``num_requests``."""
    users_n = max(int(s["concurrency"]) for s in stages)
    gate = StageGate(stages, t0_ns, 0, [users_n])        # the one stage driver (senders/)
    end_ns = gate.end_ns
    state = {"issued": 0}

    async def user(i: int) -> None:
        while not d.stop.is_set():
            t = gate.when(i, now_ns())
            if t is None or (num_requests is not None and state["issued"] >= num_requests):
                return
            if t > now_ns() and await sleep_until(t, d.stop):
                return
            if now_ns() >= end_ns:
                return
            state["issued"] += 1
            spec = make_spec()
            spec.scheduled_at_ns = now_ns()
            await d._one(spec, None)

    users = [d._spawn(user(i)) for i in range(users_n)]
    while not d.stop.is_set() and any(not u.done() for u in users):
        if now_ns() - end_ns > int(d.drain_timeout_s * 1e9):
            d.cancel_reason = drain_why(d.drain_timeout_s, "the last stage")
            break
        await asyncio.wait([u for u in users if not u.done()], timeout=MAX_NAP_S * 2)
    await d.cancel_all()
    return state["issued"]


def spec_factory(specs: Iterator, make: Callable[[object, int], object], first_id: int):
    """Wrap a PromptSpec iterator into a zero-arg factory of RequestSpecs with sequential ids."""
    state = {"next": first_id}

    def make_spec():
        i = state["next"]
        state["next"] += 1
        return make(next(specs), i)
    return make_spec
