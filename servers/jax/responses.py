"""POST /v1/responses of the JAX server: the OpenAI Responses API over the chat path's generation.

    body ─► ResponsesBody (input: a text or a list of messages; instructions; max_output_tokens)
         ─► the same chat messages ─► protocol.build_plan("chat") (one template, one set of checks)
         ─► generation.Generation (api.py starts it) ─► Pieces
         ─► stream: named SSE events, ``event: <type>`` + ``data: {..., "sequence_number": n}``:
              response.created, response.in_progress, response.output_item.added,
              response.content_part.added, response.output_text.delta (one per piece with text,
              i.e. per token), response.output_text.done, response.content_part.done,
              response.output_item.done, then response.completed (status "completed"),
              response.incomplete (finish "length": incomplete_details.reason "max_output_tokens")
              or response.failed (aborted at shutdown); no ``data: [DONE]`` (OpenAI sends none)
         ─► not streamed: one ``object: "response"`` body (output[0].content[0].text, usage)

Usage is the Responses shape: input_tokens, output_tokens (+ _details: cached_tokens (the prefix
cache's, 0 when it is off),
reasoning_tokens 0: this server streams no reasoning), total_tokens. ``store`` and other OpenAI
fields the server does not act on are accepted and ignored (as unknown chat fields are); input
items other than messages and content parts other than text are a 400 naming the item.
Pure but for ``stream``/``collect``, which write the aiohttp answer; never imports api.py.
"""
from __future__ import annotations

import json
import logging
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from servers.jax.protocol import ApiError, Plan, build_plan

log = logging.getLogger(__name__)

_TEXT_PARTS = ("input_text", "output_text", "text")
_ROLES = ("system", "developer", "user", "assistant")


class ResponsesBody(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)
    model: str | None = None
    input: str | list[Any]
    instructions: str | None = None
    max_output_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None             # vLLM extension
    stop: str | list[str] | None = None  # vLLM extension
    stream: bool = False
    ignore_eos: bool = False            # vLLM extension (ResponsesRequest.ignore_eos)
    min_tokens: int = 0


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


def _messages(inp: Any, instructions: str | None) -> list[dict]:
    """The Responses ``input`` (+ ``instructions`` as a system message first) as chat messages."""
    out: list[dict] = [{"role": "system", "content": instructions}] if instructions else []
    if isinstance(inp, str):
        return out + [{"role": "user", "content": inp}]
    if not inp:
        raise ApiError(400, "input: must be a text or a non-empty list of messages", param="input")
    for i, item in enumerate(inp):
        where = f"input[{i}]"
        if not isinstance(item, dict):
            raise ApiError(400, f"{where}: expected a message object", param=where)
        if item.get("type", "message") != "message":
            raise ApiError(400, f"{where}.type: {item.get('type')!r} items are not supported by this "
                           "server (messages only)", param=f"{where}.type")
        role, content = item.get("role"), item.get("content")
        if role not in _ROLES:
            raise ApiError(400, f"{where}.role: expected one of {', '.join(_ROLES)}, got {role!r}",
                           param=f"{where}.role")
        if isinstance(content, list):
            parts = []
            for j, p in enumerate(content):
                if not isinstance(p, dict) or p.get("type") not in _TEXT_PARTS \
                        or not isinstance(p.get("text"), str):
                    kind = p.get("type") if isinstance(p, dict) else type(p).__name__
                    raise ApiError(400, f"{where}.content[{j}]: {kind!r} parts are not supported by "
                                   "this server (text only)", param=f"{where}.content")
                parts.append(p["text"])
            content = "".join(parts)
        elif not isinstance(content, str):
            raise ApiError(400, f"{where}.content: expected a text or a list of text parts",
                           param=f"{where}.content")
        out.append({"role": role, "content": content})
    return out


_RENAMED = (("messages", "input"), ("max_tokens", "max_output_tokens"))


def build_responses_plan(body: Any, tokenizer: Any, model_name: str, max_model_len: int) -> tuple[Plan, dict]:
    """A validated Plan (kind "chat") and the request fields echoed in the response object."""
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    try:
        req = ResponsesBody.model_validate(body)
    except ValidationError as e:
        first = e.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()) if str(p) not in ("str", "list[any]"))
        raise ApiError(400, f"{loc or 'body'}: {first.get('msg', 'invalid value')}", param=loc or None) from None
    chat = {"model": req.model, "messages": _messages(req.input, req.instructions),
            "max_tokens": req.max_output_tokens, "temperature": req.temperature, "top_p": req.top_p,
            "seed": req.seed, "stop": req.stop, "stream": req.stream, "ignore_eos": req.ignore_eos,
            "min_tokens": req.min_tokens}
    try:
        plan = build_plan("chat", {k: v for k, v in chat.items() if v is not None}, tokenizer, model_name,
                          max_model_len)
    except ApiError as e:                     # name the Responses fields, not the chat ones
        for old, new in _RENAMED:
            if e.param == old:
                e.param = new
            if e.message.startswith(old + ":"):
                e.message = new + e.message[len(old):]
        raise
    meta = {"instructions": req.instructions, "max_output_tokens": req.max_output_tokens,
            "temperature": plan.temperature, "top_p": plan.top_p}
    return plan, meta


def usage(prompt: int, completion: int, cached: int | None = None) -> dict:
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached or 0},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion}


def status_of(finish: str | None) -> tuple[str, dict | None, dict | None]:
    """(status, incomplete_details, error) of a finished generation."""
    if finish == "length":
        return "incomplete", {"reason": "max_output_tokens"}, None
    if finish in ("stop", "eos", None):
        return "completed", None, None
    return "failed", None, {"code": "server_error", "message": f"generation ended: {finish} "
                            "(the server is shutting down)"}


class ResponseObject:
    """The ``object: "response"`` of one request, as each event and the final body show it."""

    def __init__(self, rid: str, plan: Plan, meta: dict) -> None:
        self.rid, self.plan, self.meta = rid, plan, meta
        self.msg_id = "msg_" + rid[len("resp_"):]
        self.created = int(time.time())

    def message(self, text: str, done: bool) -> dict:
        content = [{"type": "output_text", "text": text, "annotations": [], "logprobs": []}] if done else []
        return {"id": self.msg_id, "type": "message", "role": "assistant",
                "status": "completed" if done else "in_progress", "content": content}

    def body(self, status: str, output: list, use: dict | None = None, incomplete: dict | None = None,
             error: dict | None = None) -> dict:
        m = self.meta
        return {"id": self.rid, "object": "response", "created_at": self.created, "status": status,
                "error": error, "incomplete_details": incomplete, "instructions": m["instructions"],
                "max_output_tokens": m["max_output_tokens"], "model": self.plan.model, "output": output,
                "parallel_tool_calls": False, "temperature": m["temperature"], "top_p": m["top_p"],
                "tool_choice": "none", "tools": [], "text": {"format": {"type": "text"}},
                "truncation": "disabled", "store": False, "metadata": {}, "usage": use}

    def final(self, text: str, finish: str | None, prompt: int, completion: int,
              cached: int | None = None) -> tuple[str, dict]:
        """(terminal event type, the finished response object)."""
        status, incomplete, error = status_of(finish)
        out = [self.message(text, True)] if status != "failed" else []
        body = self.body(status, out, usage(prompt, completion, cached), incomplete, error)
        return f"response.{status}", body


def sse(seq: int, kind: str, fields: dict) -> bytes:
    """One named event: ``event: <type>`` and its data (type and sequence_number included)."""
    data = {"type": kind, "sequence_number": seq, **fields}
    return b"event: " + kind.encode() + b"\ndata: " + _dumps(data).encode() + b"\n\n"


async def collect(gen: Any, obj: ResponseObject) -> dict:
    texts = [p.text async for p in gen.pieces()]
    _, body = obj.final("".join(texts), gen.finish_reason, gen.prompt_tokens, gen.completion_tokens,
                        gen.cached_tokens)
    return body


async def stream(resp: Any, gen: Any, obj: ResponseObject) -> None:
    """Write every event of one streamed response to ``resp`` (a prepared aiohttp StreamResponse)."""
    seq = 0

    async def send(kind: str, fields: dict) -> None:
        nonlocal seq
        await resp.write(sse(seq, kind, fields))
        seq += 1

    where = {"item_id": obj.msg_id, "output_index": 0}
    part = {**where, "content_index": 0}
    try:
        await send("response.created", {"response": obj.body("in_progress", [])})
        await send("response.in_progress", {"response": obj.body("in_progress", [])})
        await send("response.output_item.added", {"output_index": 0, "item": obj.message("", False)})
        await send("response.content_part.added", {**part, "part": {"type": "output_text", "text": "",
                                                                    "annotations": [], "logprobs": []}})
        texts: list[str] = []
        async for piece in gen.pieces():
            if piece.text:
                texts.append(piece.text)
                await send("response.output_text.delta", {**part, "delta": piece.text, "logprobs": []})
        text = "".join(texts)
        kind, final = obj.final(text, gen.finish_reason, gen.prompt_tokens, gen.completion_tokens,
                                gen.cached_tokens)
        if kind != "response.failed":
            done_part = {"type": "output_text", "text": text, "annotations": [], "logprobs": []}
            await send("response.output_text.done", {**part, "text": text, "logprobs": []})
            await send("response.content_part.done", {**part, "part": done_part})
            await send("response.output_item.done", {"output_index": 0, "item": obj.message(text, True)})
        await send(kind, {"response": final})
        await resp.write_eof()
    except ConnectionError:  # the client went away; the handler's finally cancels the request
        log.debug("client of %s disconnected mid-stream", obj.rid)
