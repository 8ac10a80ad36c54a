"""The pure half of one request, shared by the native client and the Locust engine.

    api settings ─► request_headers / base_body (once per run) ─► request_body (per request)
    response ─► [client: wire | aiohttp | client.gevent_wire.client (kernel-stamped, gevent)] ─► Record, StreamTally
        ─► apply_body (non-streaming JSON) / end_stream (after the last event) / fail
        ─► finish: first-chunk/first-token times, usage vs chunk counts, mismatch, sources

No I/O, no asyncio, no aiohttp, no gevent here (json, loadgen.record/redact, client.sse; in ``finish``
the usage-count rule of analysis.server.rules (the sanity gate's),
client.structured's tool-call / JSON checks and client.accuracy's grade; client.responses in ``apply_body``):
``loadgen.client.http_client`` (asyncio) and ``loadgen.engine.locust`` (gevent-patched processes) both import
it, so the two engines build the same bodies and fill the same records by construction.
``api`` below is anything with the ``scenario.Api`` fields used (``client.ClientConfig`` too).
"""
from __future__ import annotations

import json
from functools import lru_cache
from operator import itemgetter
from typing import Any, Iterable, Optional

from analysis.server.rules import token_count   # the usage rule, the sanity gate's too
from loadgen import redact
from loadgen.record import Record, now_ns
from loadgen.client import accuracy, structured
from loadgen.client.responses import ResponsesTally, cached_of, read_response
from loadgen.client.sse import StreamTally, error_message, loads
from loadgen.client import multipart
from loadgen.client.transcriptions import TranscriptionTally, is_transcription, read_transcription

SNIPPET = 300                 # characters of an error body kept in Record.error
_second = itemgetter(1)
_dumps = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


ENDPOINTS = ("chat", "completions", "embeddings", "responses", "transcriptions")
_PATHS = {"chat": "/v1/chat/completions", "embeddings": "/v1/embeddings",
          "responses": "/v1/responses", "transcriptions": "/v1/audio/transcriptions"}


def endpoint_path(endpoint: str) -> str:
    """The URL path of an ``api.endpoint`` ("chat" | "completions" | "embeddings" | "responses")."""
    return _PATHS.get(endpoint, "/v1/completions")


def input_count(prompt) -> int:
    """Inputs of one embeddings request: a text or a list of token ids is one; a list of texts
    (or of token-id lists) one per entry."""
    if isinstance(prompt, list) and prompt and isinstance(prompt[0], (str, list)):
        return len(prompt)
    return 1


def request_headers(api: Any, api_key: Optional[str]) -> dict:
    """The headers of every request; ``api.headers`` is merged last. The key and every
    secret-looking header value are registered with ``loadgen.redact`` (never written)."""
    h = {"Content-Type": "application/json", "Accept-Encoding": "identity"}
    if api.stream:
        h["Accept"] = "text/event-stream"
    if api_key:
        h["Authorization"] = f"Bearer {api_key}"
    h.update(api.headers)
    redact.register(api_key)
    redact.register_headers(h)
    return h


def base_body(api: Any, model: str, drop: Iterable[str] = ()) -> dict:
    """Everything but the prompt and max_tokens; extra_body is merged last (stream_options deep).
    ``drop``: fields the server rejected (``optional_fields`` names, see ``drop_fields``).
    Embeddings: the model and extra_body only (e.g. encoding_format); nothing is generated.
    Transcriptions: the multipart form's text fields (loadgen.client.multipart.form_fields)."""
    if getattr(api, "endpoint", None) == "transcriptions":
        return multipart.form_fields(api, model, drop)
    if getattr(api, "endpoint", None) == "embeddings":
        body = {"model": model, **api.extra_body}
        return drop_fields(body, drop) if drop else body
    body: dict = {"model": model, "stream": api.stream}
    # responses: usage always comes with response.completed; the API has no stream_options
    if api.stream and api.include_usage and getattr(api, "endpoint", None) != "responses":
        opts = {"include_usage": True}
        if api.continuous_usage:
            opts["continuous_usage_stats"] = True
        body["stream_options"] = opts
    if api.ignore_eos:
        body["ignore_eos"] = True
    body.update(getattr(api, "structured", None) or {})   # tools, tool_choice, response_format
    extra = dict(api.extra_body)
    if isinstance(extra.get("stream_options"), dict) and "stream_options" in body:
        extra["stream_options"] = {**body["stream_options"], **extra["stream_options"]}
    body.update(extra)
    return drop_fields(body, drop) if drop else body


# what every request needs; the rest of a base body is loadgen's or the user's choice
REQUIRED_FIELDS = ("model", "stream")


def optional_fields(body: dict) -> list[str]:
    """The fields of a base body a server may reject and a run can do without: all but
    REQUIRED_FIELDS, with stream_options' keys also named on their own (``stream_options.key``)."""
    out = []
    for k, v in body.items():
        if k in REQUIRED_FIELDS:
            continue
        out.append(k)
        if k == "stream_options" and isinstance(v, dict):
            out += [f"{k}.{kk}" for kk in v]
    return out


def drop_fields(body: dict, fields: Iterable[str]) -> dict:
    """A copy of ``body`` without ``fields`` (``a.b`` is key b of a; a mapping left empty goes)."""
    out = dict(body)
    for f in fields:
        top, _, sub = f.partition(".")
        if not sub:
            out.pop(top, None)
        elif isinstance(out.get(top), dict):
            inner = {k: v for k, v in out[top].items() if k != sub}
            if inner:
                out[top] = inner
            else:
                out.pop(top)
    return out


def with_headers(base: dict, extra: Optional[dict]) -> dict:
    """``base`` with one request's own headers merged last, names compared case-insensitively
    (``x-session`` replaces ``X-Session``); ``base`` itself when there are none."""
    if not extra:
        return base
    low = {k.lower() for k in extra}
    out = {k: v for k, v in base.items() if k.lower() not in low}
    out.update(extra)
    return out


_IMAGES = "\x00loadgen-images\x00"          # stands for the image parts until the splice
_IMAGES_JSON = _dumps(_IMAGES).encode()


@lru_cache(maxsize=1024)
def image_part(url: str) -> bytes:
    """One image content part as JSON bytes, made once per image of the pool (a data URL of
    hundreds of KB is encoded once, then spliced into every body that carries it)."""
    return _dumps({"type": "image_url", "image_url": {"url": url}}).encode()


def request_body(base: dict, chat: bool, prompt, max_tokens: int,
                 messages: Optional[list] = None, endpoint: Optional[str] = None,
                 images: Optional[tuple] = None) -> bytes:
    """One request's JSON bytes: ``base`` plus the prompt (chat: messages) and max_tokens.
    ``messages`` (chat only): the whole conversation to send, instead of one user turn built
    from ``prompt``. ``endpoint`` "embeddings": ``input`` is the prompt (a text, or a list of
    texts), no max_tokens."""
    b = dict(base)
    if endpoint == "embeddings":
        if messages is not None:
            raise ValueError("api.endpoint embeddings sends texts, not a list of messages")
        if not (isinstance(prompt, str) or (isinstance(prompt, list) and prompt and (
                all(isinstance(p, (str, list)) for p in prompt)
                or all(isinstance(p, int) and not isinstance(p, bool) for p in prompt)))):
            raise ValueError("embeddings: input must be a text, token ids, or a non-empty list "
                             "of either")
        b["input"] = prompt
        return _dumps(b).encode()
    if endpoint == "responses":                 # input: a text or messages; max_output_tokens
        inp = messages if messages is not None else prompt
        if not (isinstance(inp, str) or (isinstance(inp, list) and inp
                                         and all(isinstance(m, dict) for m in inp))):
            raise ValueError("responses: input must be a text or a non-empty list of messages")
        b["input"] = inp
        b["max_output_tokens"] = max_tokens
        return _dumps(b).encode()
    if messages is not None:
        if not chat:
            raise ValueError("a list of messages needs api.endpoint: chat")
        if not messages or not all(isinstance(m, dict) for m in messages):
            raise ValueError("messages: expected a non-empty list of message objects")
        b["messages"] = messages
    elif chat:
        if isinstance(prompt, str) and images:
            b["messages"] = [{"role": "user", "content": [{"type": "text", "text": prompt},
                                                          _IMAGES]}]
            b["max_tokens"] = max_tokens
            return _dumps(b).encode().replace(
                _IMAGES_JSON, b",".join(image_part(u) for u in images), 1)
        if isinstance(prompt, str):
            b["messages"] = [{"role": "user", "content": prompt}]
        elif prompt and all(isinstance(m, dict) for m in prompt):
            b["messages"] = prompt
        else:
            raise ValueError("the chat endpoint needs a text prompt or a list of messages")
    else:
        b["prompt"] = prompt
    b["max_tokens"] = max_tokens
    return _dumps(b).encode()


class Shape:
    """One run's request shape, built once: the native Client's and each Locust worker's (the
    same bodies, headers, record fields and tallies by construction)."""

    def __init__(self, api: Any, model: str, api_key: Optional[str], drop: Iterable[str] = ()):
        self.endpoint = api.endpoint
        self.chat = api.endpoint == "chat"
        self.embeddings = api.endpoint == "embeddings"    # rec.inputs; no max_tokens asked for
        self.responses = api.endpoint == "responses"      # named events: ResponsesTally
        self.base = base_body(api, model, drop)
        self.check = structured.Checker.of(self.base)     # tools / response_format: at finish
        opts = self.base.get("stream_options")          # continuous usage stats only where
        self.continuous = isinstance(opts, dict) and bool(        # the body still asks for them
            opts.get("continuous_usage_stats"))
        self.headers = request_headers(api, api_key)
        # api.models: one base body per model; request id ─► model (scenario.model_mix, pure)
        self.mix = getattr(api, "mix", None)
        self.bases = ({n: base_body(api, n, drop) for n in self.mix.names}
                      if self.mix is not None else {})
        # transcriptions: a multipart body per clip, made once (multipart.ClipBodies)
        self.clips = (multipart.ClipBodies(self.base) if api.endpoint == "transcriptions"
                      else None)
        if self.clips is not None:
            self.continuous = bool(self.base.get("stream_continuous_usage_stats"))
            self.headers = with_headers(self.headers, {"Content-Type": self.clips.content_type})

    def prepare(self, rec: Record, prompt, images: Optional[tuple], audio=None) -> None:
        """The record fields the request itself decides (embeddings: inputs; images; api.models:
        the model of this request id; audio: its length, and no max_tokens: a transcription asks
        for none)."""
        if self.mix is not None:
            rec.model = self.mix.pick(rec.id)
        if self.embeddings:                     # nothing generated: no output tokens asked for
            rec.inputs, rec.requested_output_tokens = input_count(prompt), None
        if images:
            rec.input_images = len(images)
        if self.clips is not None:
            rec.requested_output_tokens = None
            rec.input_audio_s = audio.seconds if audio is not None else None

    def body(self, prompt, max_tokens: Optional[int], messages: Optional[list] = None,
             images: Optional[tuple] = None, audio=None,
             model: Optional[str] = None) -> bytes:
        if self.clips is not None:              # the clip's body, made on its first request
            return self.clips.body(audio)
        base = self.bases.get(model, self.base) if model is not None else self.base
        return request_body(base, self.chat, prompt, max_tokens, messages, self.endpoint,
                            images)

    def tally(self, want_text: bool = False, expected: Optional[tuple] = None):
        """What reads the answer: a StreamTally, or for api.endpoint responses a ResponsesTally
        (transcriptions: a TranscriptionTally); ``expected`` (workload.dataset): the answer is
        graded at ``finish`` (client/accuracy.py)."""
        if self.clips is not None:
            return TranscriptionTally(self.continuous, want_text, self.check, expected)
        return (ResponsesTally(want_text, self.check, expected) if self.responses
                else StreamTally(self.continuous, want_text, self.check, expected))


def fail(rec: Record, kind: str, msg: str, t: Optional[int] = None) -> None:
    """Mark ``rec`` failed (``kind``: a ``record.ERROR_KINDS`` entry); ends it now unless ended."""
    rec.status = "error"
    rec.error_kind = kind
    rec.error = msg[:SNIPPET + 100]
    if rec.end_at_ns is None:
        rec.end_at_ns = t if t is not None else now_ns()


def end_stream(rec: Record, tally: Any, done: bool, t: int) -> None:
    """After a stream's last event: ok if [DONE] or a finish_reason came, else incomplete."""
    if done or tally.finish_reason is not None or getattr(tally, "ends_with_body", False):
        rec.status = "ok"
        if rec.end_at_ns is None:
            rec.end_at_ns = t
    else:
        fail(rec, "incomplete", "stream ended without [DONE] or finish_reason", t)


def apply_body(rec: Record, tally: Any, raw: bytes, t: int) -> None:
    """A whole (non-streaming) JSON answer read at ``t``: usage, text, finish_reason, or a failure."""
    try:
        obj = loads(raw)
    except ValueError:
        return fail(rec, "protocol", f"response is not JSON: {raw[:120]!r}", t)
    if not isinstance(obj, dict):
        return fail(rec, "protocol", f"response is not a JSON object: {raw[:120]!r}", t)
    if obj.get("object") == "response":         # api.endpoint responses (client/responses.py)
        err = read_response(tally, obj)
        if err is not None:
            return fail(rec, "server_error", err, t)
        rec.status = "ok"
        return
    if "error" in obj or obj.get("object") == "error":
        return fail(rec, "server_error", error_message(obj.get("error", obj)), t)
    if is_transcription(obj):                   # api.endpoint transcriptions: {"text", "usage"?}
        read_transcription(tally, obj)
        rec.status = "ok"
        return
    data = obj.get("data")
    if rec.inputs is not None and "choices" not in obj and (
            not isinstance(data, list) or len(data) != rec.inputs):
        n = len(data) if isinstance(data, list) else "no"
        return fail(rec, "protocol", f"{n} embeddings for {rec.inputs} input(s) sent", t)
    usage = obj.get("usage") or {}
    tally.prompt_tokens = usage.get("prompt_tokens")
    tally.completion_tokens = usage.get("completion_tokens")
    if hasattr(tally, "cached_tokens"):
        tally.cached_tokens = cached_of(usage, "prompt_tokens_details")
    keep = getattr(tally, "text", None)
    for ch in obj.get("choices") or []:
        text = ch.get("text")
        if text is None:
            text = (ch.get("message") or {}).get("content") or ""
        tally.chars += len(text)
        if keep is not None:
            keep.append(text)
        calls = (ch.get("message") or {}).get("tool_calls")
        if calls and isinstance(calls, list) and hasattr(tally, "add_tool_calls"):
            tally.add_tool_calls([c for c in calls if isinstance(c, dict)])
        if ch.get("finish_reason") is not None:
            tally.finish_reason = ch["finish_reason"]
    rec.status = "ok"


USAGE_SLACK = 1024


def usage_cap(rec: Record) -> Optional[int]:
    """The most completion tokens one answer can carry: 4 per requested (or streamed) token
    plus ``USAGE_SLACK``, the stream's own event bound (stream_step.Limits.max_events); None
    (no upper bound) when neither a max_tokens nor a stream says what it could be."""
    if rec.requested_output_tokens is None and not rec.chunk_output_tokens:
        return None
    most = max(rec.requested_output_tokens or 0, rec.chunk_output_tokens or 0, 1)
    return 4 * most + USAGE_SLACK


def _usage_checked(rec: Record, name: str, value: Any, cap: Optional[int]) -> Optional[int]:
    """``value`` if it is a count in [0, cap] (analysis/server/rules.token_count, the sanity
    gate's rule); else the record fails as ``protocol`` (the server's usage is absurd: never a
    figure) and None (the chunk count stands in, labelled)."""
    c = token_count(value, name, cap)
    if c.reason is not None and rec.status != "error":
        fail(rec, "protocol", c.reason)
    return c.value


def finish(rec: Record, tally: Any, workload_prompt_tokens: Optional[int]) -> None:
    """Derive first-chunk/first-token times and the token counts from what arrived.

    ``tally``: a ``StreamTally`` (or anything with its completion_tokens, prompt_tokens,
    finish_reason and chars); ``workload_prompt_tokens``: the workload's own prompt count, used
    when the server reported none. Output tokens: usage if given, else the chunk count;
    ``token_count_mismatch`` when both exist and disagree. From a StreamTally also the first
    answer chunk's arrival, the reasoning tokens and (``want_text``) the answer's text.
    """
    chunks = rec.chunks
    if chunks:
        rec.first_chunk_at_ns = chunks[0][0]
        for t, n in chunks:
            if n:
                rec.first_token_at_ns = t
                break
        # past the stamp cap (stream_step.MAX_CHUNK_STAMPS) chunks are counted, not kept
        rec.chunk_output_tokens = sum(map(_second, chunks)) + (rec.chunks_unstamped_tokens or 0)
        answer = getattr(tally, "first_answer", None)   # index into chunks (StreamTally.add)
        if answer is not None and answer < len(chunks):
            rec.first_answer_at_ns = chunks[answer][0]
    rec.reasoning_tokens = getattr(tally, "reasoning_tokens", None)
    text = getattr(tally, "text", None)
    if text is not None and getattr(tally, "want_text", True):
        rec.output_text = "".join(text)
    if getattr(tally, "calls", None) is not None or getattr(tally, "check", None) is not None:
        structured.fill(rec, tally)             # tools / response_format: after the stream
    usage = _usage_checked(rec, "completion_tokens", tally.completion_tokens, usage_cap(rec))
    rec.usage_output_tokens = usage
    if usage is not None:
        rec.output_tokens, rec.output_tokens_source = usage, "usage"
    elif rec.chunk_output_tokens is not None:
        rec.output_tokens, rec.output_tokens_source = rec.chunk_output_tokens, "chunks"
    if usage is not None and rec.chunk_output_tokens is not None:
        rec.token_count_mismatch = usage != rec.chunk_output_tokens
    prompt = _usage_checked(rec, "prompt_tokens", tally.prompt_tokens, None)
    if prompt is not None:
        rec.prompt_tokens, rec.prompt_tokens_source = prompt, "usage"
    elif workload_prompt_tokens is not None:
        rec.prompt_tokens, rec.prompt_tokens_source = workload_prompt_tokens, "workload"
    cached = getattr(tally, "cached_tokens", None)
    if cached is not None:                      # at most the prompt the server counted
        rec.cached_tokens = _usage_checked(rec, "prompt_tokens_details.cached_tokens", cached, prompt)
    rec.finish_reason = tally.finish_reason
    rec.output_chars = tally.chars
    expected = getattr(tally, "expected", None)
    if expected is not None:                    # workload.dataset: after the stream, once;
        got = accuracy.grade_now(expected, "".join(tally.text or ()), rec.status,
                                 rec.finish_reason)  # a regex match: the engine's settle, off
        rec.correct = None if got is accuracy.DEFER else got   # this loop (client/accuracy.py)
    redact.redact_record(rec)
