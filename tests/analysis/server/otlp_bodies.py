"""OTLP trace export bodies for the span tests (protobuf via opentelemetry-proto, and JSON)."""
from __future__ import annotations

import json

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

Q, P, T, E = ("gen_ai.latency.time_in_queue", "gen_ai.latency.time_in_model_prefill",
              "gen_ai.latency.time_to_first_token", "gen_ai.latency.e2e")


def tid(i: int) -> str:
    return f"{0xab:016x}{i:016x}"


def pb(spans: list[tuple[str, dict]], extra_foreign: int = 0) -> bytes:
    """One ExportTraceServiceRequest: a span per (trace id hex, {attribute: value})."""
    req = ExportTraceServiceRequest()
    ss = req.resource_spans.add().scope_spans.add()
    for t, attrs in spans:
        sp = ss.spans.add(trace_id=bytes.fromhex(t), span_id=b"\x01" * 8, name="llm_request")
        for k, v in attrs.items():
            kv = sp.attributes.add(key=k)
            if isinstance(v, bool):
                kv.value.bool_value = v
            elif isinstance(v, float):
                kv.value.double_value = v
            elif isinstance(v, int):
                kv.value.int_value = v
            else:
                kv.value.string_value = str(v)
    for _ in range(extra_foreign):
        ss.spans.add(trace_id=b"\x02" * 16, span_id=b"\x01" * 8, name="http")
    return req.SerializeToString()


def js(spans: list[tuple[str, dict]]) -> bytes:
    def val(v):
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, float):
            return {"doubleValue": v if v == v and abs(v) != float("inf") else str(v)}
        return {"intValue": str(v)} if isinstance(v, int) else {"stringValue": v}
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [
        {"traceId": t, "spanId": "01" * 8,
         "attributes": [{"key": k, "value": val(v)} for k, v in a.items()]}
        for t, a in spans]}]}]}).encode()


GOOD = {Q: 0.002, P: 0.003, T: 0.006, E: 0.020}
