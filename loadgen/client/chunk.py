"""One OpenAI streaming chunk, decoded typed (msgspec): what ``sse.StreamTally`` reads, nothing more.

    data event bytes ─► msgspec.json.Decoder(Chunk) (C: only the fields below are built; the rest
    of the chunk — ids, model, logprobs, … — is skipped) ─► Chunk ─► StreamTally._tally
    a dict (tests, the generic path) ─► msgspec.convert(obj, Chunk) ─► the same Chunk

A payload that does not fit (not an object, a field of another type, invalid UTF-8 or JSON) gives
``None`` from ``decode``; the tally then parses it generically (``sse.loads``) and refuses it with
``ValueError`` if it is not an OpenAI chunk at all (``protocol``: a server fault, never the client's).
Shapes: completions ``choices[].text``; chat ``choices[].delta.{content, reasoning_content,
reasoning, tool_calls[].{index, id, function.{name, arguments}}}``; ``finish_reason``; ``usage.{prompt_tokens, completion_tokens, prompt_tokens_details.cached_tokens}``; an error
as ``{"error": …}`` or vLLM's ``{"object": "error", …}``.
"""
from __future__ import annotations

from typing import Any, Optional

import msgspec
from msgspec import UNSET

__all__ = ["Chunk", "UNSET", "decode", "from_obj"]


class FunctionDelta(msgspec.Struct):
    name: Optional[str] = None
    arguments: Optional[str] = None     # a piece of the arguments' JSON text


class ToolCallDelta(msgspec.Struct):
    """One streamed piece of a tool call (OpenAI: the first carries id and name, the rest pieces
    of the arguments, all with the call's ``index``)."""
    index: Optional[int] = None
    id: Optional[str] = None
    function: Optional[FunctionDelta] = None


class Delta(msgspec.Struct):
    content: Optional[str] = None
    reasoning_content: Optional[str] = None
    reasoning: Optional[str] = None
    tool_calls: Optional[list[ToolCallDelta]] = None   # absent in a content chunk: no cost there


class Choice(msgspec.Struct):
    text: Optional[str] = None
    delta: Optional[Delta] = None
    finish_reason: Optional[str] = None


class PromptTokensDetails(msgspec.Struct):
    cached_tokens: Any = None          # checked at finish (request._usage_checked), not here


class Usage(msgspec.Struct):
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    # only the usage chunk carries it (vLLM --enable-prompt-tokens-details, OpenAI): a content
    # chunk has no usage, so this costs nothing per token; null (vLLM without the flag) is None
    prompt_tokens_details: Optional[PromptTokensDetails] = None


class Chunk(msgspec.Struct):
    choices: Optional[list[Choice]] = None
    usage: Optional[Usage] = None
    error: Any = UNSET                 # present (even null) = an error chunk, as ``"error" in obj``
    object: Optional[str] = None


_decode = msgspec.json.Decoder(Chunk).decode


def decode(data: bytes) -> Optional[Chunk]:
    """The typed chunk, or None when the payload does not fit (the generic path decides)."""
    try:
        return _decode(data)
    except msgspec.DecodeError:         # ValidationError is one too
        return None


def from_obj(obj: Any) -> Chunk:
    """A parsed JSON value as a Chunk; ``ValueError`` when it is not an OpenAI chunk."""
    if obj.__class__ is not dict:
        raise ValueError("chunk is not a JSON object")
    try:
        return msgspec.convert(obj, Chunk, strict=False)
    except msgspec.ValidationError as e:
        raise ValueError(f"chunk is not an OpenAI stream chunk ({e})") from None
