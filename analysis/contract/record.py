"""records.jsonl: one JSON object per request, the fields of loadgen.record.Record.

    loadgen/record.py Record ─► RecordWriter ─► records.jsonl ─► RunRecord (validate_run_dir,
        open_run) ; analysis/metrics reads the same lines as plain dicts (speed)

Times are integer nanoseconds of ``time.perf_counter_ns``; null means "did not happen".
``error_kind`` is a string, not a closed set: the kinds below are the ones known today, and a
newer writer's kind still reads (docs/architecture.md lists each).
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field

from analysis.contract.base import Model

ERROR_KINDS = ("http", "timeout", "connection", "malformed", "server_error", "incomplete",
               "cancelled", "client", "protocol", "redirect", "too_large")
NS = Optional[int]


class RunRecord(Model):
    """One line of records.jsonl."""
    id: int = Field(description="request index in the run (warm-up first)")
    phase: Literal["warmup", "measured", "probe_alone", "probe"] = Field(
        description="probe_alone / probe: load.probe's side stream (probe_stream.jsonl only)")
    scheduled_at_ns: NS = None
    sent_at_ns: NS = None
    first_chunk_at_ns: NS = None
    first_token_at_ns: NS = None
    end_at_ns: NS = None
    chunks: list[tuple[int, int]] = Field(
        default_factory=list, description="every data event as [arrival_ns, n_tokens]")
    status: Literal["ok", "error", "cancelled", "pending"] = "pending"
    http_status: Optional[int] = None
    error_kind: Optional[str] = Field(None, description="one of: " + ", ".join(ERROR_KINDS)
                                      + " (a string: newer kinds still read)")
    error: Optional[str] = None
    prompt_tokens: Optional[int] = None
    prompt_tokens_source: Optional[str] = Field(None, description="usage | workload")
    output_tokens: Optional[int] = None
    output_tokens_source: Optional[str] = Field(None, description="usage | chunks")
    usage_output_tokens: Optional[int] = None
    chunk_output_tokens: Optional[int] = None
    token_count_mismatch: Optional[bool] = None
    requested_output_tokens: Optional[int] = None
    workload_prompt_tokens: Optional[int] = None
    finish_reason: Optional[str] = None
    output_chars: Optional[int] = None
    worker: Optional[str] = None
    retries: int = 0
    first_sent_at_ns: NS = None
    retry_error: Optional[str] = None
    coalesced_reads: Optional[int] = None
    session_id: Optional[str] = None
    turn: Optional[int] = None
    first_answer_at_ns: NS = None
    reasoning_tokens: Optional[int] = None
    output_text: Optional[str] = None
    inputs: Optional[int] = Field(None, description="embeddings: inputs in the request "
                                  "(None for completions and chat)")
    input_images: Optional[int] = Field(None, description="workload.images: images sent")
    target_url: Optional[str] = Field(None, description="target.urls: the replica it was sent to")
    tool_calls: Optional[int] = Field(None, description="tool calls in the answer (0: tools "
                                      "offered, none called; None: no tools offered)")
    tool_args_parsed: Optional[bool] = Field(None, description="the final tool call's arguments "
                                             "parse as JSON")
    tool_args_valid: Optional[bool] = Field(None, description="... and validate against that "
                                            "tool's parameters schema")
    json_parsed: Optional[bool] = Field(None, description="api.response_format: the answer's text "
                                        "parses as JSON")
    json_valid: Optional[bool] = Field(None, description="... and validates against the schema "
                                       "(json_object: is an object)")
    structured_error: Optional[str] = Field(None, description="the first tool-call / JSON problem")
