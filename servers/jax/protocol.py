"""OpenAI request schema of the JAX server: JSON body ─► validated Plan (prompt ids + sampling) or ApiError.

    body dict ─► CompletionBody / ChatBody (strict pydantic; unknown fields ignored, like vLLM)
              ─► tokenizer.encode / apply_chat_template ─► length checks against max_model_len ─► Plan

Error bodies follow OpenAI's shape {"error": {"message", "type", "param", "code"}}. Choices made here:
  * bad input → 400, type "invalid_request_error" (OpenAI's type name; vLLM says "BadRequestError");
  * unknown model → 404, type "invalid_request_error", code "model_not_found" (OpenAI and vLLM both use 404);
  * a missing `model` is allowed and means the served model (vLLM does the same);
  * features this server does not implement (n > 1, echo, logprobs, best_of, penalties) → 400, never silently
    ignored, so a benchmark never measures something it did not ask for.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError


class ApiError(Exception):
    """An HTTP error with an OpenAI-style JSON body."""

    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 type_: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.type = status, message, param, code, type_

    def body(self) -> dict:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True)


class StreamOptions(_Strict):
    include_usage: bool = False
    continuous_usage_stats: bool = False  # vLLM extension: usage on every chunk


class _Common(_Strict):
    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    seed: int | None = None
    stop: str | list[str] | None = None
    n: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    ignore_eos: bool = False  # vLLM extension
    min_tokens: int = 0  # vLLM extension
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    user: str | None = None


class CompletionBody(_Common):
    prompt: Any = None
    echo: bool | None = None
    logprobs: int | None = None
    best_of: int | None = None


class TextPart(_Strict):
    type: Literal["text"]
    text: str


class Message(_Strict):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[TextPart] | None = None


class ChatBody(_Common):
    messages: list[Message]
    max_completion_tokens: int | None = None
    logprobs: bool | None = None


@dataclass
class Plan:
    """What one request asks the engine for, validated."""

    kind: Literal["completions", "chat"]
    model: str
    prompt_ids: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None
    ignore_eos: bool
    min_tokens: int
    stop: list[str] = field(default_factory=list)
    stream: bool = False
    include_usage: bool = False
    continuous_usage: bool = False


_TYPE_TAGS = {"str", "int", "float", "bool", "list", "dict", "none"}


def _validation_error(err: ValidationError) -> ApiError:
    first = max(err.errors(), key=lambda e: len(e.get("loc", ())))  # the deepest is the most specific
    # union members show up in loc as type tags ("stop.str", "stop.list[str]"); keep only field path parts
    parts = [str(p) for p in first.get("loc", ())
             if isinstance(p, int) or (str(p).lower() not in _TYPE_TAGS and "[" not in str(p))]
    loc = ".".join(parts)
    return ApiError(400, f"{loc or 'body'}: {first.get('msg', 'invalid value')}", param=loc or None)


def _parse(cls: type[_Common], body: Any) -> Any:
    if not isinstance(body, dict):
        raise ApiError(400, "request body must be a JSON object")
    try:
        return cls.model_validate(body)
    except ValidationError as e:
        raise _validation_error(e) from None


def _completion_prompt_ids(prompt: Any, tokenizer: Any) -> list[int]:
    """prompt: string | list of token ids | one-element list of a string or of a token-id list."""
    if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], (str, list)):
        prompt = prompt[0]
    if isinstance(prompt, str):
        return list(tokenizer.encode(prompt))
    if isinstance(prompt, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        vocab = int(tokenizer.vocab_size)
        bad = [t for t in prompt if not 0 <= t < vocab]
        if bad:
            raise ApiError(400, f"prompt: token id {bad[0]} is outside the vocabulary [0, {vocab})",
                           param="prompt")
        return list(prompt)
    if prompt is None:
        raise ApiError(400, "prompt: field required", param="prompt")
    if isinstance(prompt, list) and len(prompt) > 1 and all(isinstance(p, (str, list)) for p in prompt):
        raise ApiError(400, "prompt: batched prompts are not supported; send one prompt per request",
                       param="prompt")
    raise ApiError(400, "prompt: must be a string or a list of token ids", param="prompt")


def _message_text(m: Message) -> dict:
    if isinstance(m.content, list):
        text = "".join(p.text for p in m.content)
    else:
        text = m.content or ""
    return {"role": m.role, "content": text}


def _check_unsupported(req: Any) -> None:
    if req.n is not None and req.n != 1:
        raise ApiError(400, "n: only n=1 is supported", param="n")
    if getattr(req, "echo", None):
        raise ApiError(400, "echo: not supported by this server", param="echo")
    logprobs = getattr(req, "logprobs", None)
    if logprobs is not None and logprobs is not False:  # completions: an int; chat: a bool
        raise ApiError(400, "logprobs: not supported by this server", param="logprobs")
    best_of = getattr(req, "best_of", None)
    if best_of is not None and best_of != 1:
        raise ApiError(400, "best_of: only best_of=1 is supported", param="best_of")
    for name in ("presence_penalty", "frequency_penalty"):
        if getattr(req, name) not in (None, 0, 0.0):
            raise ApiError(400, f"{name}: not supported by this server (only 0)", param=name)
    if req.stream_options is not None and not req.stream:
        raise ApiError(400, "stream_options: only allowed when stream is true", param="stream_options")


def build_plan(kind: Literal["completions", "chat"], body: Any, tokenizer: Any, model_name: str,
               max_model_len: int) -> Plan:
    """Validate a request body into a Plan, or raise ApiError (400/404)."""
    req = _parse(CompletionBody if kind == "completions" else ChatBody, body)
    if req.model is not None and req.model != model_name:
        raise ApiError(404, f"The model `{req.model}` does not exist; this server serves `{model_name}`.",
                       param="model", code="model_not_found")
    _check_unsupported(req)
    if kind == "completions":
        prompt_ids = _completion_prompt_ids(req.prompt, tokenizer)
        max_tokens, max_param = req.max_tokens, "max_tokens"
    else:
        if not req.messages:
            raise ApiError(400, "messages: must contain at least one message", param="messages")
        try:
            text = tokenizer.apply_chat_template([_message_text(m) for m in req.messages])
        except Exception as e:  # noqa: BLE001 - a template may reject a conversation (jinja raise_exception)
            raise ApiError(400, f"messages: the chat template rejected them: {e}", param="messages") from None
        prompt_ids = list(tokenizer.encode(text))
        max_param = "max_completion_tokens" if req.max_completion_tokens is not None else "max_tokens"
        max_tokens = req.max_completion_tokens if req.max_completion_tokens is not None else req.max_tokens
    n_prompt = len(prompt_ids)
    where = "prompt" if kind == "completions" else "messages"
    if n_prompt == 0:
        raise ApiError(400, f"{where}: the prompt is empty after tokenization", param=where)
    if n_prompt >= max_model_len:
        raise ApiError(400, f"{where}: the prompt has {n_prompt} tokens but this model's maximum context "
                       f"length is {max_model_len} tokens (prompt + at least one generated token)",
                       param=where, code="context_length_exceeded")
    if max_tokens is None:
        max_tokens = max_model_len - n_prompt
    if max_tokens < 1:
        raise ApiError(400, f"{max_param}: must be at least 1, got {max_tokens}", param=max_param)
    if n_prompt + max_tokens > max_model_len:
        raise ApiError(400, f"{max_param}: {n_prompt} prompt tokens + {max_tokens} requested tokens exceed "
                       f"this model's maximum context length of {max_model_len} tokens",
                       param=max_param, code="context_length_exceeded")
    temperature = 1.0 if req.temperature is None else req.temperature
    if not 0.0 <= temperature <= 2.0:
        raise ApiError(400, f"temperature: must be in [0, 2], got {temperature}", param="temperature")
    top_p = 1.0 if req.top_p is None else req.top_p
    if not 0.0 < top_p <= 1.0:
        raise ApiError(400, f"top_p: must be in (0, 1], got {top_p}", param="top_p")
    if not 0 <= req.min_tokens <= max_tokens:
        raise ApiError(400, f"min_tokens: must be in [0, max_tokens={max_tokens}], got {req.min_tokens}",
                       param="min_tokens")
    stop = [req.stop] if isinstance(req.stop, str) else list(req.stop or [])
    if any(s == "" for s in stop):
        raise ApiError(400, "stop: stop strings must not be empty", param="stop")
    opts = req.stream_options or StreamOptions()
    return Plan(kind=kind, model=model_name, prompt_ids=prompt_ids, max_tokens=max_tokens,
                temperature=float(temperature), top_p=float(top_p), seed=req.seed, ignore_eos=req.ignore_eos,
                min_tokens=req.min_tokens, stop=stop, stream=req.stream, include_usage=opts.include_usage,
                continuous_usage=opts.continuous_usage_stats)
