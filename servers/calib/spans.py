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
    ─► servers/otlp.py's SpanSender (OTLP/JSON POST from a background task, never holding the
       answer) ─► GET /calib/spans: what was sent, per trace id (the truth a test compares each
       record's ``server_timing`` with)

No traceparent (or an invalid one): no span. Imports aiohttp and the standard library only.
"""
from __future__ import annotations

import json
import time

from servers.otlp import SpanSender, parse_traceparent


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


def traced(sender: SpanSender, handler, settings):
    """``handler`` (a route) with a span to ``sender`` after each answer; ``settings(body)`` gives
    the request's calib settings (DEFAULTS ◄ flags ◄ the body's ``calib``)."""
    async def route(request):
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
            sender.emit(ctx, truth(ctx[0], c, e2e), wall0, wall0 + int(e2e * 1e9))
        return resp
    return route
