"""The server's per-request spans: an OTLP/HTTP trace export body ─► checked timings by trace id.

    POST /v1/traces body (protobuf ExportTraceServiceRequest, or its OTLP/JSON form)
        ─► decode(body, json=…) ─► (trace id hex, {attribute: value}) per span, at most
           ``max_spans`` (the rest counted in ``Decoded.dropped``); a body that does not parse is
           one reason, never an exception
        ─► timing(attrs) ─► ServerTiming fields in ms, via sanity.spans / sanity.gauge: a NaN,
           a negative or a queue + prefill above the server TTFT is a reason, never a figure
    used by otlp_receiver.py (on its own thread) and spans_join.py (after the load).

Attribute names and units are vLLM's (vllm/tracing: SpanAttributes, seconds as doubles); a span
carrying none of them (another component's span in the same trace) is counted as ``foreign``.
"""
from __future__ import annotations

import json
from typing import Any, NamedTuple, Optional

from analysis.server import sanity

# ServerTiming field ─► vLLM's span attribute (seconds)
ATTRS = {
    "queue_ms": "gen_ai.latency.time_in_queue",
    "prefill_ms": "gen_ai.latency.time_in_model_prefill",
    "decode_ms": "gen_ai.latency.time_in_model_decode",
    "server_ttft_ms": "gen_ai.latency.time_to_first_token",
    "server_e2e_ms": "gen_ai.latency.e2e",
    "scheduler_ms": "gen_ai.latency.time_in_scheduler",
}
_WANTED = frozenset(ATTRS.values())
MAX_SPANS = 1_000_000          # spans kept per run (receiver); the rest are counted, not kept


class Decoded(NamedTuple):
    spans: list                 # [(trace_id_hex, {attr: value})] with at least one wanted attr
    foreign: int = 0            # spans without any gen_ai.latency attribute
    dropped: int = 0            # spans past ``max_spans``
    reason: Optional[str] = None    # the body did not parse


def _any_value(v: Any) -> Any:
    """An OTLP AnyValue (protobuf message) as a Python value (doubles, ints, strings)."""
    which = v.WhichOneof("value")
    return getattr(v, which) if which in ("double_value", "int_value", "string_value",
                                          "bool_value") else None


def _json_value(v: Any) -> Any:
    if not isinstance(v, dict):
        return None
    if "doubleValue" in v:
        d = v["doubleValue"]
        if isinstance(d, str):          # OTLP/JSON writes NaN / Infinity as strings
            try:
                return float(d)
            except ValueError:
                return d
        return d
    if "intValue" in v:                 # int64 as a JSON string (or a number)
        try:
            return int(v["intValue"])
        except (TypeError, ValueError):
            return v["intValue"]
    for k in ("stringValue", "boolValue"):
        if k in v:
            return v[k]
    return None


def decode(body: bytes, *, as_json: bool = False, max_spans: int = MAX_SPANS) -> Decoded:
    """The spans of one export body (see the module doc)."""
    try:
        return _decode_json(body, max_spans) if as_json else _decode_pb(body, max_spans)
    except Exception as e:          # a hostile body: one reason, whatever the parser raised
        return Decoded([], reason=f"the body is not an OTLP trace export ({type(e).__name__})")


def _decode_pb(body: bytes, max_spans: int) -> Decoded:
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest)
    req = ExportTraceServiceRequest()
    req.ParseFromString(body)
    out, foreign, seen = [], 0, 0
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for sp in ss.spans:
                seen += 1
                if seen > max_spans:
                    continue
                attrs = {kv.key: _any_value(kv.value) for kv in sp.attributes
                         if kv.key in _WANTED}
                if attrs:
                    out.append((sp.trace_id.hex(), attrs))
                else:
                    foreign += 1
    return Decoded(out, foreign, max(0, seen - max_spans))


def _decode_json(body: bytes, max_spans: int) -> Decoded:
    doc = json.loads(body)
    out, foreign, seen = [], 0, 0
    for rs in doc.get("resourceSpans") or ():
        for ss in rs.get("scopeSpans") or ():
            for sp in ss.get("spans") or ():
                seen += 1
                if seen > max_spans:
                    continue
                attrs = {a.get("key"): _json_value(a.get("value"))
                         for a in sp.get("attributes") or () if a.get("key") in _WANTED}
                tid = sp.get("traceId")
                if attrs and isinstance(tid, str):
                    out.append((tid.lower(), attrs))
                else:
                    foreign += 1
    return Decoded(out, foreign, max(0, seen - max_spans))


def timing(attrs: dict) -> tuple[Optional[dict], Optional[str]]:
    """A span's attributes (seconds) as ServerTiming fields in ms, or (None, reason): every
    value present a finite number ≥ 0; with queue, prefill and TTFT all present, queue +
    prefill ≤ TTFT + sanity.SPAN_TOLERANCE_S (sanity.spans). A missing attribute is null."""
    out: dict = {}
    for field, name in ATTRS.items():
        v = attrs.get(name)
        if v is None:
            out[field] = None
            continue
        c = sanity.gauge(v, name)
        if not c.ok:
            return None, c.reason
        out[field] = c.value * 1e3
    q, p, t = (attrs.get(ATTRS[k]) for k in ("queue_ms", "prefill_ms", "server_ttft_ms"))
    if q is not None and p is not None and t is not None:
        c = sanity.spans(q, p, t)
        if not c.ok:
            return None, c.reason
    if all(v is None for v in out.values()):
        return None, "no gen_ai.latency attribute"
    return out, None
