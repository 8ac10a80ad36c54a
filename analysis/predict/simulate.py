"""Continuous batching under one load point, simulated step by step (seeded, pure, bounded).

    StepModel (step_model.py) + [(prompt_len, output_len)] (workload.py) + LoadPoint
        ─► simulate(): Clients (the load point's sends) + a scheduler: model.engine's (a
           mirrored server loop, engine_jax.py) or the generic one below (_generic)
        ─► per request: arrival, first token, end ─► TTFT, TPOT, interactivity
        ─► {"ttft_ms_p50", "tpot_ms_p50", "output_throughput", "interactivity_tok_s_p50", ...}

The generic engine: ``slots`` sequences at most run at once (None: no limit); a request that arrives
waits in a FIFO queue until a slot frees. Each step (1) admits waiting requests into free slots,
(2) prefills their prompts, at most ``prefill_chunk`` prompt tokens per step while other
sequences decode (all of them when none decode), (3) decodes one token of every running
sequence that has finished its prefill. The step's time is StepModel.step_s(batch, mean
context, prompt tokens, prompts started in it). A request's first token comes out at the end of the
step that finishes its prompt; each later step adds one token.

Arrivals: ``closed`` (N users, a user's next request sent ``turnaround_ms`` after its last one
ends: loadgen's concurrency and offline modes), ``poisson`` / ``constant`` (open loop at ``rate`` req/s from a seeded
numpy Generator; ``concurrency`` then caps requests in flight, as load.max_concurrency).
The first ``warmup`` requests are simulated but not measured. Everything is in simulated
seconds; the loop stops after ``max_steps`` steps (``truncated``: True).
TTFT = first token − arrival; TPOT = (end − first token) / (output_len − 1) (output_len ≥ 2);
interactivity = 1000 / TPOT per request; output_throughput = measured output tokens /
(last measured end − first measured arrival). p50 = numpy's linear median.
"""
from __future__ import annotations

import collections
import heapq
from dataclasses import dataclass
from typing import Optional

import numpy as np

from analysis.predict.step_model import StepModel

MAX_STEPS = 400_000


@dataclass(frozen=True)
class LoadPoint:
    kind: str = "closed"                 # closed | poisson | constant
    concurrency: Optional[int] = None    # closed: users; open: cap on requests in flight
    rate: Optional[float] = None         # open loop: requests/s
    warmup: int = 0


class _Req:
    __slots__ = ("i", "prompt", "out", "arrival", "left", "gen", "first", "end")

    def __init__(self, i: int, prompt: int, out: int):
        self.i, self.prompt, self.out = i, prompt, out
        self.arrival = self.first = self.end = None
        self.left, self.gen = prompt, 0


def _arrivals(point: LoadPoint, n: int, seed: int) -> Optional[np.ndarray]:
    if point.kind == "closed":
        return None
    if not point.rate:
        raise ValueError(f"load point {point.kind}: needs a rate")
    if point.kind == "constant":
        return np.arange(n) / point.rate
    gaps = np.random.default_rng(seed).exponential(1.0 / point.rate, size=n)
    return np.concatenate([[0.0], np.cumsum(gaps[:-1])])


class Clients:
    """The client side: closed-loop users (a user sends again ``turnaround`` after its request
    ends) or open-loop arrivals capped at ``concurrency`` in flight; shared by the schedulers."""

    def __init__(self, reqs: list, point: LoadPoint, seed: int, turnaround_s: float):
        n = len(reqs)
        self.times = _arrivals(point, n, seed)
        self.cap = point.concurrency or n
        self.pending = collections.deque(reqs)       # not yet sent
        self.in_flight = 0
        self.turnaround = turnaround_s
        self.free = [0.0] * min(self.cap, n)         # closed loop: when each user sends next (heap)

    def send_ready(self, now: float, waiting: collections.deque) -> None:
        """Move the requests sent by ``now`` into the server's FIFO ``waiting``."""
        closed = self.times is None
        while self.pending and (self.free and self.free[0] <= now if closed
                                else self.in_flight < self.cap):
            r = self.pending[0]
            if not closed and float(self.times[r.i]) > now:
                break
            self.pending.popleft()
            r.arrival = heapq.heappop(self.free) if closed else float(self.times[r.i])
            self.in_flight += 1
            waiting.append(r)

    def idle(self) -> bool:
        """Nothing more will be sent."""
        return not self.pending or (self.times is None and not self.free)

    def next_send(self) -> float:
        return self.free[0] if self.times is None else float(self.times[self.pending[0].i])

    def ended(self, r, t: float) -> None:
        r.end = t
        self.in_flight -= 1
        if self.times is None:
            heapq.heappush(self.free, t + self.turnaround)


def simulate(model: StepModel, pairs: list[tuple[int, int]], point: LoadPoint, seed: int = 0,
             max_steps: int = MAX_STEPS) -> dict:
    reqs = [_Req(i, max(1, p), max(1, o)) for i, (p, o) in enumerate(pairs)]
    clients = Clients(reqs, point, seed, model.overheads.turnaround_ms / 1e3)
    run = model.engine.run if model.engine is not None else _generic
    done, steps = run(model, reqs, clients, max_steps)
    return summarise(reqs[point.warmup:], truncated=done < len(reqs), steps=steps)


def _generic(model: StepModel, reqs: list, clients: Clients, max_steps: int) -> tuple[int, int]:
    """The generic engine: one prefill chunk per step beside the decodes (module docstring)."""
    n = len(reqs)
    slots = model.slots or n
    chunk = model.prefill_chunk
    waiting: collections.deque = collections.deque()   # sent, waiting for a slot (server)
    running: list[_Req] = []
    t, steps, done = 0.0, 0, 0
    while done < n and steps < max_steps:
        clients.send_ready(t, waiting)
        if not running and not waiting:
            if clients.idle():
                break
            t = max(t, clients.next_send())
            continue
        while waiting and len(running) < slots:
            running.append(waiting.popleft())
        decoding = [r for r in running if r.left == 0]
        budget = chunk if (decoding and chunk) else None
        ptoks, admitted, finished_prefill = 0, 0, []
        for r in running:
            if r.left == 0:
                continue
            if budget is not None and ptoks >= budget:
                break
            take = r.left if budget is None else min(r.left, budget - ptoks)
            admitted += r.left == r.prompt          # its first prefill piece
            r.left -= take
            ptoks += take
            if r.left == 0:
                finished_prefill.append(r)
        t += model.step_s(len(decoding), mean_context(decoding), ptoks, admitted)
        steps += 1
        for r in decoding:
            r.gen += 1
        for r in finished_prefill:
            r.gen, r.first = 1, t
        ended = [r for r in running if r.gen >= r.out and r.left == 0]
        for r in ended:
            running.remove(r)
            clients.ended(r, t)
            done += 1
    return done, steps


def mean_context(decoding: list) -> int:
    return (int(round(sum(r.prompt + r.gen for r in decoding) / len(decoding)))
            if decoding else 0)


def summarise(reqs: list, truncated: bool = False, steps: int = 0) -> dict:
    """The forecast figures of the measured (non-warm-up) simulated requests."""
    ok = [r for r in reqs if r.end is not None]
    ttft = [(r.first - r.arrival) * 1e3 for r in ok]
    tpot = [(r.end - r.first) * 1e3 / (r.out - 1) for r in ok if r.out > 1]
    inter = [1e3 / x for x in tpot if x > 0]
    span = (max(r.end for r in ok) - min(r.arrival for r in ok)) if ok else 0.0
    med = lambda xs: float(np.median(xs)) if xs else None  # noqa: E731
    return {"ttft_ms_p50": med(ttft), "tpot_ms_p50": med(tpot),
            "output_throughput": sum(r.out for r in ok) / span if span > 0 else None,
            "interactivity_tok_s_p50": med(inter),
            "requests": len(ok), "steps": steps, "truncated": truncated}
