"""The HTTP client: one request spec in, one filled ``Record`` out, never an exception.

    RequestSpec ─► body (model, prompt | messages, max_tokens, stream, stream_options, ignore_eos,
                         tools, tool_choice, response_format, extra_body) and headers
                         (api.headers, then the spec's own)
        ─► transport.send ─► every read stamped, events counted ─► Record.chunks [[t, n], ...]
              wire     (default for http://; loadgen.client.wire): kernel receive stamps, one
                       epoll for every socket, SSE/JSON parsed after the reads in bounded slices
              aiohttp  (https://, or LOADGEN_HTTP=aiohttp; aiohttp_transport.py): user-space
                       stamp per read, SSE/JSON parsed per read
        ─► request.finish: first chunk / token / answer times, usage vs chunk counts, reasoning
           tokens, the answer's text when the spec asks (``want_text``), tool calls and JSON
           answers checked (``structured.Checker``, built once from the base body)

The body, the headers and the record bookkeeping (``fail``, ``finish``, ...) are
``loadgen.client.request``'s, shared with the Locust engine; only the I/O is in the transports.
Both fill the same fields by the same rules and retry a stale pooled keep-alive connection the
same way (once, on a fresh connection: ``retries``, ``first_sent_at_ns``, ``retry_error``; no
reuse afterwards). ``transport_info()`` (meta.json ``client_transport``) says which transport
ran, how it stamped (``stamp_source`` kernel | user | mixed, the clock method and bracket) and
what it saw (coalesced reads, retries).

Cancellation: ``execute(spec, rec)`` fills the caller's ``rec`` in place. When the task is
cancelled (run interrupted) the record gets ``status="cancelled"``, ``error_kind="cancelled"``,
``end_at_ns`` and everything measured so far, and the ``CancelledError`` is RE-RAISED (so
``asyncio`` timeouts and task groups keep working). The caller therefore creates the record first
(``rec = Client.new_record(spec)``), keeps it, and writes it whatever happens. ``execute`` writes
nothing itself.

Non-streaming requests have no chunks and no first-token time: only ``end_at_ns`` (E2E) and the
usage counts; a TTFT for them would be made up. Embeddings (``api.endpoint: embeddings``) are
such requests: the record keeps ``inputs`` (texts sent) and no ``requested_output_tokens``.
``api.endpoint: responses`` (POST /v1/responses) streams named events, counted by
``responses.ResponsesTally`` (StreamTally's interface: the first output_text delta is the first
token). While any Client is open the cyclic GC runs
rarely (``gc_hold``).
"""
from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass, field
from typing import Any, Optional, Union

import msgspec

from loadgen.client import accuracy
from loadgen.client.aiohttp_transport import AiohttpTransport
from loadgen.client.load_monitor import gc_hold, gc_release
from loadgen.client.request import ENDPOINTS, Shape, base_body, endpoint_path, finish, with_headers
from loadgen.client.attempt import DONE, INTERRUPTED, SEND, AttemptLoop, new_record
from loadgen.client.retry import RetryPolicy
from loadgen.client.request import fail as _fail
from loadgen.client.stream_step import DEFAULT_LIMITS, Limits
from loadgen.client.trace_context import TraceContext
from loadgen.client.wire.transport import WireTransport
from loadgen.record import Record, now_ns

TRANSPORTS = ("wire", "aiohttp")
ENV = "LOADGEN_HTTP"          # "aiohttp" forces aiohttp for http:// targets too
CANCELLED = INTERRUPTED         # the one wording (client/attempt.py)


def pick_transport(url: str, wanted: Optional[str] = None) -> str:
    """``wire`` for ``http://`` unless ``wanted`` (else $LOADGEN_HTTP) says ``aiohttp``;
    ``aiohttp`` for anything else (``https://``: the wire transport speaks no TLS)."""
    wanted = (wanted or os.environ.get(ENV) or "wire").strip().lower()
    if wanted not in TRANSPORTS:
        raise ValueError(f"{ENV}: expected 'wire' or 'aiohttp', got {wanted!r}")
    return "wire" if wanted == "wire" and url.startswith("http://") else "aiohttp"


class RequestSpec(msgspec.Struct):
    """One request as a driver sends it: the plan's frozen spec (scenario.workload.PromptSpec,
    alias engine.core.plan.Spec) with what the sender adds at the send (scheduled time, a session
    turn's messages/headers, ``want_text``). A msgspec Struct: slots, cheap to build; mutable
    because the dispatcher stamps ``scheduled_at_ns`` on it when it goes out."""

    id: int
    phase: str                                  # "warmup" | "measured"
    prompt: Union[str, list]                    # text, token ids, or (chat) a list of messages
    prompt_tokens: Optional[int]                # the workload's own count
    max_tokens: int
    scheduled_at_ns: Optional[int] = None
    messages: Optional[list] = None             # chat: the whole conversation, sent as is
    session_id: Optional[str] = None            # multi-turn: copied into the Record
    turn: Optional[int] = None
    want_text: bool = False                     # Record.output_text: the answer's text
    headers: Optional[dict] = None              # this request's own headers (e.g. session affinity)
    images: Optional[tuple] = None              # chat: image data URLs after the text (workload.images)
    expected: Optional[tuple] = None            # workload.dataset: graded after the stream (client/accuracy.py)
    audio: Any = None                           # transcriptions: the clip sent (workload.audio)

    @classmethod
    def of(cls, p: Any, id: int, phase: str = "measured", *, messages: Optional[list] = None,
           session_id: Optional[str] = None, turn: Optional[int] = None,
           want_text: bool = False, headers: Optional[dict] = None) -> "RequestSpec":
        """THE constructor (tests/loadgen/client/test_request_spec.py: no other module calls
        a direct build): request ``id`` of a frozen workload PromptSpec (= engine.core.plan.Spec;
        the plan, a session turn, the probe stream, the preflight probe), plus what the sender
        adds at the send (a session turn's ``messages``, ``session_id``, ``turn``, ``headers``,
        ``want_text``). A new per-request field is a PromptSpec field copied here, once."""
        if messages is None and p.messages:
            messages = list(p.messages)
        return cls(id, phase, p.prompt, p.prompt_tokens, p.max_tokens, None, messages,
                   session_id, turn, want_text, headers, p.images, p.expected, p.audio)


@dataclass
class ClientConfig:
    base_url: str
    endpoint: str = "completions"               # "chat" | "completions" | "embeddings" | "responses"
    model: str = ""
    stream: bool = True
    ignore_eos: bool = True
    include_usage: bool = True
    continuous_usage: bool = False
    extra_body: dict = field(default_factory=dict)
    headers: dict = field(default_factory=dict)
    api_key: Optional[str] = None
    timeout_s: float = 600.0                    # per request, send to last byte
    connect_timeout_s: Optional[float] = 30.0
    drop_fields: tuple = ()                     # fields the server rejected (targets.probe)
    limits: Limits = DEFAULT_LIMITS             # api.limits: what one answer may cost the client
    follow_redirects: str = "never"             # "never" | "same-host" (loadgen.client.http1.redirects)
    structured: dict = field(default_factory=dict)  # tools, tool_choice, response_format (chat)
    retry: Any = None                           # api.retry: client.retry.RetryPolicy, or None
    cancel: Any = None                          # load.cancel: client.hangup.HangupRule, or None
    mix: Any = None                             # api.models: a scenario.model_mix.ModelMix (or None)
    traceparent: bool = True                    # api.traceparent (client/trace_context.py)

    @classmethod
    def from_api(cls, api: Any, base_url: str, model: str, api_key: Optional[str],
                 drop_fields: tuple = ()) -> "ClientConfig":
        """From a ``loadgen.scenario.api.Api`` (the model name and key resolved by the caller)."""
        return cls(base_url=base_url, endpoint=api.endpoint, model=model, stream=api.stream,
                   ignore_eos=api.ignore_eos, include_usage=api.include_usage,
                   continuous_usage=api.continuous_usage, extra_body=dict(api.extra_body),
                   headers=dict(api.headers), api_key=api_key, timeout_s=api.timeout_s,
                   connect_timeout_s=api.connect_timeout_s, drop_fields=tuple(drop_fields),
                   limits=Limits.from_api(getattr(api, "limits", None)),
                   follow_redirects=getattr(api, "follow_redirects", "never"),
                   structured=dict(getattr(api, "structured", None) or {}),
                   retry=RetryPolicy.of_api(api),
                   mix=getattr(api, "mix", None),
                   traceparent=getattr(api, "traceparent", True))


def build_base_body(cfg: ClientConfig) -> dict:
    """Everything but the prompt and max_tokens (``loadgen.client.request.base_body``)."""
    return base_body(cfg, cfg.model, cfg.drop_fields)


class Client:
    """``async with Client(cfg, max_connections) as c: rec = await c.execute(spec, rec)``.

    ``max_connections`` bounds the pool (set it to the in-flight cap); 0 or None means unbounded.
    Keep-alive connections, no per-request connects once warm. ``transport``: ``wire`` or
    ``aiohttp`` (default: ``pick_transport``).
    """

    def __init__(self, cfg: ClientConfig, max_connections: Optional[int],
                 transport: Optional[str] = None):
        if cfg.endpoint not in ENDPOINTS:
            raise ValueError(f"api.endpoint: expected one of {', '.join(ENDPOINTS)}, "
                             f"got {cfg.endpoint!r}")
        if cfg.structured and cfg.endpoint != "chat":
            raise ValueError(f"{', '.join(cfg.structured)}: needs api.endpoint: chat (the "
                             f"{cfg.endpoint} endpoint takes no tools or response_format)")
        self.cfg = cfg
        self.max_connections = max_connections or 0
        self.url = cfg.base_url.rstrip("/") + endpoint_path(cfg.endpoint)
        self.transport = pick_transport(self.url, transport)
        self.shape = Shape(cfg, cfg.model, cfg.api_key, cfg.drop_fields)   # Locust's too
        self.trace = TraceContext.of(cfg)       # traceparent per request (trace_context.py)
        self._t: Any = None                     # the transport, kept after close (describe)
        self._open = False

    async def __aenter__(self) -> "Client":
        kind = WireTransport if self.transport == "wire" else AiohttpTransport
        self._t = kind(self.url, self.max_connections, self.cfg.timeout_s,
                       self.cfg.connect_timeout_s, self.cfg.stream, self.cfg.limits,
                       self.cfg.follow_redirects)
        await self._t.open()
        self._open = True
        gc_hold()
        return self

    async def __aexit__(self, *exc) -> None:
        if self._open:
            self._open = False
            await self._t.close()
            gc_release()

    @property
    def first_response_headers(self) -> Optional[dict]:
        """The first answer's headers, names as sent (for sut.json)."""
        return self._t.first_response_headers if self._t is not None else None

    def describe(self) -> dict:
        """What the client did beyond sending requests (meta.json ``client_connections``)."""
        t = self._t
        return {"stale_connection_retries": t.retries if t else 0,
                "reuse_connections": t.reuse_connections if t else True}

    def transport_info(self) -> dict:
        """The transport and its stamping (meta.json ``client_transport``); also after close."""
        if self._t is None:
            return {"transport": self.transport}
        return self._t.describe()

    @staticmethod
    def new_record(spec: RequestSpec) -> Record:
        return new_record(spec.id, spec.phase, spec.scheduled_at_ns, spec.max_tokens,
                          spec.prompt_tokens, spec.session_id, spec.turn)

    def body(self, spec: RequestSpec) -> bytes:
        return self.shape.body(spec.prompt, spec.max_tokens, spec.messages, spec.images,
                               audio=spec.audio)

    def body_for(self, spec: RequestSpec, rec: Record) -> bytes:
        """The body of ``spec`` for ``rec`` (api.models: the model Shape.prepare put in rec.model)."""
        return self.shape.body(spec.prompt, spec.max_tokens, spec.messages, spec.images,
                               audio=spec.audio, model=rec.model)

    def headers(self, spec: RequestSpec) -> dict:
        return with_headers(self.shape.headers, spec.headers)

    async def execute(self, spec: RequestSpec, rec: Optional[Record] = None) -> Record:
        """Send one request; fill and return ``rec`` (created if not given). See module doc."""
        if rec is None:
            rec = self.new_record(spec)
        self.shape.prepare(rec, spec.prompt, spec.images, spec.audio)
        try:
            data = self.body_for(spec, rec)
            headers = self.trace.stamp(self.headers(spec), rec)
        except (TypeError, ValueError) as e:
            _fail(rec, "client", f"cannot build the request body: {e}")
            return rec
        if not self._open:
            _fail(rec, "client", "Client used outside 'async with'")
            return rec
        cfg, t, tally = self.cfg, self._t, None
        loop = AttemptLoop(rec, cfg.retry,
                           cfg.cancel.of(spec.id, spec.phase) if cfg.cancel is not None else None)
        steps = loop.play(rec)
        try:
            what, arg = next(steps)
            while what is not DONE:              # the attempt loop's steps (client/attempt.py)
                if what is SEND:
                    tally = self.shape.tally(spec.want_text, spec.expected)
                    await t.send(data, headers, rec, tally, arg)
                else:
                    await asyncio.sleep(arg)     # api.retry: cancelled like a request in flight
                what, arg = steps.send(now_ns())
        except asyncio.CancelledError:
            loop.cancelled(rec)
            finish(rec, tally, spec.prompt_tokens)
            raise
        except Exception as e:  # a failed request is a record, whatever raised: loadgen's own fault
            if rec.status == "pending":
                _fail(rec, "client", f"{type(e).__name__}: {e}")
        loop.settle(rec)
        finish(rec, tally, spec.prompt_tokens)
        if spec.expected is not None:       # a regex answer: matched off this loop, bounded
            await accuracy.settle_async(rec, tally)
        return rec
