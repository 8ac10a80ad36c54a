"""--otlp-endpoint URL: one OTLP span per answered request, with KNOWN values (the truth).

    a request carrying a valid W3C ``traceparent`` ─► the answer (handler.py) ─► its span, in that
    trace (parentSpanId = the caller's span id; its own spanId), with vLLM's attribute names
    (vllm/tracing, seconds):
        time_in_queue         ttft_s × (the trace id's last byte / 255) / 2      (or calib.queue_ms)
        time_in_model_prefill (ttft_s − queue) / 2                               (or calib.prefill_ms)
        time_to_first_token   ttft_ms (the request's setting)
        e2e                   arrival ─► the handler's return, as measured here
        time_in_model_decode  e2e − time_to_first_token (≥ 0)
        time_in_scheduler     queue / 4
    ─► OTLP/JSON POST to URL from a background task (at most MAX_PENDING in flight; the rest
       counted in ``dropped``), never holding the answer ─► GET /calib/spans: what was sent, per
       trace id (the truth a test compares each record's ``server_timing`` with)

No traceparent (or an invalid one): no span. Imports aiohttp and the standard library only.
"""
from __future__ import annotations

import asyncio
import collections
import json
import os
import re
import time
from typing import Optional

import aiohttp

_TP = re.compile(r"00-([0-9a-f]{32})-([0-9a-f]{16})-[0-9a-f]{2}\Z")
MAX_PENDING = 1024
SENT_MAX = 200_000


def parse_traceparent(value: Optional[str]) -> Optional[tuple[str, str]]:
    """(trace id, parent span id) of a valid version-00 ``traceparent``, else None (W3C: an
    all-zero id is invalid)."""
    if not isinstance(value, str):
        return None
    m = _TP.match(value.strip().lower())
    if m is None or not int(m.group(1), 16) or not int(m.group(2), 16):
        return None
    return m.group(1), m.group(2)


def truth(trace_id: str, c: dict, e2e_s: float) -> dict:
    """The span's values in seconds (module doc), from the request's settings ``c``."""
    ttft = float(c.get("ttft_ms") or 0.0) / 1e3
    q = c.get("queue_ms")
    queue = float(q) / 1e3 if q is not None else ttft * (int(trace_id[-2:], 16) / 255) / 2
    p = c.get("prefill_ms")
    prefill = float(p) / 1e3 if p is not None else (ttft - queue) / 2
    return {"gen_ai.latency.time_in_queue": queue,
            "gen_ai.latency.time_in_model_prefill": prefill,
            "gen_ai.latency.time_to_first_token": ttft,
            "gen_ai.latency.e2e": e2e_s,
            "gen_ai.latency.time_in_model_decode": max(0.0, e2e_s - ttft),
            "gen_ai.latency.time_in_scheduler": queue / 4}


def export_json(trace_id: str, parent: str, attrs: dict, start_ns: int, end_ns: int) -> bytes:
    """One span as an OTLP/JSON ExportTraceServiceRequest."""
    span = {"traceId": trace_id, "spanId": os.urandom(8).hex(), "parentSpanId": parent,
            "name": "llm_request", "kind": 2, "startTimeUnixNano": str(start_ns),
            "endTimeUnixNano": str(end_ns),
            "attributes": [{"key": k, "value": {"doubleValue": v}} for k, v in attrs.items()]}
    return json.dumps({"resourceSpans": [{
        "resource": {"attributes": [{"key": "service.name",
                                     "value": {"stringValue": "servers.calib"}}]},
        "scopeSpans": [{"scope": {"name": "servers.calib"}, "spans": [span]}]}]}).encode()


class SpanSender:
    """Posts each answered request's span to ``endpoint`` (module doc)."""

    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.sent: collections.OrderedDict = collections.OrderedDict()  # trace id ─► attrs
        self.pending: set = set()
        self.dropped = 0
        self.failed = 0
        self._session: Optional[aiohttp.ClientSession] = None

    def wrap(self, handler, settings):
        """``handler`` (a route) with a span after each answer; ``settings(body)`` gives the
        request's calib settings (DEFAULTS ◄ flags ◄ the body's ``calib``)."""
        async def traced(request):
            t0, wall0 = time.perf_counter_ns(), time.time_ns()
            resp = await handler(request)
            ctx = parse_traceparent(request.headers.get("traceparent"))
            if ctx is not None:
                try:
                    body = json.loads(await request.read())
                except ValueError:
                    body = {}
                c = settings(body if isinstance(body, dict) else {})
                e2e = (time.perf_counter_ns() - t0) / 1e9
                self.emit(ctx, truth(ctx[0], c, e2e), wall0, wall0 + int(e2e * 1e9))
            return resp
        return traced

    def emit(self, ctx: tuple, attrs: dict, start_ns: int, end_ns: int) -> None:
        self.sent[ctx[0]] = attrs
        while len(self.sent) > SENT_MAX:
            self.sent.popitem(last=False)
        if len(self.pending) >= MAX_PENDING:
            self.dropped += 1
            return
        t = asyncio.get_running_loop().create_task(
            self._post(export_json(ctx[0], ctx[1], attrs, start_ns, end_ns)))
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
        if self.pending:
            await asyncio.wait(list(self.pending), timeout=5)
        if self._session is not None:
            await self._session.close()
