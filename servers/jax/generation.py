"""One request's life on the HTTP side: engine-thread token events ─► text pieces on the event loop.

    handler ─► Generation.submit() ─► orchestrator.submit(GenRequest(on_token=self._on_token))
    engine thread: _on_token(tok, reason) ─► stamp perf_counter_ns ─► loop.call_soon_threadsafe(queue.put)
    handler: async for piece in gen.pieces() ─► Piece(text delta, n_tokens, finish_reason, t_ns)

Per generated token one Piece (so chunk timing = token timing). Text is detokenized incrementally (a
prefix/read window, and a trailing U+FFFD held back until the byte sequence completes). Stop strings
are matched on the detokenized text: output is cut before the stop string, finish_reason is "stop", and
the engine slot is cancelled. Text that could still become the start of a stop string is held back (only
that much), so a client never sees text that is later retracted. If the client goes away, close()
cancels the request so its slot frees.
"""
from __future__ import annotations

import asyncio
import dataclasses
import time
from dataclasses import dataclass
from typing import Any, AsyncIterator

from servers.jax.metrics import RequestTiming, ServerMetrics
from servers.jax.requests import GenRequest, SamplingParams
from servers.jax.protocol import Plan

_ENGINE_HAS_MIN_TOKENS = "min_tokens" in {f.name for f in dataclasses.fields(SamplingParams)}


@dataclass
class Piece:
    text: str
    n_tokens: int  # tokens this piece accounts for (0 or 1)
    finish_reason: str | None
    t_ns: int


class IncrementalDetokenizer:
    """Turns a growing token list into text deltas without re-decoding the whole sequence."""

    def __init__(self, tokenizer: Any) -> None:
        self.tok = tokenizer
        self.ids: list[int] = []
        self._prefix = 0  # start of the decode window
        self._read = 0  # end of the part already turned into text

    def push(self, token_id: int) -> str:
        self.ids.append(token_id)
        before = self.tok.decode(self.ids[self._prefix:self._read])
        after = self.tok.decode(self.ids[self._prefix:])
        if len(after) > len(before) and not after.endswith("\ufffd"):
            self._prefix, self._read = self._read, len(self.ids)
            return after[len(before):]
        return ""


def _held_prefix_len(text: str, stops: list[str]) -> int:
    """Length of the longest suffix of text that is a proper prefix of some stop string."""
    best = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), best, -1):
            if text.endswith(s[:k]):
                best = k
                break
    return best


class Generation:
    """Bridges one Plan to the orchestrator and yields Pieces; never blocks the event loop."""

    def __init__(self, orchestrator: Any, tokenizer: Any, plan: Plan, request_id: str,
                 metrics: ServerMetrics, arrival_ns: int) -> None:
        self.orch, self.plan, self.request_id, self.metrics = orchestrator, plan, request_id, metrics
        self.timing = RequestTiming(arrival_ns=arrival_ns)
        self.prompt_tokens = len(plan.prompt_ids)
        self.completion_tokens = 0
        self.finish_reason: str | None = None
        self._loop = asyncio.get_running_loop()
        self._queue: asyncio.Queue[tuple[int | None, str | None, int]] = asyncio.Queue()
        self._detok = IncrementalDetokenizer(tokenizer)
        self._eos = getattr(tokenizer, "eos_id", None)
        # min_tokens: passed to the engine if it supports it, else emulated here (EOS let through, then
        # an EOS after min_tokens ends the request with "stop")
        self._emulate_min = plan.min_tokens > 0 and not plan.ignore_eos and not _ENGINE_HAS_MIN_TOKENS \
            and self._eos is not None
        self._text = ""  # all text decoded so far (stop-truncated at the end)
        self._sent = 0  # chars of _text already handed out
        self._req: GenRequest | None = None

    @property
    def cached_tokens(self) -> int | None:
        """Prompt tokens the prefix cache served (set at admission, before the first token); None
        when the engine has no prefix cache (the answer then says nothing about it)."""
        if self._req is None or getattr(getattr(self.orch, "engine", None), "prefix", None) is None:
            return None
        return self._req.cached_tokens

    # ---- engine thread -------------------------------------------------------------------------------------
    def _on_token(self, token_id: int | None, reason: str | None) -> None:
        t = time.perf_counter_ns()
        if self.timing.scheduled_ns is None and self._req is not None:
            self.timing.scheduled_ns = getattr(self._req, "admitted_ns", None)
        self._loop.call_soon_threadsafe(self._queue.put_nowait, (token_id, reason, t))

    # ---- event loop ----------------------------------------------------------------------------------------
    def submit(self) -> None:
        """Queue on the engine; QueueFull / RequestTooLong / RuntimeError propagate to the handler."""
        p = self.plan
        kw: dict[str, Any] = dict(max_tokens=p.max_tokens, temperature=p.temperature, top_p=p.top_p,
                                  seed=p.seed, ignore_eos=p.ignore_eos or self._emulate_min)
        if _ENGINE_HAS_MIN_TOKENS:
            kw["min_tokens"] = p.min_tokens
        self._req = GenRequest(request_id=self.request_id, prompt_ids=list(p.prompt_ids),
                               params=SamplingParams(**kw), on_token=self._on_token)
        self.orch.submit(self._req)

    def _finish(self, reason: str, t_ns: int, cancel: bool) -> None:
        self.finish_reason = reason
        if cancel:
            self.orch.cancel(self.request_id)
        self.metrics.on_finish(self.timing, reason, t_ns)

    def _take_text(self, final: bool) -> str:
        end = len(self._text) if final else len(self._text) - _held_prefix_len(self._text[self._sent:],
                                                                                 self.plan.stop)
        out, self._sent = self._text[self._sent:end], max(self._sent, end)
        return out

    def _on_engine_token(self, tok: int, t: int) -> tuple[str | None, int]:
        """Account one delivered token; return (finish reason if the HTTP side ends it, tokens counted)."""
        if self._emulate_min and tok == self._eos:
            if self.completion_tokens >= self.plan.min_tokens:
                return "stop", 0  # the EOS itself is not an output token (as in the engine)
            self.completion_tokens += 1  # an EOS before min_tokens: generated, counted, not shown
            self.metrics.on_token(self.timing, t, self.prompt_tokens)
            return None, 1
        self.completion_tokens += 1
        self.metrics.on_token(self.timing, t, self.prompt_tokens)
        start = self._sent
        self._text += self._detok.push(tok)
        if self.plan.stop and self.completion_tokens >= self.plan.min_tokens:
            hits = [i for i in (self._text.find(s, start) for s in self.plan.stop) if i >= 0]
            if hits:
                self._text = self._text[:min(hits)]
                return "stop", 1
        return None, 1

    async def pieces(self) -> AsyncIterator[Piece]:
        """One Piece per generated token; the last one carries finish_reason."""
        while self.finish_reason is None:
            tok, reason, t = await self._queue.get()
            http_reason, counted = self._on_engine_token(tok, t) if tok is not None else (None, 0)
            if http_reason is not None and reason is None:
                self._finish(http_reason, t, cancel=True)
            elif reason is not None:
                self._finish(http_reason or reason, t, cancel=False)
            done = self.finish_reason is not None
            yield Piece(self._take_text(final=done), counted, self.finish_reason, t)

    def abort(self) -> None:
        """Server shutdown: end the stream now with finish_reason "abort", even if the engine is gone."""
        if self.finish_reason is None and self._req is not None:
            self.orch.cancel(self.request_id)
            self._queue.put_nowait((None, "abort", time.perf_counter_ns()))

    def close(self) -> None:
        """The handler is leaving (finished, client gone, or shutdown): cancel if still running."""
        if self.finish_reason is None and self._req is not None:
            self._finish("abort", time.perf_counter_ns(), cancel=True)
