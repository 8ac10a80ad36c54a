"""Structured answers: a streamed tool call or a JSON text, on the same deadlines as content.

    calib {"answer": "tool_call" | "json", "json": TEXT, "tool_name": N}
        tool_call  chunk 0: delta.tool_calls [{index 0, id, type function, function {name N,
                   arguments ""}}]; chunks 1..m: {index 0, function {arguments: piece}} — TEXT
                   split into m = min(tokens − 1, len(TEXT)) pieces; finish_reason "tool_calls"
        json       delta.content pieces of TEXT: m = min(tokens, len(TEXT)); finish_reason "stop"
        non-streamed: one message (tool_calls with the whole arguments, or content TEXT)

TEXT is sent as given (default ``{}``): valid or not against the request's schema, JSON or not
— the client's checks are what is under test. N defaults to the body's named tool_choice, else
its first tool, else ``calib_tool``. Each chunk is logged as ``tokens_per_chunk`` tokens, and
usage counts them so (the answer has ``len(events) × k`` tokens).
"""
from __future__ import annotations

from typing import Any, Optional

from servers.calib.chunks import MODEL, event

ANSWERS = ("tool_call", "json", "solve", "solve_wrong")    # solve*: servers/calib/solve.py


def tool_name(c: dict, body: dict) -> str:
    if c.get("tool_name"):
        return str(c["tool_name"])
    choice = body.get("tool_choice")
    if isinstance(choice, dict) and isinstance(choice.get("function"), dict):
        return str(choice["function"].get("name") or "calib_tool")
    for t in body.get("tools") or ():
        if isinstance(t, dict) and isinstance(t.get("function"), dict) and t["function"].get("name"):
            return str(t["function"]["name"])
    return "calib_tool"


def split(text: str, m: int) -> list[str]:
    """``text`` in ``m`` pieces of near-equal length (none empty when len(text) >= m)."""
    m = max(1, min(m, len(text))) if text else 0
    return [text[i * len(text) // m:(i + 1) * len(text) // m] for i in range(m)]


def _chunk(delta: dict, finish: Optional[str]) -> bytes:
    return event({"id": "chatcmpl-calib", "object": "chat.completion.chunk", "created": 1700000000,
                  "model": MODEL, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                               "finish_reason": finish}]})


def events(c: dict, body: dict, n_chunks: int, seq: int) -> list[bytes]:
    """The streamed answer's data events (role chunk, usage and [DONE] are the handler's)."""
    text = str(c.get("json", "{}"))
    if c["answer"] == "json":
        parts = split(text, n_chunks) or [""]
        return [_chunk({"content": p}, "stop" if i == len(parts) - 1 else None)
                for i, p in enumerate(parts)]
    parts = split(text, n_chunks - 1)
    head = {"index": 0, "id": f"call-calib-{seq}", "type": "function",
            "function": {"name": tool_name(c, body), "arguments": ""}}
    out = [_chunk({"tool_calls": [head]}, None if parts else "tool_calls")]
    out += [_chunk({"tool_calls": [{"index": 0, "function": {"arguments": p}}]},
                   "tool_calls" if i == len(parts) - 1 else None) for i, p in enumerate(parts)]
    return out


def message(c: dict, body: dict, seq: int) -> tuple[dict, str]:
    """The non-streamed answer's message and finish_reason."""
    text = str(c.get("json", "{}"))
    if c["answer"] == "json":
        return {"role": "assistant", "content": text}, "stop"
    call = {"id": f"call-calib-{seq}", "type": "function",
            "function": {"name": tool_name(c, body), "arguments": text}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls"


def check(c: dict, chat: bool) -> Optional[str]:
    """Why this request cannot have the asked-for answer, or None."""
    a: Any = c.get("answer")
    if a is None:
        return None
    if a not in ANSWERS:
        return f"calib answer: expected one of {', '.join(ANSWERS)}, got {a!r}"
    if not chat and a in ("tool_call", "json"):
        return "calib answer: tool calls and JSON answers are chat answers (/v1/chat/completions)"
    return None
