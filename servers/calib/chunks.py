"""The bytes of an answer: OpenAI-compatible SSE events (completions and chat), built once per shape.

    Builder(chat, tokens_per_chunk, prompt_tokens, text, model)   (model: echoed in every chunk)
        .role()      chat: the role-only first chunk
        .content()   one content (or ``reasoning_content``) chunk; identical ones come from a cache
        .usage()     the usage-only chunk (``stream_options.include_usage``)
        .full()      the whole non-streamed answer
    prompt_tag_and_tokens(body)   the log's prompt tag (first 120 characters) and a word count
"""
from __future__ import annotations

import json
import time
from typing import Optional

now_ns = time.perf_counter_ns          # the client's clock on this host (CLOCK_MONOTONIC)
MODEL = "calib-model"
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
DONE = b"data: [DONE]\n\n"
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode   # raw UTF-8, like vLLM


def event(obj: dict) -> bytes:
    return b"data: " + _dumps(obj).encode() + b"\n\n"


class Builder:
    """Chunk bytes for one request shape; identical chunks are built once and cached."""

    _cache: dict = {}

    def __init__(self, chat: bool, k: int, prompt_tokens: int, text: str = " tok", model: str = MODEL):
        self.chat, self.k, self.pt, self.model = chat, k, prompt_tokens, model
        self.text = text * k

    def _base(self) -> dict:
        if self.chat:
            return {"id": "chatcmpl-calib", "object": "chat.completion.chunk", "created": 1700000000,
                    "model": self.model, "choices": []}
        return {"id": "cmpl-calib", "object": "text_completion", "created": 1700000000,
                "model": self.model, "choices": []}

    def _usage(self, completion: int) -> dict:
        return {"prompt_tokens": self.pt, "completion_tokens": completion,
                "total_tokens": self.pt + completion}

    def content(self, finish: Optional[str], reasoning: bool = False, cum: Optional[int] = None) -> bytes:
        """A content chunk; ``cum``: the running usage (``continuous_usage_stats``), never cached."""
        key = (self.chat, self.text, finish, reasoning, self.model)
        if cum is None and key in self._cache:
            return self._cache[key]
        o = self._base()
        if self.chat:
            delta = {"reasoning_content": self.text} if reasoning else {"content": self.text}
            o["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
        else:
            o["choices"] = [{"index": 0, "text": self.text, "logprobs": None, "finish_reason": finish,
                             "stop_reason": None}]
        if cum is not None:
            o["usage"] = self._usage(cum)
            return event(o)
        b = self._cache[key] = event(o)
        return b

    def role(self, cum: Optional[int] = None) -> bytes:
        o = self._base()
        o["choices"] = [{"index": 0, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
                         "finish_reason": None}]
        if cum is not None:
            o["usage"] = self._usage(cum)
        return event(o)

    def usage(self, completion: int) -> bytes:
        o = self._base()
        o["usage"] = self._usage(completion)
        return event(o)

    def full(self, n_chunks: int, finish: str, usage_tokens: Optional[int]) -> dict:
        o = self._base()
        o["object"] = "chat.completion" if self.chat else "text_completion"
        text = self.text * n_chunks
        if self.chat:
            o["choices"] = [{"index": 0, "message": {"role": "assistant", "content": text},
                             "finish_reason": finish}]
        else:
            o["choices"] = [{"index": 0, "text": text, "finish_reason": finish}]
        if usage_tokens is not None:
            o["usage"] = self._usage(usage_tokens)
        return o


def _text(content) -> str:
    """A message's text: a string as is; content parts: their text parts (images not counted)."""
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content
                        if isinstance(p, dict) and p.get("type") == "text")
    return str(content)


def prompt_tag_and_tokens(body: dict, chat: bool) -> tuple[str, int]:
    """The log's tag for a request (its prompt's first 120 characters) and its prompt words."""
    if chat:
        msgs = body.get("messages") or []
        text = " ".join(_text(m.get("content", "")) for m in msgs if isinstance(m, dict))
        last = _text(msgs[-1].get("content", "")) if msgs and isinstance(msgs[-1], dict) else ""
        return last[:120], len(text.split())
    p = body.get("prompt", "")
    if isinstance(p, list):
        return str(p[:16])[:120], len(p)
    return str(p)[:120], len(str(p).split())
