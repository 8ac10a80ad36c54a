"""--otlp-traces-endpoint URL: the JAX server's own span of every traced request (vLLM's flag and
attribute names), so loadgen can say where each request's time went on this server too.

    POST /v1/chat/completions | /v1/completions | /v1/responses with a W3C ``traceparent``
        ─► api.py: RequestTiming.trace = servers.otlp.parse_traceparent(header)
        ─► metrics.ServerMetrics.on_finish(timing) ─► its hooks ─► RequestSpans.on_finish
        ─► attributes(timing): seconds, from the server's perf_counter stamps (metrics.py)
               time_in_queue          admitted to a slot − arrival      (the orchestrator's stamp)
               time_in_model_prefill  first token − admitted
               time_to_first_token    first token − arrival
               time_in_model_decode   last token − first token
               e2e                    end − arrival
           (a stamp the request never reached, e.g. no token before an abort: the attribute is
           left out, never 0; time_in_scheduler is not measured here: left out)
        ─► servers/otlp.py SpanSender: one OTLP/JSON span in the caller's trace, posted off the
           answer's path; wall-clock bounds = perf_counter stamps + one offset read at the end

No traceparent, no span. The span leaves from the event loop; the engine thread is not touched.
"""
from __future__ import annotations

import time
from typing import Optional

from servers.jax.metrics import RequestTiming
from servers.otlp import SpanSender

NS = 1e-9


def attributes(t: RequestTiming) -> dict:
    """vLLM's ``gen_ai.latency.*`` attributes (seconds) of one finished request; a phase whose
    stamps are missing is absent."""
    out: dict = {}

    def put(name: str, a: Optional[int], b: Optional[int]) -> None:
        if a is not None and b is not None:
            out[f"gen_ai.latency.{name}"] = max(0, b - a) * NS

    put("time_in_queue", t.arrival_ns, t.scheduled_ns)
    put("time_in_model_prefill", t.scheduled_ns, t.first_token_ns)
    put("time_to_first_token", t.arrival_ns, t.first_token_ns)
    put("time_in_model_decode", t.first_token_ns, t.last_token_ns)
    put("e2e", t.arrival_ns, t.end_ns)
    return out


class RequestSpans:
    """The ServerMetrics hook that sends a span per traced request (module doc)."""

    def __init__(self, sender: SpanSender):
        self.sender = sender

    def on_finish(self, t: RequestTiming) -> None:
        if t.trace is None or t.end_ns is None:
            return
        offset = time.time_ns() - time.perf_counter_ns()   # perf_counter ─► wall clock
        self.sender.emit(t.trace, attributes(t), t.arrival_ns + offset, t.end_ns + offset)
