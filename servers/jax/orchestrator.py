"""The orchestrator: one engine thread that turns submitted requests into streamed tokens.

The HTTP layer never touches the engine; it calls ``submit`` / ``cancel`` / ``stats`` (all
thread-safe, non-blocking) and receives tokens through each request's ``on_token`` callback, which
runs on the engine thread (hand results back to the event loop with
``loop.call_soon_threadsafe``; never block inside the callback).

Loop, one iteration (the thread sleeps on a condition variable while there is nothing to do)::

    cancels ──► free those slots, on_token(None, "abort")
    waiting queue ──(free slot)──► engine.start_prefill ──(prefill token budget per iteration:
        whole short prompts, or one chunk of a long one)──► first token ─► engine.insert
      (admitted while streams decode and longer than interleave_chunk: a fused job, whose
       pieces ride in the decode steps below: engine.generate_with(job), one weight read)
    embeddings queue ──► engine.embed_step: ONE input (or one prefill_chunk of a long one) per
      iteration, between two decode steps like a prefill piece; on_done(vectors) when all are in
    active slots ──► engine.generate()  (ONE batched decode step, one device→host copy)
                 ──► on_token(tok, None) per slot ──► finished? on_token(last|None, reason); engine.free

Callback contract (exactly one call carries a finish_reason, and it is the last):
  * ``on_token(tok, None)`` for every generated token but the last;
  * ``on_token(tok, "length")`` for the last token when ``max_tokens`` (or the context) is reached;
  * ``on_token(None, "stop")`` when the model emits EOS (the EOS id itself is not delivered;
    with ``ignore_eos`` it is delivered like any other token);
  * ``on_token(None, "abort")`` after ``cancel`` or ``stop()``.
A callback that raises is treated as a disconnect: the request is aborted, the loop goes on.
The request types and the refusals (GenRequest, SamplingParams, EmbedRequest, QueueFull,
RequestTooLong): servers/jax/requests.py.
"""
from __future__ import annotations

import collections
import heapq
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Optional

from servers.jax.requests import EmbedRequest, GenRequest, QueueFull, RequestTooLong

log = logging.getLogger(__name__)


@dataclass
class _Running:
    req: GenRequest
    slot: int
    n_generated: int = 0
    job: Any = None                   # engine PrefillJob while the prompt is being prefilled


class Orchestrator:
    """Runs ``engine`` (servers.jax.engine.Engine) on its own thread with continuous batching.

    ``prefill_budget`` caps the prompt tokens prefilled between two decode steps (at least one
    request is always admitted), so a burst of arrivals does not stall running streams for long.
    A prompt admitted while streams decode rides in the steps in ``engine.interleave_chunk``
    pieces, ``engine.interleave_long`` ones while ``catch_up_tokens`` or more wait to be prefilled.
    """

    def __init__(self, engine: Any, max_queue: int = 256, prefill_budget: int = 512,
                 catch_up_tokens: Optional[int] = None) -> None:
        self.engine = engine
        self.max_queue = int(max_queue)
        self.prefill_budget = int(prefill_budget)
        # prompt tokens still to prefill from which fused pieces grow to engine.interleave_long
        # (TTFT would otherwise run away under a long-prompt backlog); default 4 long pieces
        self.catch_up_tokens = int(catch_up_tokens if catch_up_tokens is not None
                                   else 4 * (getattr(engine, "interleave_long", 0) or 64))
        self._cv = threading.Condition()
        self._waiting: collections.deque[GenRequest] = collections.deque()
        self._embeds: collections.deque[EmbedRequest] = collections.deque()
        self._cancels: set[str] = set()
        self._resets: list = []                          # reset_prefix_cache waiters
        self._running: dict[int, _Running] = {}          # slot -> request (prefilling or decoding)
        self._prefilling: list[_Running] = []            # FIFO of those still prefilling
        self._free: list[int] = list(range(engine.slots))          # min-heap: lowest slot first
        self._stop = False
        self._thread: Optional[threading.Thread] = None
        self._seed_counter = 0
        # totals reported by stats(); every key exists from the start so stats() can copy safely
        self._counters: dict[str, int] = dict.fromkeys(
            ("prefill_tokens_total", "generated_tokens_total", "decode_steps_total",
             "decode_slot_steps_total", "finished_stop", "finished_length", "finished_abort",
             "embed_requests_total", "embed_inputs_total", "embed_tokens_total"), 0)
        self.error: Optional[BaseException] = None        # set if the loop died

    # ---- public, thread-safe API -------------------------------------------------------------
    @property
    def slots(self) -> int:
        return int(self.engine.slots)

    @property
    def max_model_len(self) -> int:
        return int(self.engine.max_model_len)

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._loop, name="jax-engine", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        """Abort everything pending or running and join the thread."""
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def submit(self, req: GenRequest) -> None:
        """Queue ``req``; raises QueueFull (queue at max_queue) or RequestTooLong; never blocks."""
        if len(req.prompt_ids) == 0:
            raise RequestTooLong("prompt_ids is empty")
        if len(req.prompt_ids) >= self.max_model_len:
            raise RequestTooLong(f"prompt has {len(req.prompt_ids)} tokens; max_model_len is "
                                 f"{self.max_model_len} (prompt + at least 1 generated token)")
        if req.params.max_tokens < 1:
            raise ValueError("max_tokens must be >= 1")
        with self._cv:
            if self._stop:
                raise RuntimeError("orchestrator is stopped")
            if len(self._waiting) >= self.max_queue:
                raise QueueFull(f"waiting queue is full ({self.max_queue} requests)")
            if req.params.seed is None:
                self._seed_counter += 1
                req.params.seed = (time.perf_counter_ns() ^ (self._seed_counter << 20)) & 0x7FFFFFFF
            self._waiting.append(req)
            self._cv.notify_all()

    def submit_embed(self, req: EmbedRequest) -> None:
        """Queue an embeddings request; raises QueueFull or RequestTooLong; never blocks. The
        waiting queue's bound counts generation and embeddings requests together."""
        if not req.inputs:
            raise RequestTooLong("no input")
        for i, ids in enumerate(req.inputs):
            if not 0 < len(ids) <= self.max_model_len:
                raise RequestTooLong(f"input {i} has {len(ids)} tokens; it must have 1 to "
                                     f"max_model_len={self.max_model_len}")
        with self._cv:
            if self._stop:
                raise RuntimeError("orchestrator is stopped")
            if len(self._waiting) + len(self._embeds) >= self.max_queue:
                raise QueueFull(f"waiting queue is full ({self.max_queue} requests)")
            self._embeds.append(req)
            self._cv.notify_all()

    def cancel(self, request_id: str) -> None:
        """Abort a waiting or running request at the next step (on_token(None, "abort"))."""
        with self._cv:
            self._cancels.add(request_id)
            self._cv.notify_all()

    def stats(self) -> dict:
        with self._cv:
            running = len(self._running)
            waiting = len(self._waiting) + len(self._embeds)
        used = self.engine.cache_tokens_used()
        out = {"running": running, "waiting": waiting, "slots": self.slots,
               "kv_cache_usage": used / float(self.slots * self.max_model_len)}
        out.update(self._counters)
        pc = getattr(self.engine, "prefix", None)
        if pc is not None:                     # tokens, as vLLM's prefix_cache_* counters
            out["prefix_cache_queries_total"] = pc.index.queries
            out["prefix_cache_hits_total"] = pc.index.hits
        return out

    def reset_prefix_cache(self, timeout: float = 10.0) -> Optional[int]:
        """Forget every cached block, on the engine thread between two steps (POST
        /reset_prefix_cache); the number forgotten, None when the prefix cache is off."""
        if getattr(self.engine, "prefix", None) is None:
            return None
        done = threading.Event()
        out: list[int] = []
        with self._cv:
            self._resets.append((done, out))
            self._cv.notify_all()
        if self._thread is None:               # not started (tests): nothing runs concurrently
            self._do_resets()
        done.wait(timeout)
        return out[0] if out else None

    def _do_resets(self) -> None:
        with self._cv:
            resets, self._resets = self._resets, []
        for done, out in resets:
            out.append(self.engine.prefix.reset())
            done.set()

    # ---- engine thread -----------------------------------------------------------------------
    def _deliver(self, run: _Running, tok: Optional[int], reason: Optional[str]) -> bool:
        """Call the callback; False if it raised (treated as a disconnect)."""
        try:
            run.req.on_token(tok, reason)
            if tok is not None:
                self._counters["generated_tokens_total"] += 1
            return True
        except Exception:  # noqa: BLE001 - a broken client must not kill the engine thread
            log.exception("on_token of %s raised; aborting it", run.req.request_id)
            return False

    def _finish(self, run: _Running, tok: Optional[int], reason: str) -> None:
        """Free the slot and count the finish, then deliver it: a client that has the last
        chunk sees the request gone from /metrics' running gauge and KV-cache usage."""
        if run.job is not None and run in self._prefilling:
            self._prefilling.remove(run)
            run.job = None
        if run.slot >= 0 and self._running.get(run.slot) is run:
            del self._running[run.slot]
            self.engine.free(run.slot)
            heapq.heappush(self._free, run.slot)
        self._counters[f"finished_{reason}"] += 1
        self._deliver(run, tok, reason)

    def _check(self, run: _Running, tok: int) -> Optional[tuple[Optional[int], str]]:
        """After ``tok`` was produced: None to go on, else (token to send with the finish, reason)."""
        p = run.req.params
        if not p.ignore_eos and self.engine.is_eos(tok):
            return None, "stop"
        run.n_generated += 1
        if run.n_generated >= p.max_tokens:
            return tok, "length"
        if len(run.req.prompt_ids) + run.n_generated >= self.max_model_len:
            return tok, "length"
        return None

    def _take_work(self) -> tuple[list[GenRequest], set[str]]:
        """Block until there is work; return (requests to admit, request ids to cancel)."""
        with self._cv:
            while not self._stop and not self._waiting and not self._running and not self._cancels \
                    and not self._embeds and not self._resets:
                self._cv.wait()
            cancels, self._cancels = self._cancels, set()
            dropped: list[GenRequest] = []
            dropped_embeds: list[EmbedRequest] = []
            if cancels:
                kept = collections.deque()
                for r in self._waiting:
                    (dropped if r.request_id in cancels else kept).append(r)
                self._waiting = kept
                kept_e = collections.deque()
                for e in self._embeds:
                    (dropped_embeds if e.request_id in cancels else kept_e).append(e)
                self._embeds = kept_e
            admit = []                     # reserving a slot is cheap; prefill work is budgeted
            while self._waiting and len(admit) < len(self._free):
                admit.append(self._waiting.popleft())
        for r in dropped:                                   # callbacks outside the lock
            self._finish(_Running(r, -1), None, "abort")
        for e in dropped_embeds:
            self._embedded(e, "abort")
        return admit, cancels

    def _loop(self) -> None:
        try:
            while True:
                admit, cancels = self._take_work()
                if self._stop:
                    break
                if self._resets:
                    self._do_resets()
                for slot, run in list(self._running.items()):
                    if run.req.request_id in cancels:
                        self._finish(run, None, "abort")
                for req in admit:
                    if req.request_id in cancels:
                        self._finish(_Running(req, -1), None, "abort")
                    else:
                        self._admit(req)
                self._prefill_some()
                self._embed_some()
                if self._decoding or self._next_fused() is not None:
                    self._step()
        except BaseException as e:  # noqa: BLE001 - record, abort everyone, let stats show it
            log.exception("engine loop died")
            self.error = e
        finally:
            with self._cv:
                self._stop = True
                waiting, self._waiting = list(self._waiting), collections.deque()
                embeds, self._embeds = list(self._embeds), collections.deque()
            for r in waiting:
                self._finish(_Running(r, -1), None, "abort")
            for e in embeds:
                self._embedded(e, "abort")
            for run in list(self._running.values()):
                self._finish(run, None, "abort")

    @property
    def _decoding(self) -> int:
        """Streams past their prefill (the ones a whole prefill between steps would stall)."""
        return len(self._running) - len(self._prefilling)

    def _next_fused(self) -> Optional[_Running]:
        """The oldest fused prefill (its pieces ride in the decode steps), if any."""
        return next((r for r in self._prefilling if r.job.slot is not None), None)

    def _admit(self, req: GenRequest) -> None:
        slot = heapq.heappop(self._free)       # lowest free slot keeps the decode batch small
        req.admitted_ns = time.perf_counter_ns()
        run = _Running(req, slot, job=self.engine.start_prefill(
            req.prompt_ids, req.params, slot=slot if self._decoding else None, home=slot))
        req.cached_tokens = run.job.cached     # prefix-cache hit (engine.start_prefill), else 0
        self._running[slot] = run
        self._prefilling.append(run)

    def _prefill_some(self) -> None:
        """Prefill work worth about prefill_budget tokens (at least one piece), oldest first: a
        whole short prompt or one chunk of a long one. While streams decode, the budget is one
        interleave chunk, so a decode step waits for at most one such piece. Fused jobs (admitted
        while streams decode) are not run here: their pieces ride in the decode steps."""
        budget = (self.engine.interleave_chunk or self.prefill_budget) if self._decoding \
            else self.prefill_budget
        while budget > 0:
            run = next((r for r in self._prefilling if r.job.slot is None), None)
            if run is None:
                return
            chunked = bool(run.job.offsets)
            prefix = self.engine.prefill_step(run.job)
            budget -= run.job.chunk if chunked else run.job.length
            if prefix is not None:
                self._prefilled(run, prefix)

    def _embed_some(self) -> None:
        """One input of the oldest embeddings request (one chunk of a long input): the stall a
        decode step sees is one prefill piece's, never a whole batch of inputs."""
        with self._cv:
            req = self._embeds[0] if self._embeds else None
        if req is None:
            return
        if req.job is None:
            req.job = self.engine.start_embed(req.inputs[len(req.vectors)])
        vec = self.engine.embed_step(req.job)
        if vec is None:
            return
        req.vectors.append(vec)
        req.job = None
        self._counters["embed_inputs_total"] += 1
        self._counters["embed_tokens_total"] += len(req.inputs[len(req.vectors) - 1])
        if len(req.vectors) == len(req.inputs):
            with self._cv:
                if self._embeds and self._embeds[0] is req:
                    self._embeds.popleft()
            self._counters["embed_requests_total"] += 1
            self._embedded(req, None)

    def _embedded(self, req: EmbedRequest, reason: Optional[str]) -> None:
        try:
            req.on_done(None if reason else req.vectors, reason)
        except Exception:  # noqa: BLE001 - a broken client must not kill the engine thread
            log.exception("on_done of %s raised", req.request_id)

    def _prefilled(self, run: _Running, prefix: Any) -> None:
        self._prefilling.remove(run)
        run.job = None
        self._counters["prefill_tokens_total"] += prefix.length
        self._start_decoding(run, prefix)

    def _start_decoding(self, run: _Running, prefix: Any) -> None:
        tok = int(prefix.first_token)
        done = self._check(run, tok)
        if done is not None:
            if prefix.hashes:                  # prefix cache: its blocks are kept all the same
                self.engine.insert(prefix, run.slot)
            self._finish(run, *done)
            return
        if not self._deliver(run, tok, None):
            self._finish(run, None, "abort")
            return
        self.engine.insert(prefix, run.slot)

    def _step(self) -> None:
        """One decode step (carrying the next piece of the oldest fused prefill, if any)."""
        fused = self._next_fused()
        prefix = None
        if fused is None:
            toks = self.engine.generate()                  # [slots] numpy int, one D2H copy
        else:                                              # catch-up pieces under a long backlog
            backlog = sum(r.job.length - r.job.done for r in self._prefilling)
            toks, prefix = self.engine.generate_with(fused.job, long=backlog >= self.catch_up_tokens)
        self._counters["decode_steps_total"] += 1
        self._counters["decode_slot_steps_total"] += self._decoding
        for slot, run in list(self._running.items()):
            if run.job is not None:                        # still prefilling
                continue
            tok = int(toks[slot])
            done = self._check(run, tok)
            if done is not None:
                self._finish(run, *done)
            elif not self._deliver(run, tok, None):
                self._finish(run, None, "abort")
        if prefix is not None and fused.job is not None:   # (not cancelled meanwhile)
            self._prefilled(fused, prefix)
