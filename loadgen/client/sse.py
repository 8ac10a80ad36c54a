"""OpenAI streaming chunks, counted (the SSE parser itself: sse_parser.py, re-exported here).

    socket reads (bytes, any split) ─► SSEParser.feed() ─► events ─► loads() ─► StreamTally.add()
                                                                          └─► tokens in this chunk

Nothing here does I/O, so every rule is unit-testable byte by byte. ``loads`` parses every event
fully (the stdlib C scanner without ``json.loads``' wrapper; ``json.loads`` itself whenever the fast
call does not consume the whole payload), so a malformed chunk is always caught.

``StreamTally.add(obj)`` returns the number of output tokens one chunk carries: a chunk with
content (completions ``text``, chat ``delta.content``, ``delta.reasoning_content``/``reasoning``,
``delta.tool_calls``) is 1 token, unless the chunk carries vLLM continuous usage stats
(``usage.completion_tokens`` cumulative, asked for with ``StreamTally(continuous=True)``), then the
increase since the previous chunk (at least 1 for a chunk with content). With continuous usage a
chunk WITHOUT text whose running count rose carries that many tokens too: vLLM streams special
tokens as ``"content": ""`` and still counts them, so no token is lost and the chunks sum to usage.
Role-only, empty and usage-only chunks are 0 (empty ones: unless continuous usage rose), an error
chunk -1. It also keeps the last usage, finish_reason,
output characters and an error object (``{"error": ...}`` or ``{"object": "error"}``).

Reasoning and answer, told apart per chunk (``add`` is called once per ``Record.chunks`` entry, in
order, so ``seen`` is that list's length): a chunk whose only output is ``delta.reasoning_content``
or ``delta.reasoning`` is a REASONING chunk (its tokens summed into ``reasoning_tokens``, None
until one arrives); a chunk with ``text``, ``delta.content`` or ``delta.tool_calls`` is an ANSWER
chunk (``first_answer``: the index of the first one). ``StreamTally(want_text=True)`` also keeps
the answer's text pieces (``text``; reasoning excluded). The Locust engine and the wire transport
call ``add`` after the reads (off the stamping path); the aiohttp client calls it per read.

Tool calls: every ``delta.tool_calls`` piece is gathered into ``calls`` (None until the first
one): one ``[id, name, [argument pieces]]`` per call, keyed by the piece's ``index`` (a new ``id``
at an index already used opens a new call: servers that number every call 0). A chunk with tool
calls is an answer chunk of 1 token, as content is (so the first tool-call piece is the first
token). Nothing is joined or parsed here: ``loadgen.client.structured`` checks the final call
after the stream. ``check`` (a ``structured.Checker``) travels with the tally to that step; when
it checks the answer's JSON the text pieces are kept too (``text``), and ``want_text`` alone
decides whether the record keeps them (``output_text``). A delta with content is read for its
content only (servers send tool calls in deltas of their own): the content path pays nothing.
"""
from __future__ import annotations

import json
from typing import Any, Optional

from loadgen.client.chunk import UNSET
from loadgen.client.kept import CALL_COST, Budget, KeptText
from loadgen.client.chunk import decode as _decode_chunk
from loadgen.client.chunk import from_obj as _chunk_of
from loadgen.client.sse_parser import (DONE, IGNORED_EVENTS, MAX_EVENT_BYTES, Event,  # noqa: F401
                                       Malformed, NamedEvent, SSEParser, TooLarge, loads)


def _other_output(delta: Any, tally: "StreamTally") -> tuple[int, int]:
    """(kind, characters) of a chat delta (``chunk.Delta``) without ``content``: kind 2 =
    reasoning only (``reasoning_content`` / ``reasoning``), 1 = tool calls (an answer, gathered
    into ``tally.calls``), 0 = none."""
    n = 0
    reasoning = False
    for v in (delta.reasoning_content, delta.reasoning):
        if v:
            reasoning = True
            n += len(v)
    if delta.tool_calls:
        tally.add_tool_calls(delta.tool_calls)
        return 1, n
    return (2 if reasoning else 0), n


class StreamTally:
    """Counts the tokens of one stream's chunks and keeps what the last chunks said."""

    __slots__ = ("continuous", "cum", "prompt_tokens", "completion_tokens", "finish_reason",
                 "chars", "error", "seen", "first_answer", "reasoning_tokens", "text", "want_text",
                 "calls", "_slot", "check", "expected", "cached_tokens", "kept", "calls_over")

    def __init__(self, continuous: bool = False, want_text: bool = False,
                 check: Optional[Any] = None, expected: Optional[Any] = None) -> None:
        # continuous: the request asked for continuous usage stats; it is dropped (1 token per
        # content chunk from then on) as soon as a content chunk arrives without usage
        self.continuous = continuous
        self.cum = 0                                  # last cumulative completion_tokens seen
        self.prompt_tokens: Optional[int] = None      # from the last usage object
        self.completion_tokens: Optional[int] = None
        self.cached_tokens: Any = None                # usage.prompt_tokens_details.cached_tokens
        self.finish_reason: Optional[str] = None
        self.chars = 0
        self.error: Optional[Any] = None              # the error object of an error chunk
        self.seen = 0                                 # chunks added (Record.chunks entries)
        self.first_answer: Optional[int] = None       # index of the first answer chunk
        self.reasoning_tokens: Optional[int] = None   # tokens of reasoning-only chunks
        self.want_text = want_text                    # the record keeps the text (output_text)
        self.check = check                            # structured.Checker, applied at finish
        self.expected = expected                      # workload.dataset: graded at finish
        keep = want_text or (check is not None and check.wants_text) or expected is not None
        self.kept = Budget()                          # text + tool calls kept (kept.py)
        self.text: Optional[list] = KeptText(self.kept) if keep else None   # answer text pieces
        self.calls: Optional[list] = None             # tool calls: [id, name, [argument pieces]]
        self.calls_over = 0                           # calls past the kept budget (counted)
        self._slot: dict = {}                         # a call's index -> its entry in calls

    def add_tool_calls(self, pieces: Any) -> None:
        """Gather one delta's ``tool_calls`` (``chunk.ToolCallDelta`` items, or the dicts of a
        whole answer's ``message.tool_calls``)."""
        calls = self.calls
        if calls is None:
            calls = self.calls = []
        slot = self._slot
        for p in pieces:
            if p.__class__ is dict:                   # a non-streamed answer's message
                fn = p.get("function")
                fn = fn if fn.__class__ is dict else {}
                idx, cid = p.get("index", len(calls)), p.get("id")
                name, args = fn.get("name"), fn.get("arguments")
            else:
                fn = p.function
                idx, cid = p.index, p.id
                name, args = (fn.name, fn.arguments) if fn is not None else (None, None)
            if idx is None:
                idx = 0
            entry = slot.get(idx)
            if entry is None or (cid is not None and entry[0] is not None and entry[0] != cid):
                if not self.kept.take(CALL_COST):     # past the kept budget: counted only
                    self.calls_over += 1
                    continue
                entry = slot[idx] = [cid, None, KeptText(self.kept)]
                calls.append(entry)
            if cid is not None:
                entry[0] = cid
            if name:
                entry[1] = name
            if args:
                entry[2].append(args if args.__class__ is str else json.dumps(args))

    def add_bytes(self, data: bytes) -> int:
        """``add`` for one event's payload as it came: typed decoding (``chunk.decode``, msgspec)
        when it fits, else the generic parse (``loads``); raises ValueError as ``add`` does."""
        c = _decode_chunk(data)
        if c is None:
            return self.add(loads(data))
        return self._tally(c, data)

    def add(self, obj: Any) -> int:
        """Tokens carried by one parsed chunk, -1 for an error object (kept in ``error``);
        raises ValueError if the chunk is not a JSON object or not an OpenAI chunk."""
        return self._tally(_chunk_of(obj), obj)

    def _tally(self, c: Any, whole: Any) -> int:
        i = self.seen
        self.seen = i + 1
        choices = c.choices
        if c.error is not UNSET or (choices is None and c.object == "error"):
            obj = loads(whole) if whole.__class__ is bytes else whole
            self.error = obj.get("error", obj)
            return -1
        usage = c.usage
        cum = None
        if usage is not None:
            pt = usage.prompt_tokens
            if pt is not None:
                self.prompt_tokens = pt
            cum = usage.completion_tokens
            if cum is not None:
                self.completion_tokens = cum
            details = usage.prompt_tokens_details
            if details is not None and details.cached_tokens is not None:
                self.cached_tokens = details.cached_tokens
        n = 0
        kind = 0                                      # 1: answer in this chunk, 2: reasoning only
        if choices:
            keep = self.text
            for choice in choices:
                text = choice.text
                if not text:
                    delta = choice.delta
                    if delta is not None:
                        text = delta.content
                        if not text:
                            k, chars = _other_output(delta, self)
                            if k:
                                n += 1
                                self.chars += chars
                                if k == 1 or not kind:   # an answer outranks reasoning
                                    kind = k
                if text:                              # completions text / chat content
                    n += 1
                    self.chars += len(text)
                    kind = 1
                    if keep is not None:
                        keep.append(text)
                fr = choice.finish_reason
                if fr is not None:
                    self.finish_reason = fr
        if self.continuous and choices:
            if cum is None:
                if n:
                    self.continuous = False
            else:
                # continuous usage stats: the chunk's own count is the cumulative increase,
                # also for a chunk with no text (special tokens stream as "content": "")
                d = cum - self.cum
                if n:
                    n = d if d > 1 else 1
                elif d > 0:
                    n = d
                self.cum = cum
        if kind == 1:
            if self.first_answer is None:
                self.first_answer = i
        elif kind == 2:
            self.reasoning_tokens = (self.reasoning_tokens or 0) + n
        return n


def error_message(err: Any, limit: int = 300) -> str:
    """One line from an error object of the stream (OpenAI/vLLM shapes or anything else)."""
    if isinstance(err, dict):
        msg = err.get("message") or err.get("detail") or err
        code = err.get("code") or err.get("type")
        text = f"{code}: {msg}" if code else str(msg)
    else:
        text = str(err)
    return text.replace("\n", " ")[:limit]
