"""A planned run's measured requests (offline, server, trace), built one at a time as they are sent.

    WorkloadPlan stream ─► Planned(prompts, make, first_id, n)
        iter(planned)   RequestSpec i, built when the dispatcher is about to send it (never
                        before: memory holds what is in flight, not what is planned — 10^6
                        requests of 10^6-token prompts are never all in memory)
        rest(i, at)     light stand-ins (Unbuilt: id, phase, scheduled time) for requests i..n-1
                        that were never built, for their ``cancelled`` records (no prompt is built
                        to record that a request was never sent)

The dispatcher (loadgen.engine.aio.dispatch) takes a list too (the --procs children hand it theirs);
``rest`` is how it writes the never-sent remainder of either.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterator, Optional


@dataclass
class Unbuilt:
    """A scheduled request never built (so never sent): what its cancelled record needs."""
    id: int
    phase: str = "measured"
    scheduled_at_ns: Optional[int] = None
    max_tokens: Optional[int] = None
    prompt_tokens: Optional[int] = None


class Planned:
    """``n`` measured requests with ids ``first_id``, ``first_id + step``, .., built lazily from
    ``prompts`` by ``make(prompt_spec, id)`` (``step``: a --procs child's slice, every n-th)."""

    def __init__(self, prompts: Iterator, make: Callable[[object, int], object], first_id: int,
                 n: int, step: int = 1):
        self.prompts, self.make, self.first_id, self.n = prompts, make, first_id, n
        self.step = step
        self.built = 0

    def __len__(self) -> int:
        return self.n

    def __iter__(self) -> Iterator:
        while self.built < self.n:
            p = next(self.prompts, None)
            if p is None:
                return
            i = self.built
            self.built += 1
            yield self.make(p, self.first_id + i * self.step)

    def rest(self, i: int, at: Optional[Callable[[int], int]] = None, skip=None) -> "Rest":
        """Requests i.. never built (``at(k)``: request k's scheduled time, if known), but
        the ids in ``skip`` (recorded already)."""
        return Rest(self.first_id, range(max(i, 0), self.n), at, skip, self.step)


class Rest:
    """Requests of a Planned never built: light stand-ins one by one (Unbuilt), for their
    cancelled records (written from one template: loadgen.engine.core.cancelled)."""

    def __init__(self, first_id: int, ks: range, at: Optional[Callable[[int], int]],
                 skip=None, step: int = 1):
        self.first_id, self.ks, self.at, self.skip, self.step = first_id, ks, at, skip, step

    def __iter__(self) -> Iterator[Unbuilt]:
        at, first, skip, step = self.at, self.first_id, self.skip or (), self.step
        for k in self.ks:
            if first + k * step not in skip:
                yield Unbuilt(first + k * step, scheduled_at_ns=at(k) if at is not None else None)


def remainder(specs, i: int, at: Optional[Callable[[int], int]] = None):
    """Requests i.. of ``specs`` (a list of RequestSpecs or a Planned), each with its scheduled
    time from ``at``: a list's built specs, or a Planned's ``Rest``."""
    if isinstance(specs, Planned):
        return specs.rest(i, at)
    return _built_rest(specs, i, at)


def _built_rest(specs: list, i: int, at: Optional[Callable[[int], int]]) -> Iterator:
    for k in range(i, len(specs)):
        s = specs[k]
        if at is not None:
            s.scheduled_at_ns = at(k)
        yield s
