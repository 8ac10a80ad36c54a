"""POST /v1/embeddings of the JAX server: JSON body ─► EmbedPlan ─► engine thread ─► vectors ─► JSON.

    body ─► EmbeddingsBody (pydantic; unknown fields ignored, like vLLM) ─► input as
        a string | a list of strings | a list of token ids | a list of token-id lists
        ─► token ids per input ─► length checks (1..max_model_len each) ─► EmbedPlan
    EmbedPlan ─► Embedding.submit ─► orchestrator.submit_embed(EmbedRequest(on_done=...))
        engine thread: one input per loop iteration (engine.embed_step) ─► on_done(vectors)
        ─► loop.call_soon_threadsafe ─► future ─► response_body (float list | base64)

The embedding of an input is the mean of the model's final hidden states (after its final
RMSNorm, what Hugging Face calls last_hidden_state) over the input's tokens, L2-normalised,
float32, ``dim`` values; computed by a real prefill-only forward pass (servers.jax.engine
``embed_step``). ``encoding_format`` "float" (default) gives a JSON list, "base64" the
little-endian float32 bytes in base64. ``dimensions`` other than the model's ``dim`` is refused
(400): this model has no trained truncation. Errors use protocol.ApiError (400/404).
"""
from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass
from typing import Any, Literal, Optional

import numpy as np

from servers.jax.requests import EmbedRequest
from servers.jax.protocol import ApiError, _parse, _Strict

MAX_INPUTS = 2048             # inputs per request (OpenAI's own bound)
POOLING = ("mean of the final hidden states (after the final RMSNorm) over the input's tokens, "
           "L2-normalised; float32")


class EmbeddingsBody(_Strict):
    model: Optional[str] = None
    input: Any = None
    encoding_format: Optional[Literal["float", "base64"]] = None
    dimensions: Optional[int] = None
    user: Optional[str] = None
    truncate_prompt_tokens: Optional[int] = None  # vLLM extension: refused, never silently applied


@dataclass
class EmbedPlan:
    model: str
    inputs: list[list[int]]
    encoding_format: str = "float"

    @property
    def prompt_tokens(self) -> int:
        return sum(len(ids) for ids in self.inputs)


def _is_ids(x: Any) -> bool:
    return isinstance(x, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in x)


def _input_ids(raw: Any, tokenizer: Any) -> list[list[int]]:
    """The four forms of ``input`` → token ids per input (the vocabulary checked)."""
    if raw is None:
        raise ApiError(400, "input: field required", param="input")
    if isinstance(raw, str):
        items: list = [raw]
    elif _is_ids(raw) and raw:
        items = [raw]
    elif isinstance(raw, list) and raw and (all(isinstance(x, str) for x in raw)
                                            or all(_is_ids(x) for x in raw)):
        items = raw
    elif isinstance(raw, list) and not raw:
        raise ApiError(400, "input: must not be empty", param="input")
    else:
        raise ApiError(400, "input: must be a string, a list of strings, a list of token ids "
                       "or a list of token-id lists", param="input")
    if len(items) > MAX_INPUTS:
        raise ApiError(400, f"input: {len(items)} inputs; at most {MAX_INPUTS} per request",
                       param="input")
    vocab = int(tokenizer.vocab_size)
    out = []
    for i, it in enumerate(items):
        ids = list(tokenizer.encode(it)) if isinstance(it, str) else list(it)
        bad = [t for t in ids if not 0 <= t < vocab]
        if bad:
            raise ApiError(400, f"input[{i}]: token id {bad[0]} is outside the vocabulary "
                           f"[0, {vocab})", param="input")
        out.append(ids)
    return out


def build_embed_plan(body: Any, tokenizer: Any, model_name: str, max_model_len: int,
                     dim: int) -> EmbedPlan:
    """Validate an embeddings body into an EmbedPlan, or raise ApiError (400/404)."""
    req = _parse(EmbeddingsBody, body)
    if req.model is not None and req.model != model_name:
        raise ApiError(404, f"The model `{req.model}` does not exist; this server serves `{model_name}`.",
                       param="model", code="model_not_found")
    if req.dimensions is not None and req.dimensions != dim:
        raise ApiError(400, f"dimensions: not supported: this model's embeddings have {dim} "
                       f"dimensions and cannot be shortened (leave dimensions out, or send {dim})",
                       param="dimensions")
    if req.truncate_prompt_tokens is not None:
        raise ApiError(400, "truncate_prompt_tokens: not supported by this server",
                       param="truncate_prompt_tokens")
    inputs = _input_ids(req.input, tokenizer)
    for i, ids in enumerate(inputs):
        if not ids:
            raise ApiError(400, f"input[{i}]: empty after tokenization", param="input")
        if len(ids) > max_model_len:
            raise ApiError(400, f"input[{i}]: has {len(ids)} tokens but this model's maximum "
                           f"context length is {max_model_len} tokens", param="input",
                           code="context_length_exceeded")
    return EmbedPlan(model_name, inputs, req.encoding_format or "float")


def encode_vector(vec: np.ndarray, encoding_format: str) -> Any:
    """float: a JSON list of the float32 values; base64: their little-endian float32 bytes."""
    v = np.asarray(vec, dtype="<f4")
    if encoding_format == "base64":
        return base64.b64encode(v.tobytes()).decode("ascii")
    return v.tolist()


def response_body(plan: EmbedPlan, vectors: list) -> dict:
    n = plan.prompt_tokens
    data = [{"object": "embedding", "index": i, "embedding": encode_vector(v, plan.encoding_format)}
            for i, v in enumerate(vectors)]
    return {"object": "list", "data": data, "model": plan.model,
            "usage": {"prompt_tokens": n, "total_tokens": n}}


class Embedding:
    """One embeddings request between the event loop and the engine thread."""

    def __init__(self, orchestrator: Any, plan: EmbedPlan, request_id: str) -> None:
        self.orch, self.plan, self.request_id = orchestrator, plan, request_id
        self._loop = asyncio.get_running_loop()
        self._done: asyncio.Future = self._loop.create_future()

    def _on_done(self, vectors: Optional[list], reason: Optional[str]) -> None:   # engine thread
        self._loop.call_soon_threadsafe(self._set, vectors, reason)

    def _set(self, vectors: Optional[list], reason: Optional[str]) -> None:
        if not self._done.done():
            self._done.set_result((vectors, reason))

    def submit(self) -> None:
        """orchestrator.submit_embed: raises QueueFull, RequestTooLong or RuntimeError (stopped)."""
        self.orch.submit_embed(EmbedRequest(self.request_id, self.plan.inputs, self._on_done))

    async def vectors(self) -> Optional[list]:
        """The vectors in input order, or None when the request was aborted (shutdown)."""
        vectors, reason = await self._done
        return None if reason else vectors

    def abort(self) -> None:
        self.orch.cancel(self.request_id)
