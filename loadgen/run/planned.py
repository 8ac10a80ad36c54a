"""A planned run's measured requests (offline, server, trace), built one at a time as they are sent.

    WorkloadPlan stream ─► Planned(prompts, make, first_id, n)
        iter(planned)   RequestSpec i, built when the dispatcher is about to send it (never
                        before: memory holds what is in flight, not what is planned — 10^6
                        requests of 10^6-token prompts are never all in memory)
        rest(i, at)     light stand-ins (Unbuilt: id, phase, scheduled time) for requests i..n-1
                        that were never built, for their ``cancelled`` records (no prompt is built
                        to record that a request was never sent)

The dispatcher (loadgen.run.dispatch) takes a list too (the --procs children hand it theirs);
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
    """``n`` measured requests with ids ``first_id``.., built lazily from ``prompts`` by
    ``make(prompt_spec, id)``."""

    def __init__(self, prompts: Iterator, make: Callable[[object, int], object], first_id: int,
                 n: int):
        self.prompts, self.make, self.first_id, self.n = prompts, make, first_id, n
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
            yield self.make(p, self.first_id + i)

    def rest(self, i: int, at: Optional[Callable[[int], int]] = None) -> "Rest":
        """Requests i.. never built (``at(k)``: request k's scheduled time, if known)."""
        return Rest(self.first_id, range(max(i, 0), self.n), at)


_ID, _AT, _END = 918273645546372819, 827364554637281991, 736455463728199182   # template marks


class Rest:
    """Requests of a Planned never built: stand-ins one by one (``iter``: Unbuilt), or their
    cancelled records' lines made from one template (``lines``: a fraction of a µs a line, so
    an interrupted 10^6-request plan is recorded in about a second, not half a minute)."""

    def __init__(self, first_id: int, ks: range, at: Optional[Callable[[int], int]]):
        self.first_id, self.ks, self.at = first_id, ks, at

    def __iter__(self) -> Iterator[Unbuilt]:
        at = self.at
        for k in self.ks:
            yield Unbuilt(self.first_id + k, scheduled_at_ns=at(k) if at is not None else None)

    def lines(self, why: str, tag: Optional[str], skip, bulk: int
              ) -> Iterator[tuple[list, list]]:
        """(ids, JSON lines) in batches of ``bulk``: a cancelled record for each request not in
        ``skip``, exactly as Ledger.cancelled would write it (Record.to_json, redacted)."""
        from loadgen.record import Record, now_ns
        from loadgen.redact import redact
        text = redact(Record(id=_ID, phase="measured", scheduled_at_ns=_AT, end_at_ns=_END,
                             status="cancelled", error_kind="cancelled", error=why,
                             worker=tag).to_json())
        marks = sorted((text.index(str(m)), m) for m in (_ID, _AT, _END))
        pieces, pos = [], 0
        for where, m in marks:
            pieces.append(text[pos:where])
            pos = where + len(str(m))
        pieces.append(text[pos:])
        a, b, c, d = pieces
        order = [m for _, m in marks]
        end, at, first = now_ns(), self.at, self.first_id
        ids: list = []
        out: list = []
        for k in self.ks:
            i = first + k
            if i in skip:
                continue
            val = {_ID: i, _AT: "null" if at is None else at(k), _END: end}
            out.append(f"{a}{val[order[0]]}{b}{val[order[1]]}{c}{val[order[2]]}{d}")
            ids.append(i)
            if len(out) >= bulk:
                yield ids, out
                ids, out = [], []
        if out:
            yield ids, out


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
