"""records.jsonl: one JSON object per request — THE record type, written and read as one Struct.

    loadgen client ─► Record(...) (msgspec Struct) ─► loadgen.record.RecordWriter (to_json)
        ─► records.jsonl ─► analysis.contract.records (msgspec decode in bounded slices:
            typed Records, or RecordTable: numpy columns + one flat chunk array)
        ─► validate_run_dir, open_run, analysis
    msgspec.json.schema(Record) ─► docs/schema/record.json (analysis.contract.export)

Times are integer nanoseconds of ``time.perf_counter_ns``; null means "did not happen".
``chunks`` holds every streamed data event as ``[arrival_ns, n_tokens]`` (up to the stamp cap,
api.limits.max_chunk_stamps: the rest are counted in ``chunks_unstamped``); role-only, usage-only
and empty chunks have ``n_tokens == 0``. The first token is the first chunk with ``n_tokens > 0``.
``error_kind`` is a string, not a closed set: the kinds below are the ones written today, and a
newer writer's kind still reads (docs/architecture.md lists each). Reading ignores keys a newer
writer added; validate_run_dir (``written=True``) names them.
"""
from __future__ import annotations

import json
from typing import Annotated, Literal, Optional

import msgspec

from analysis.contract.base import ContractError

# error kinds (``Record.error_kind``)
ERROR_KINDS = (
    "http",            # non-2xx status (http_status says which)
    "timeout",         # no complete answer within api.timeout_s
    "connection",      # refused, reset, dropped mid-stream
    "protocol",        # the server broke HTTP/SSE/JSON (bad framing, not SSE, bad JSON, bad encoding)
    "too_large",       # the answer exceeded an api.limits bound (headers, one event, body, events)
    "redirect",        # a 3xx answer, not followed (api.follow_redirects); its Location in error
    "server_error",    # an error event inside a 200 stream
    "incomplete",      # stream ended without [DONE] / finish_reason
    "cancelled",       # the run was interrupted before the request ended
    "client",          # a fault of loadgen itself (never the server's)
    "rate_limited",    # HTTP 429 (retry_after_s: the server's Retry-After, when it sent one)
    "aborted",         # load.cancel: the client hung up on purpose (status "aborted")
)
OLD_KINDS = ("malformed",)   # written by older versions (now "protocol"); still read
PHASES = ("warmup", "measured", "probe_alone", "probe")
STATUSES = ("ok", "error", "cancelled", "pending", "aborted")

_ENCODE = msgspec.json.Encoder().encode


def _d(t, text: str):
    return Annotated[t, msgspec.Meta(description=text)]


NS = Optional[int]
MS = Optional[float]


class ServerTiming(msgspec.Struct, gc=False):
    """The server's own span of one request (OTLP, joined by trace id after the load:
    analysis.server.spans_join), in milliseconds; null: the span did not say."""
    queue_ms: _d(MS, "gen_ai.latency.time_in_queue") = None
    prefill_ms: _d(MS, "gen_ai.latency.time_in_model_prefill") = None
    decode_ms: _d(MS, "gen_ai.latency.time_in_model_decode") = None
    server_ttft_ms: _d(MS, "gen_ai.latency.time_to_first_token") = None
    server_e2e_ms: _d(MS, "gen_ai.latency.e2e") = None
    scheduler_ms: _d(MS, "gen_ai.latency.time_in_scheduler") = None
    source: _d(str, "where the span came from: otlp-protobuf | otlp-json") = "otlp"


class Record(msgspec.Struct, gc=False):
    """One line of records.jsonl (one request). Built once per request on the hot path (a
    Struct: a fraction of a dataclass's construction cost), mutated as the request goes."""
    id: _d(int, "request index in the run (warm-up first)")
    phase: _d(Literal["warmup", "measured", "probe_alone", "probe"],
              "probe_alone / probe: load.probe's side stream (probe_stream.jsonl only)")
    scheduled_at_ns: _d(NS, "when the schedule says it should be sent") = None
    sent_at_ns: _d(NS, "just before the request bytes are written") = None
    first_chunk_at_ns: _d(NS, "any data event (role-only included)") = None
    first_token_at_ns: _d(NS, "first chunk with n_tokens > 0") = None
    end_at_ns: _d(NS, "last byte read, or the failure") = None
    chunks: _d(list[tuple[int, int]], "every data event as [arrival_ns, n_tokens], up to "
               "api.limits.max_chunk_stamps (65,536); the rest counted in chunks_unstamped") = []
    status: Literal["ok", "error", "cancelled", "pending", "aborted"] = "pending"
    http_status: Optional[int] = None
    error_kind: _d(Optional[str], "one of: " + ", ".join(ERROR_KINDS + OLD_KINDS)
                   + " (a string: newer kinds still read)") = None
    error: Optional[str] = None
    prompt_tokens: Optional[int] = None
    prompt_tokens_source: _d(Optional[str], "usage | workload") = None
    output_tokens: Optional[int] = None
    output_tokens_source: _d(Optional[str], "usage | chunks") = None
    usage_output_tokens: Optional[int] = None
    chunk_output_tokens: Optional[int] = None
    token_count_mismatch: _d(Optional[bool], "usage and chunk count disagree") = None
    requested_output_tokens: Optional[int] = None
    workload_prompt_tokens: Optional[int] = None
    finish_reason: Optional[str] = None
    output_chars: Optional[int] = None
    worker: Optional[str] = None
    # a request that failed on a reused keep-alive connection before any byte of the answer
    # (write failed, or the peer closed before the status line) is sent once more on a fresh
    # connection: sent_at_ns is then that second attempt, first_sent_at_ns the first one
    retries: int = 0
    first_sent_at_ns: _d(NS, "the first attempt's send (a stale-connection retry)") = None
    retry_error: _d(Optional[str], "why the first attempt failed") = None
    # wire transport: reads that carried more than one token chunk (every chunk of such a read
    # but the last got that read's stamp, so may be late); None on the aiohttp transport
    coalesced_reads: Optional[int] = None
    # a stream longer than api.limits.max_chunk_stamps: the chunks past the cap were counted,
    # not stamped (ITL and chunk gaps come from the kept stamps; every token is in the counts)
    chunks_unstamped: _d(Optional[int], "data events past the stamp cap, counted but not kept "
                         "in chunks (null: every one kept)") = None
    chunks_unstamped_tokens: _d(Optional[int], "output tokens of those events (in "
                                "chunk_output_tokens)") = None
    # multi-turn sessions (loadgen.engine.aio.sessions): which conversation, which turn (1-based)
    session_id: Optional[str] = None
    turn: Optional[int] = None
    # reasoning models: the first chunk with NON-reasoning output (content, text, tool calls);
    # tokens of the reasoning-only chunks by the chunk count (None: no reasoning streamed)
    first_answer_at_ns: NS = None
    reasoning_tokens: Optional[int] = None
    output_text: _d(Optional[str], "the answer's text (reasoning excluded), only if asked") = None
    inputs: _d(Optional[int], "embeddings: inputs in the request (None for completions "
               "and chat)") = None
    input_images: _d(Optional[int], "workload.images: images sent") = None
    target_url: _d(Optional[str], "target.urls: the replica it was sent to") = None
    # tools / response_format (loadgen.client.structured, checked after the stream)
    tool_calls: _d(Optional[int], "tool calls in the answer (0: tools offered, none called; "
                   "None: no tools offered)") = None
    tool_args_parsed: _d(Optional[bool], "the final tool call's arguments parse as JSON") = None
    tool_args_valid: _d(Optional[bool], "... and validate against that tool's parameters "
                        "schema") = None
    json_parsed: _d(Optional[bool], "api.response_format: the answer's text parses as "
                    "JSON") = None
    json_valid: _d(Optional[bool], "... and validates against the schema (json_object: is an "
                   "object)") = None
    structured_error: _d(Optional[str], "the first tool-call / JSON problem") = None
    model: _d(Optional[str], "api.models (several models / LoRA adapters): the model this "
              "request asked for; None with one model") = None
    correct: _d(Optional[bool], "workload.dataset: the answer matched its expected value "
                "(None: not checkable: failed, cancelled, or cut while it could still match)") = None
    cached_tokens: _d(Optional[int], "prompt tokens the server served from its prefix cache "
                      "(usage.prompt_tokens_details.cached_tokens, Responses: input_tokens_details); "
                      "None: the server did not say") = None
    input_audio_s: _d(Optional[float], "api.endpoint transcriptions: seconds of audio sent "
                      "(workload.audio)") = None
    # rate limits (loadgen.client.retry): the server's Retry-After of a 429/503 answer, in
    # seconds; api.retry: attempts sent (1: no retry; null: never sent) and, when api.retry is
    # on, each attempt as [http_status or null, sent_at_ns, end_at_ns or null, error_kind or null]
    retry_after_s: _d(Optional[float], "Retry-After of a 429/503 answer, seconds") = None
    attempts: _d(Optional[int], "api.retry: attempts sent (null: never sent)") = None
    attempt_log: _d(Optional[list[tuple[Optional[int], int, Optional[int], Optional[str]]]],
                    "api.retry: [http_status, sent_at_ns, end_at_ns, error_kind] per "
                    "attempt") = None
    # server_traces (docs/server-traces.md): the W3C trace id sent in this request's
    # traceparent (loadgen.client.trace_context), and the server's span joined to it
    trace_id: _d(Optional[str], "32-hex W3C trace id sent in traceparent (api.traceparent)") = None
    server_timing: _d(Optional[ServerTiming], "the server's span of this request (server_traces), "
                      "ms") = None

    def to_json(self) -> str:
        """One JSON line (no newline), the fields in order; non-ASCII text stays UTF-8. A text
        msgspec refuses (a lone surrogate) goes through json.dumps (same keys, same order)."""
        try:
            return _ENCODE(self).decode("utf-8")
        except (TypeError, ValueError, UnicodeError, OverflowError):
            return json.dumps(self.as_dict(), separators=(",", ":"))

    def as_dict(self) -> dict:
        """The fields as a dict, in order (shallow: chunks is the same list)."""
        return {f: getattr(self, f) for f in self.__struct_fields__}

    @property
    def __dict__(self) -> dict:      # vars(rec): a dataclass's view (a copy), not a mapping shim
        return self.as_dict()

    @classmethod
    def read(cls, data, where: str = ""):
        """``data`` (a JSON dict, or a Record already) as a Record; ContractError naming the
        field that does not fit."""
        if isinstance(data, Record):
            return data
        try:
            return msgspec.convert(data, cls)
        except msgspec.ValidationError as e:
            raise ContractError(problem_line(e, where or "record")) from None


FIELDS = Record.__struct_fields__


class ClosedRecord(Record, forbid_unknown_fields=True, gc=False):
    """The same record, refusing keys outside the contract (validate_run_dir, written=True)."""


def problem_line(e: msgspec.ValidationError, where: str) -> str:
    """msgspec's "Expected `int`, got `str` - at `$.id`" as "WHERE: id: Expected `int`, got
    `str`"; an unknown key as "WHERE: KEY: not in the contract"."""
    text = str(e)
    msg, _, at = text.partition(" - at `")
    loc = at.rstrip("`").removeprefix("$").lstrip(".") or "(top)"
    if msg.startswith("Object contains unknown field `"):
        return f"{where}: {msg.split('`')[1]}: not in the contract"
    return f"{where}: {loc}: {msg}"


RunRecord = Record   # the name the contract used before the one definition
