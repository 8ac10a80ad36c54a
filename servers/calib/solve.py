"""Arithmetic answered right or wrong on demand: the accuracy check's known truth.

    calib {"answer": "solve"}         the LAST "A + B" / "A * B" (also x, ×) in the prompt (chat:
                                      the last message), answered with the exact number
    calib {"answer": "solve_wrong"}   the same number plus one (a wrong answer, same length mostly)
    no such expression in the prompt: the answer is "?" (wrong for any number)

One character per token, one token per chunk: an answer of n characters within max_tokens (or
``tokens``) ends with finish_reason "stop"; a longer one is cut to the first max_tokens characters
with finish_reason "length" (the cut answer). Completions and chat, streamed or not; usage counts
the characters sent. Standard library only.
"""
from __future__ import annotations

import re
from typing import Optional

from servers.calib.chunks import MODEL, event

SOLVE = ("solve", "solve_wrong")
_EXPR = re.compile(r"(-?\d+)\s*([+*x×])\s*(-?\d+)")


def _prompt(body: dict, chat: bool) -> str:
    if not chat:
        p = body.get("prompt")
        return p if isinstance(p, str) else ""
    msgs = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    if not msgs:
        return ""
    c = msgs[-1].get("content")
    if isinstance(c, list):
        return " ".join(str(p.get("text", "")) for p in c if isinstance(p, dict))
    return str(c or "")


def answer_text(body: dict, chat: bool, wrong: bool) -> str:
    """The whole answer: the last expression's value (plus one when ``wrong``), or "?"."""
    found = _EXPR.findall(_prompt(body, chat))
    if not found:
        return "?"
    a, op, b = found[-1]
    v = int(a) + int(b) if op == "+" else int(a) * int(b)
    return str(v + 1 if wrong else v)


def cut(text: str, n_tok: int) -> tuple[str, str]:
    """(what is sent, finish_reason): the whole text and "stop", or its first n_tok characters
    and "length"."""
    n = max(1, int(n_tok))
    return (text, "stop") if len(text) <= n else (text[:n], "length")


def _chunk(chat: bool, piece: str, finish: Optional[str]) -> bytes:
    if chat:
        return event({"id": "chatcmpl-calib", "object": "chat.completion.chunk",
                      "created": 1700000000, "model": MODEL,
                      "choices": [{"index": 0, "delta": {"content": piece}, "logprobs": None,
                                   "finish_reason": finish}]})
    return event({"id": "cmpl-calib", "object": "text_completion", "created": 1700000000,
                  "model": MODEL, "choices": [{"index": 0, "text": piece, "logprobs": None,
                                               "finish_reason": finish, "stop_reason": None}]})


def events(c: dict, body: dict, chat: bool, n_tok: int) -> list[bytes]:
    """The streamed answer's content events, one character each (role, usage, [DONE]: the
    handler's)."""
    text, fr = cut(answer_text(body, chat, c["answer"] == "solve_wrong"), n_tok)
    return [_chunk(chat, ch, fr if i == len(text) - 1 else None) for i, ch in enumerate(text)]


def whole(c: dict, body: dict, chat: bool, n_tok: int) -> tuple[str, str]:
    """The non-streamed answer's text and finish_reason."""
    return cut(answer_text(body, chat, c["answer"] == "solve_wrong"), n_tok)
