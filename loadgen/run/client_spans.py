"""``loadgen run --otlp-endpoint URL``: loadgen's own span of every request, to your collector.

    records.jsonl or records.arrow (after the run; never on the sending path) ─► one CLIENT span per record with
        a trace id: traceId = record.trace_id, spanId = the parent id its traceparent carried
        (trace_context.span_id), so the server's span (vLLM honours the traceparent) is its
        child and Jaeger / Tempo / Phoenix show both in one trace
        start = first send (or the schedule), end = end_at; events scheduled / sent /
        first_token / end; attributes: loadgen.request.id, phase, status, error_kind,
        http.response.status_code, gen_ai.usage.input_tokens / output_tokens, loadgen.ttft_ms
    ─► OTLP/JSON POST to URL in batches of BATCH spans (urllib, a timeout per batch); the first
       failure stops the export and is one warning line, never the run's exit code

Times: the records' perf_counter_ns (CLOCK_MONOTONIC, this host) + (time_ns − perf_counter_ns)
read once at export: wall-clock nanoseconds as OTLP wants them.
"""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator, Optional

import msgspec

from analysis.contract.record import Record
from analysis.contract.records import read_table
from analysis.contract.rundir import records_path
from loadgen.client.trace_context import span_id

BATCH = 512
TIMEOUT_S = 10.0
_dec = msgspec.json.Decoder(Record).decode      # the record type itself (after the run)


def _attr(key: str, v) -> dict:
    if isinstance(v, bool):
        return {"key": key, "value": {"boolValue": v}}
    if isinstance(v, int):
        return {"key": key, "value": {"intValue": str(v)}}
    if isinstance(v, float):
        return {"key": key, "value": {"doubleValue": v}}
    return {"key": key, "value": {"stringValue": str(v)}}


def span_of(r: Record, offset_ns: int) -> Optional[dict]:
    """One record's span (OTLP/JSON), or None without a trace id or any time."""
    start = r.first_sent_at_ns or r.sent_at_ns or r.scheduled_at_ns
    if not r.trace_id or start is None:
        return None
    end = r.end_at_ns if r.end_at_ns is not None else start
    events = [{"name": n, "timeUnixNano": str(t + offset_ns)}
              for n, t in (("scheduled", r.scheduled_at_ns), ("sent", r.sent_at_ns),
                           ("first_token", r.first_token_at_ns), ("end", r.end_at_ns))
              if t is not None]
    attrs = {"loadgen.request.id": r.id, "loadgen.phase": r.phase, "loadgen.status": r.status,
             "error.type": r.error_kind, "http.response.status_code": r.http_status,
             "gen_ai.usage.input_tokens": r.prompt_tokens,
             "gen_ai.usage.output_tokens": r.output_tokens,
             "loadgen.ttft_ms": (r.first_token_at_ns - r.sent_at_ns) / 1e6
             if r.first_token_at_ns is not None and r.sent_at_ns is not None else None}
    return {"traceId": r.trace_id, "spanId": span_id(r.id), "name": "loadgen.request",
            "kind": 3, "startTimeUnixNano": str(start + offset_ns),
            "endTimeUnixNano": str(max(end, start) + offset_ns), "events": events,
            "attributes": [_attr(k, v) for k, v in attrs.items() if v is not None],
            "status": {"code": 1 if r.status == "ok" else 2}}


def spans(path: Path, offset_ns: int) -> Iterator[dict]:
    if path.suffix == ".arrow":                  # output.records: arrow (analysis/contract/columnar)
        for r in read_table(path).records:
            s = span_of(r, offset_ns)
            if s is not None:
                yield s
        return
    with open(path, "rb") as f:
        for line in f:
            try:
                s = span_of(_dec(line), offset_ns)
            except (msgspec.DecodeError, msgspec.ValidationError):
                continue
            if s is not None:
                yield s


def body(batch: list[dict]) -> bytes:
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [_attr("service.name", "loadgen")]},
        "scopeSpans": [{"scope": {"name": "loadgen"}, "spans": batch}]}]}).encode()


def export(run_dir: str | Path, url: str, batch: int = BATCH,
           timeout_s: float = TIMEOUT_S) -> dict:
    """Every record's span posted to ``url``; {spans, error} (error: None, or one line)."""
    offset = time.time_ns() - time.perf_counter_ns()
    sent, buf = 0, []
    path = records_path(run_dir)
    if not path.is_file():
        return {"spans": 0, "error": f"{path}: no records"}

    def post(b: list[dict]) -> None:
        req = urllib.request.Request(url, data=body(b), method="POST",
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout_s) as r:
            r.read(1 << 16)
    try:
        for s in spans(path, offset):
            buf.append(s)
            if len(buf) >= batch:
                post(buf)
                sent, buf = sent + len(buf), []
        if buf:
            post(buf)
            sent += len(buf)
    except (urllib.error.URLError, OSError, ValueError) as e:
        return {"spans": sent, "error": f"--otlp-endpoint {url}: {getattr(e, 'reason', e)}"}
    return {"spans": sent, "error": None}
