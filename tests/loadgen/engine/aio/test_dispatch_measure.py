"""loadgen.engine.aio.dispatch.Dispatcher.measure: the asyncio driver of engine/core/pacing.py's strategies,
with a hand-written fake client (no socket): every planned request and every closed-loop turn
has one record; a closed loop's never-started rest is the count ``unsent_requests``."""
import asyncio

from loadgen.client.http_client import RequestSpec
from loadgen.scenario.workload import PromptSpec
from loadgen.record import Record, now_ns
from loadgen.engine.aio.dispatch import Dispatcher, Ledger, spec_factory
from loadgen.engine.core.pacing import Closed, Offline, Staged


class FakeClient:
    """Answers "ok" at once; stops the run after ``stop_after`` requests (if given)."""

    def __init__(self, stop: asyncio.Event, stop_after=None):
        self.stop, self.stop_after, self.n = stop, stop_after, 0

    @staticmethod
    def new_record(spec) -> Record:
        return Record(id=spec.id, phase=spec.phase, scheduled_at_ns=spec.scheduled_at_ns)

    async def execute(self, spec, rec) -> None:
        self.n += 1
        rec.sent_at_ns = now_ns()
        await asyncio.sleep(0)
        rec.status, rec.end_at_ns = "ok", now_ns()
        if self.stop_after is not None and self.n >= self.stop_after:
            self.stop.set()


class ListWriter:
    def __init__(self):
        self.recs = []

    def write(self, rec):
        self.recs.append(rec)


class Prompt:
    prompt, prompt_tokens, max_tokens = "p", 1, 2
    images = messages = expected = audio = None


def _run(pacing, make_specs, stop_after=None):
    async def main():
        stop, w = asyncio.Event(), ListWriter()
        d = Dispatcher(FakeClient(stop, stop_after), Ledger(w), stop, drain_timeout_s=30)
        issued = await d.measure(pacing.begin(now_ns()), make_specs())
        return issued, d.unsent_requests, w.recs
    return asyncio.run(main())


def _factory():
    return spec_factory(iter(lambda: Prompt(), None), _of, 0)


def _of(p, i):
    return RequestSpec.of(PromptSpec(p.prompt, 1, 2), i)


def test_a_closed_loop_refills_its_users_until_the_budget():
    issued, unsent, recs = _run(Closed(30, users=3, num_requests=10), _factory)
    assert issued == 10 and unsent == 0
    assert sorted(r.id for r in recs) == list(range(10)) and {r.status for r in recs} == {"ok"}


def test_a_stopped_closed_loop_counts_what_it_never_started():
    issued, unsent, recs = _run(Closed(30, users=1, num_requests=50), _factory, stop_after=4)
    assert issued == len(recs) and unsent == 50 - issued and issued < 50


def test_a_staged_loop_runs_its_users_and_counts_nothing():
    stages = [{"concurrency": 2, "start_s": 0.0, "duration_s": 30.0}]
    issued, unsent, recs = _run(Staged(30, stages, num_requests=6), _factory)
    assert issued == 6 and len(recs) == 6 and unsent is None


def test_offline_writes_every_planned_request_once_even_when_stopped():
    specs = [_of(Prompt(), i) for i in range(8)]
    issued, _, recs = _run(Offline(30, [0] * 8), lambda: specs, stop_after=2)
    assert sorted(r.id for r in recs) == list(range(8))          # sent or cancelled, once each
    assert sum(r.status == "cancelled" for r in recs) >= 8 - issued
