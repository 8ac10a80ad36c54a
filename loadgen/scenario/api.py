"""The scenario's ``api`` section: which endpoint and body every request has (``Api``) and what
one answer may cost the client (``ResponseLimits``). ``loadgen.scenario.model.Scenario`` holds
one ``Api``; ``loadgen.client.request`` builds each request's body and headers from it.
"""
from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field, PrivateAttr, model_validator

from loadgen.scenario.hangups import Retry
from loadgen.scenario.model_mix import Assignment, ModelMix, ModelWeight, check_models
from loadgen.scenario.strict import Strict
from loadgen.scenario.structured import ResponseFormat, body_fields

# endpoint ─► (the flag it refuses, why): one line "FLAG: api.endpoint ENDPOINT WHY"
_NOT_WITH_ENDPOINT = {
    "responses": ("continuous_usage", "has no stream_options (usage comes once, with "
                                      "response.completed): leave it false"),
    "embeddings": ("stream", "is answered in one JSON body, never streamed: set api.stream: "
                             "false or leave it out"),
}


class ResponseLimits(Strict):
    """What one answer may cost the client (loadgen.client.stream_step.Limits); exceeding one
    fails that request as ``too_large`` and the run goes on. Memory stays bounded whatever the
    server sends: a streamed body is parsed as it comes (reading pauses above 1 MiB held)."""

    max_header_bytes: int = Field(64 * 2**10, ge=1024, le=2**26)     # status line + headers
    max_event_bytes: int = Field(8 * 2**20, ge=1024, le=2**30)       # one SSE event / line
    max_body_bytes: int = Field(32 * 2**20, ge=1024, le=2**31)       # a non-streamed body
    events_per_token: int = Field(4, ge=1, le=1_000_000)             # × max_tokens + 1024 events
    # [arrival_ns, n_tokens] stamps kept per request; past it chunks are counted, not kept
    max_chunk_stamps: int = Field(65_536, ge=1, le=2**24)


class Api(Strict):
    # embeddings: POST /v1/embeddings, one JSON answer (never streamed: api.stream defaults to
    # false there), workload.inputs_per_request texts per request, no output tokens
    # responses: POST /v1/responses (OpenAI Responses API: input, max_output_tokens; named
    # events, response.output_text.delta per token; usage with response.completed)
    # transcriptions: POST /v1/audio/transcriptions, multipart upload of workload.audio's clips
    endpoint: Literal["chat", "completions", "embeddings", "responses",
                      "transcriptions"] = "completions"
    model: Optional[str] = None           # None: the first id that /v1/models lists
    stream: bool = True
    ignore_eos: bool = True               # ask for exactly max_tokens (server may ignore)
    include_usage: bool = True            # stream_options.include_usage
    continuous_usage: bool = False        # stream_options.continuous_usage_stats (vLLM)
    extra_body: dict[str, Any] = Field(default_factory=dict)  # merged into every request body
    headers: dict[str, str] = Field(default_factory=dict)
    api_key_env: Optional[str] = None     # name of the environment variable; never stored
    timeout_s: float = Field(600.0, gt=0)  # per request, send to last byte
    connect_timeout_s: float = Field(30.0, gt=0)
    # before the run (loadgen.targets.probe): GET /v1/models (reachable, authorised, api.model
    # listed) and one small request with the run's own body
    probe: bool = True
    # a field the server rejects (HTTP 4xx naming it, e.g. transformers serve and ignore_eos):
    # true: drop it from every request, with a warning in summary.json; false: stop (exit 2)
    drop_rejected_fields: bool = True
    # multi-turn sessions: this header carries each session's id (e.g. X-Session-ID, for routers)
    session_header: Optional[str] = None
    # before the probe (loadgen.targets.ready): wait this long at most for /health 200 and answers
    # that are not 503; None: 600 s for target.server (compiles), 120 s for target.url; 0: no wait
    ready_timeout_s: Optional[float] = Field(None, ge=0)
    limits: ResponseLimits = Field(default_factory=ResponseLimits)
    # a 3xx answer is a failed request of kind "redirect" (its Location in the error); same-host:
    # a 307/308 to the same scheme, host and port is followed (up to 3 hops); never another host
    follow_redirects: Literal["never", "same-host"] = "never"
    # a W3C traceparent on every request (loadgen.client.trace_context; records keep trace_id);
    # false: none (a server that rejects unknown headers)
    traceparent: bool = True
    # chat only: {"type": "json_object"} | {"type": "json_schema", "json_schema": {name, schema,
    # strict}}; each answer is checked against it after the stream (loadgen.scenario.structured)
    response_format: Optional[ResponseFormat] = None
    # rate limits: resend a 429/503 answer (loadgen.scenario.hangups.Retry); None: never
    retry: Optional[Retry] = None
    # workload.tools / tool_choice, put here by Scenario: the request body is built from the api
    _tools: Optional[list] = PrivateAttr(None)
    _tool_choice: Any = PrivateAttr(None)
    # several models / LoRA adapters (loadgen.scenario.model_mix): request id ─► model, seeded
    # (the scenario's schedule seed, put here by Scenario); api.model and api.models exclude each other
    models: Optional[list[ModelWeight]] = None
    model_assignment: Assignment = "random"
    _mix_seed: int = PrivateAttr(0)

    @property
    def structured(self) -> dict:
        """The body's tools, tool_choice and response_format (plain JSON; only those given)."""
        return body_fields(self._tools, self._tool_choice, self.response_format)

    @property
    def mix(self) -> Optional[ModelMix]:
        """api.models as a ModelMix (None: one model, api.model or the server's first)."""
        return ModelMix.of(self.models, self.model_assignment, self._mix_seed)

    @property
    def first_model(self) -> Optional[str]:
        """api.model, else api.models' first name (the probe's and sut.json's model), else None."""
        return self.model or (self.models[0].name if self.models else None)

    @model_validator(mode="after")
    def _one_model_key(self) -> "Api":
        if self.models is not None:
            if self.model is not None:
                raise ValueError("models: give api.model (one model) or api.models (several), "
                                 "not both")
            check_models(self.models)
        return self

    @model_validator(mode="before")
    @classmethod
    def _embeddings_not_streamed(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("endpoint") == "embeddings" and "stream" not in data:
            data = {**data, "stream": False}
        return data

    @model_validator(mode="after")
    def _endpoint_flags(self) -> "Api":
        rule = _NOT_WITH_ENDPOINT.get(self.endpoint)
        if rule is not None and getattr(self, rule[0]):
            raise ValueError(f"{rule[0]}: api.endpoint {self.endpoint} {rule[1]}")
        return self
