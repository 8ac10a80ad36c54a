"""A server's own OpenTelemetry spans, one per traced request, posted as OTLP/JSON (shared by
servers.calib and servers.jax; loadgen's receiver: analysis/server/otlp_receiver.py).

    a request's W3C ``traceparent`` header ─► parse_traceparent: (trace id, caller's span id) or None
    the request ends ─► SpanSender.emit(ctx, attributes, start, end) on the server's event loop
        ─► one span in the caller's trace (parentSpanId = the caller's span id, a fresh spanId),
           vLLM's attribute names (``gen_ai.latency.*``, seconds; vllm/tracing)
        ─► an OTLP/JSON ExportTraceServiceRequest POSTed to the endpoint by a background task:
           at most MAX_PENDING posts in flight, the rest counted in ``dropped``; a failed post is
           counted in ``failed``; the answer never waits for a post
        ─► ``sent``: the last SENT_MAX spans' attributes by trace id (what a test compares with)

No traceparent, or an invalid one (W3C: version 00, 32 + 16 lowercase hex, not all zero): no span.
Imports aiohttp and the standard library only.
"""
from __future__ import annotations

import asyncio
import collections
import json
import os
import re
from typing import Optional

import aiohttp

_TP = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}\Z")
MAX_PENDING = 1024
SENT_MAX = 200_000


def parse_traceparent(value: Optional[str]) -> Optional[tuple[str, str]]:
    """(trace id, parent span id) of a valid version-00 ``traceparent``, else None (W3C: an
    all-zero id is invalid)."""
    if not isinstance(value, str) or len(value) > 128:
        return None
    m = _TP.match(value.strip().lower())
    if m is None or not int(m.group(1), 16) or not int(m.group(2), 16):
        return None
    return m.group(1), m.group(2)


def export_json(service: str, trace_id: str, parent: str, attrs: dict, start_ns: int,
                end_ns: int) -> bytes:
    """One span as an OTLP/JSON ExportTraceServiceRequest from ``service``."""
    span = {"traceId": trace_id, "spanId": os.urandom(8).hex(), "parentSpanId": parent,
            "name": "llm_request", "kind": 2, "startTimeUnixNano": str(start_ns),
            "endTimeUnixNano": str(end_ns),
            "attributes": [{"key": k, "value": {"doubleValue": v}} for k, v in attrs.items()]}
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": service}}]},
        "scopeSpans": [{"scope": {"name": service}, "spans": [span]}]}]}).encode()


class SpanSender:
    """Posts one span per traced request to ``endpoint`` (module doc); call ``emit`` on the
    server's event loop, ``close`` before the loop ends."""

    def __init__(self, endpoint: str, service: str):
        self.endpoint, self.service = endpoint, service
        self.sent: collections.OrderedDict = collections.OrderedDict()  # trace id ─► attrs
        self.pending: set = set()
        self.dropped = 0
        self.failed = 0
        self._session: Optional[aiohttp.ClientSession] = None

    def emit(self, ctx: tuple, attrs: dict, start_ns: int, end_ns: int) -> None:
        """Queue the span of the request whose traceparent gave ``ctx``; wall-clock ns bounds."""
        self.sent[ctx[0]] = attrs
        while len(self.sent) > SENT_MAX:
            self.sent.popitem(last=False)
        if len(self.pending) >= MAX_PENDING:
            self.dropped += 1
            return
        t = asyncio.get_running_loop().create_task(
            self._post(export_json(self.service, ctx[0], ctx[1], attrs, start_ns, end_ns)))
        self.pending.add(t)
        t.add_done_callback(self.pending.discard)

    async def _post(self, data: bytes) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10))
        try:
            async with self._session.post(self.endpoint, data=data,
                                          headers={"Content-Type": "application/json"}) as r:
                if r.status != 200:
                    self.failed += 1
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError):
            self.failed += 1

    def describe(self) -> dict:
        return {"endpoint": self.endpoint, "sent": dict(self.sent), "dropped": self.dropped,
                "failed": self.failed, "pending": len(self.pending)}

    async def close(self) -> None:
        """Wait up to 5 s for the posts in flight, then close the session."""
        if self.pending:
            await asyncio.wait(list(self.pending), timeout=5)
        if self._session is not None:
            await self._session.close()
