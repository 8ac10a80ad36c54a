"""The per-request record: the one contract between load generation and analysis.

Built in one place (``Record``), timed on one clock (``time.perf_counter_ns``, CLOCK_MONOTONIC on
Linux, so a server process or power sampler on the same host shares it), written as one JSON line
per request by ``RecordWriter`` and flushed as each request ends. ``analysis/`` reads these lines as
plain dicts and never imports this module; docs/architecture.md lists every field.

Times are integers in nanoseconds on that clock; ``None`` means "did not happen".
``chunks`` holds every streamed data event as ``[arrival_ns, n_tokens]``; role-only, usage-only
and empty chunks have ``n_tokens == 0``. The first token is the first chunk with ``n_tokens > 0``.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import msgspec

from loadgen.redact import redact

now_ns = time.perf_counter_ns
_ENCODE = msgspec.json.Encoder().encode

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
)


@dataclass
class Record:
    id: int
    phase: str                              # "warmup" | "measured"
    scheduled_at_ns: Optional[int]          # when the schedule says it should be sent
    sent_at_ns: Optional[int] = None        # just before the request bytes are written
    first_chunk_at_ns: Optional[int] = None  # any data event (role-only included)
    first_token_at_ns: Optional[int] = None  # first chunk with n_tokens > 0
    end_at_ns: Optional[int] = None         # last byte read, or the failure
    chunks: list = field(default_factory=list)  # [[arrival_ns, n_tokens], ...]
    status: str = "pending"                 # "ok" | "error" | "cancelled"
    http_status: Optional[int] = None
    error_kind: Optional[str] = None
    error: Optional[str] = None
    prompt_tokens: Optional[int] = None
    prompt_tokens_source: Optional[str] = None   # "usage" | "workload"
    output_tokens: Optional[int] = None
    output_tokens_source: Optional[str] = None   # "usage" | "chunks"
    usage_output_tokens: Optional[int] = None
    chunk_output_tokens: Optional[int] = None
    token_count_mismatch: Optional[bool] = None  # usage and chunk count disagree
    requested_output_tokens: Optional[int] = None
    workload_prompt_tokens: Optional[int] = None
    finish_reason: Optional[str] = None
    output_chars: Optional[int] = None
    worker: Optional[str] = None
    # a request that failed on a reused keep-alive connection before any byte of the answer
    # (write failed, or the peer closed before the status line) is sent once more on a fresh
    # connection: sent_at_ns is then that second attempt, first_sent_at_ns the first one
    retries: int = 0
    first_sent_at_ns: Optional[int] = None
    retry_error: Optional[str] = None       # why the first attempt failed
    # wire transport: reads that carried more than one token chunk (every chunk of such a read
    # but the last got that read's stamp, so may be late); None on the aiohttp transport
    coalesced_reads: Optional[int] = None
    # multi-turn sessions (loadgen.run.sessions): which conversation, which turn (1-based)
    session_id: Optional[str] = None
    turn: Optional[int] = None
    # reasoning models: the first chunk with NON-reasoning output (content, text, tool calls);
    # tokens of the reasoning-only chunks by the chunk count (None: no reasoning streamed)
    first_answer_at_ns: Optional[int] = None
    reasoning_tokens: Optional[int] = None
    output_text: Optional[str] = None       # the answer's text (reasoning excluded), only if asked
    inputs: Optional[int] = None            # api.endpoint embeddings: inputs in the request
    input_images: Optional[int] = None      # workload.images: images sent with the request
    # target.urls: the replica this request was sent to (None with one target URL)
    target_url: Optional[str] = None
    # tools / response_format (loadgen.client.structured, checked after the stream): tool calls
    # seen; the final call's arguments parse as JSON / fit its tool's parameters; the answer's
    # text parses as JSON / fits response_format's schema; the first problem, one line
    tool_calls: Optional[int] = None
    tool_args_parsed: Optional[bool] = None
    tool_args_valid: Optional[bool] = None
    json_parsed: Optional[bool] = None
    json_valid: Optional[bool] = None
    structured_error: Optional[str] = None

    def to_json(self) -> str:
        """One JSON line (no newline). msgspec encodes ``__dict__`` (not dataclasses.asdict, which
        deep-copies every [t, n] pair) several times faster than json.dumps for a record of
        many chunks; non-ASCII text stays UTF-8 (json.loads gives the same values). A text
        msgspec refuses (a lone surrogate) goes through json.dumps."""
        try:
            return _ENCODE(self.__dict__).decode("utf-8")
        except (TypeError, ValueError, UnicodeError, OverflowError):
            return json.dumps(self.__dict__, separators=(",", ":"))


class RecordWriter:
    """Appends records to ``records.jsonl``, one line each, each line one write (no torn line),
    fsync'd per record with ``fsync=True``. A failed write (disk full, I/O error) cuts the file
    back to its last whole line and raises ``loadgen.run.storage.StorageError``; ``failed`` keeps
    it and every later write raises it again."""

    def __init__(self, path: str | Path, fsync: bool = False, file=None):
        from loadgen.run.storage import LineWriter   # lazy: the client imports this module
        self.path = Path(path)
        self._f = LineWriter(file, self.path.name) if file is not None else LineWriter.open(self.path)
        self._fsync = fsync
        self._lock = threading.Lock()
        self.count = 0

    @property
    def failed(self):
        return self._f.failed

    def write(self, rec: Record) -> None:
        line = (redact(rec.to_json()) + "\n").encode("utf-8")   # no secret, whatever echoed it
        with self._lock:
            self._f.write(line)
            if self._fsync:
                self._f.fsync()
            self.count += 1

    def write_many(self, recs) -> None:
        """Several records in one write (a bulk of cancelled ones); whole lines only on failure."""
        self.write_lines([redact(r.to_json()) for r in recs])

    def write_lines(self, lines: list) -> None:
        """Lines already encoded and redacted (one record each, no newline) in one write; whole
        lines only on failure. The Locust ledger forwards the same lines it writes."""
        data = "".join(line + "\n" for line in lines).encode("utf-8")
        if not data:
            return
        with self._lock:
            before = self._f.lines
            try:
                self._f.write(data)
            finally:
                self.count += self._f.lines - before
            if self._fsync:
                self._f.fsync()

    def close(self) -> None:
        with self._lock:
            self._f.close()

    def __enter__(self) -> "RecordWriter":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_records(path: str | Path) -> list[dict]:
    """Read records.jsonl; a torn last line (killed mid-write) is skipped."""
    out = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue
    return out
