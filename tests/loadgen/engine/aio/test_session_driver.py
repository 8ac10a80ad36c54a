"""The session driver (loadgen.engine.aio.sessions) with a hand-written fake client: a crash in the driver
is raised (never lost as "Task exception was never retrieved"), and a stopped session writes a
cancelled record for each turn it never sent."""
import asyncio
import gc

import pytest

from loadgen.client.http_client import RequestSpec
from loadgen.scenario.workload import PromptSpec
from loadgen.record import Record, now_ns
from loadgen.engine.aio.dispatch import Dispatcher, Ledger
from loadgen.engine.aio.sessions import SessionDriver
from loadgen.scenario.sessions import Session, Turn


class FakeClient:
    """Answers every turn "ok" after ``delay_s``."""

    def __init__(self, delay_s: float = 0.0):
        self.delay_s = delay_s

    @staticmethod
    def new_record(spec) -> Record:
        return Record(id=spec.id, phase=spec.phase, scheduled_at_ns=spec.scheduled_at_ns,
                      session_id=spec.session_id, turn=spec.turn)

    async def execute(self, spec, rec) -> None:
        rec.sent_at_ns = now_ns()
        await asyncio.sleep(self.delay_s)
        rec.status, rec.output_text, rec.end_at_ns = "ok", "answer", now_ns()


class ListWriter:
    def __init__(self):
        self.recs = []

    def write(self, rec):
        self.recs.append(rec)


def make_spec(turn, k, messages, session, i):
    return RequestSpec.of(PromptSpec(turn.user, 1, turn.max_tokens), i, messages=messages,
                          session_id=session.id, turn=k, want_text=True)


def session(i: int, turns: int = 3, think_s: float = 0.0) -> Session:
    return Session(f"s{i}", tuple(Turn(f"q{k}", 1, 2, think_s) for k in range(turns)))


def driver(client, sessions, num_requests):
    w = ListWriter()
    d = Dispatcher(client, Ledger(w), asyncio.Event(), drain_timeout_s=30)
    return SessionDriver(d, sessions, make_spec, 0, num_requests, None), w


async def test_a_crash_in_the_driver_is_raised():
    def sessions():
        yield session(0)
        raise RuntimeError("bad session file")

    unretrieved = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, ctx: unretrieved.append(ctx))
    drv, w = driver(FakeClient(0.01), sessions(), 20)
    with pytest.raises(RuntimeError):           # "bad session file", or the next() after it
        await asyncio.wait_for(drv.concurrency(2, now_ns()), 10)
    gc.collect()
    await asyncio.sleep(0)
    assert not [c for c in unretrieved if "never retrieved" in c.get("message", "")]
    assert len({r.id for r in w.recs}) == len(w.recs)


async def test_stopped_sessions_record_every_turn_not_sent():
    drv, w = driver(FakeClient(0.05), (session(i, think_s=0.2) for i in range(100)), 30)
    task = asyncio.ensure_future(drv.concurrency(3, now_ns()))
    while not any(r.status == "ok" for r in w.recs):
        await asyncio.sleep(0.01)
    drv.d.stop.set()
    await asyncio.wait_for(task, 10)
    ids = sorted(r.id for r in w.recs)
    assert ids == list(range(len(ids)))
    assert len(w.recs) + drv.d.unsent_requests == 30
    for s in {r.session_id for r in w.recs}:                       # started sessions: all turns
        assert sorted(r.turn for r in w.recs if r.session_id == s) == [1, 2, 3]
    assert any(r.status == "cancelled" and r.sent_at_ns is None for r in w.recs)
