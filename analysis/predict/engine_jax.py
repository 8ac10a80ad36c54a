"""The servers.jax engine loop, mirrored step by step for simulate.py (servers/jax/orchestrator.py).

    StepModel (its ``engine`` a JaxEngine) + requests + simulate.Clients
        ─► JaxEngine.run() ─► each request's first token and end (simulated seconds)

One iteration of the orchestrator's loop, as the server runs it:
  1. admit: every waiting request takes the lowest free slot. Admitted while streams decode, a
     prompt longer than ``interleave_chunk`` becomes a *fused* job (its pieces ride in the
     decode steps); otherwise a *standalone* job.
  2. prefill: standalone jobs, oldest first, each a pass of its own (one prompt per pass, at most
     ``prefill_chunk`` tokens), until ``prefill_budget`` prompt tokens are spent (one
     ``interleave_chunk`` while streams decode; at least one pass). A job that finishes emits its
     first token at the end of its pass and decodes in the step below.
  3. decode: when streams decode or a fused job waits, ONE batched step over slots [0, B), B the
     smallest batch bucket (1, 2, 4, …, slots) above the highest active slot: its cost is B's,
     not the number of active streams. It carries the next piece of the oldest fused job:
     ``interleave_chunk`` tokens, 4x that while ``catch_up_tokens`` or more prompt tokens wait
     to be prefilled; the fused job's first token comes out at the end of the step that ends
     its prompt.
Costs (step_model.py): a standalone pass is step_s(0, 0, tokens, 1) less step_ms (no decode
step); a decode step is step_s(B, mean context, piece tokens, 1 if the piece is a job's first).
Left out: prompt padding to prefill buckets, attention-length buckets, the prefix cache,
cancellations, embeddings.
"""
from __future__ import annotations

import collections
import heapq
from dataclasses import dataclass
from typing import Optional

from analysis.predict.simulate import mean_context


def batch_buckets(slots: int) -> list[int]:
    """1, 2, 4, … up to (and always ending at) slots: servers/jax/buckets.buckets(1, slots)."""
    out, b = [], 1
    while b < slots:
        out.append(b)
        b *= 2
    return out + [slots]


@dataclass(frozen=True)
class JaxEngine:
    """servers.jax's scheduling knobs (its defaults: serve.py, orchestrator.py, engine.py)."""
    interleave_chunk: int = 16          # --interleave-chunk
    prefill_budget: int = 512           # Orchestrator(prefill_budget)
    prefill_chunk: int = 256            # Engine(prefill_chunk): a longer prompt is chunked
    catch_up_tokens: Optional[int] = None   # default 4 · interleave_long

    @property
    def interleave_long(self) -> int:
        return 4 * self.interleave_chunk

    @property
    def catch_up(self) -> int:
        return (self.catch_up_tokens if self.catch_up_tokens is not None
                else 4 * (self.interleave_long or 64))

    def run(self, model, reqs: list, clients, max_steps: int) -> tuple[int, int]:
        return _Loop(self, model, reqs, clients).run(max_steps)


class _Loop:
    def __init__(self, eng: JaxEngine, model, reqs: list, clients):
        self.eng, self.model, self.clients = eng, model, clients
        self.n = len(reqs)
        slots = model.slots or self.n
        self.buckets = batch_buckets(slots)
        self.free = list(range(slots))                    # heap: lowest free slot first
        self.waiting: collections.deque = collections.deque()
        self.slot: dict = {}                              # request id -> slot
        self.prefilling: list = []                        # FIFO: (request, fused)
        self.decoding: list = []                          # past their prefill
        self.t, self.done = 0.0, 0
        self.step_ms = model.overheads.step_ms

    def run(self, max_steps: int) -> tuple[int, int]:
        steps = 0
        while self.done < self.n and steps < max_steps:
            self.clients.send_ready(self.t, self.waiting)
            if not (self.waiting or self.prefilling or self.decoding):
                if self.clients.idle():
                    break
                self.t = max(self.t, self.clients.next_send())
                continue
            self._admit()
            self._prefill_some()
            if self.decoding or any(f for _, f in self.prefilling):
                self._step()
            steps += 1
        return self.done, steps

    def _admit(self) -> None:
        c = self.eng.interleave_chunk
        # an idle engine wakes on one submission: requests sent at the same instant reach it one
        # by one, so it starts the first one's prefill alone and admits the rest next iteration
        # (fused, as that stream then decodes): the staggered TTFTs a burst measures
        cap = 1 if not (self.prefilling or self.decoding) else len(self.free)
        while self.waiting and self.free and cap > 0:
            cap -= 1
            r = self.waiting.popleft()
            self.slot[r.i] = heapq.heappop(self.free)
            self.prefilling.append((r, bool(self.decoding and c and r.prompt > c)))

    def _prefill_some(self) -> None:
        e = self.eng
        budget = (e.interleave_chunk or e.prefill_budget) if self.decoding else e.prefill_budget
        while budget > 0:
            job = next((j for j in self.prefilling if not j[1]), None)
            if job is None:
                return
            r = job[0]
            take = min(r.left, e.prefill_chunk) if e.prefill_chunk else r.left
            first = r.left == r.prompt
            self.t += self.model.step_s(0, 0, take, int(first)) - self.step_ms / 1e3
            r.left -= take
            budget -= take
            if r.left == 0:
                self.prefilling.remove(job)
                self._first_token(r)

    def _step(self) -> None:
        e, model = self.eng, self.model
        fused = next((j for j in self.prefilling if j[1]), None)
        piece, first = 0, 0
        if fused is not None:
            r = fused[0]
            backlog = sum(j[0].left for j in self.prefilling)
            long = backlog >= e.catch_up and r.left >= e.interleave_long
            piece = min(r.left, e.interleave_long if long else e.interleave_chunk)
            first = int(r.left == r.prompt)
        top = max((self.slot[r.i] for r in self.decoding), default=0) + 1
        b = next(x for x in self.buckets if x >= top)      # slots [0, B) run, active or not
        self.t += model.step_s(b, mean_context(self.decoding), piece, first)
        for r in list(self.decoding):
            r.gen += 1
            if r.gen >= r.out:
                self.decoding.remove(r)
                self._end(r)
        if fused is not None:
            fused[0].left -= piece
            if fused[0].left == 0:
                self.prefilling.remove(fused)
                self._first_token(fused[0])

    def _first_token(self, r) -> None:
        r.gen, r.first = 1, self.t
        if r.gen >= r.out:
            self._end(r)
        else:
            self.decoding.append(r)

    def _end(self, r) -> None:
        heapq.heappush(self.free, self.slot.pop(r.i))
        self.clients.ended(r, self.t)
        self.done += 1
