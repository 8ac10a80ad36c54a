"""W3C trace context on every request: the ONE rule, shared by every engine and transport.

    TraceContext.of(api) (once per Client / Locust worker: a random 64-bit run prefix)
        ─► stamp(headers, rec) per request, where the headers are built:
              headers + ``traceparent: 00-<prefix><id as 16 hex>-<span id>-01`` (sampled)
              rec.trace_id = the 32-hex trace id (records.jsonl)
        ─► the server (vLLM, servers.calib) puts its span in that trace
        ─► analysis.server.spans_join: span ─► record by ``trace_id``

The trace id is the run prefix (8 random bytes drawn once per sending process: unique per run
and per --procs child / Locust worker without any plumbing) followed by the request id; the join
reads the id back from each record, so no two processes need the same prefix. The parent span id
is the request id + 1 (never zero, as W3C asks). ``tracestate`` is not sent. Off with the
scenario's ``api.traceparent: false`` (a server that rejects unknown headers), or when
``api.headers`` sets a traceparent of its own (sent as given, unjoined): then ``stamp``
returns ``headers`` itself and the record keeps no trace id. Per request: one dict copy and two
f-strings; nothing else on the sending path.
"""
from __future__ import annotations

import os
import re
from typing import Any, Optional

HEADER = "traceparent"
_MASK = 0xFFFFFFFFFFFFFFFF


class TraceContext:
    """One sender's trace context: ``on`` (api.traceparent) and its 16-hex run prefix."""

    __slots__ = ("on", "prefix")

    def __init__(self, on: bool = True, prefix: Optional[str] = None):
        self.on = bool(on)
        p = prefix if prefix is not None else os.urandom(8).hex()
        if not re.fullmatch(r"[0-9a-f]{16}", p) or int(p, 16) == 0:
            raise ValueError(f"trace prefix: 16 lower-case hex digits, not all zero (got {p!r})")
        self.prefix = p

    @classmethod
    def of(cls, api: Any) -> "TraceContext":
        """From anything with the scenario's ``api.traceparent`` (default on) and ``headers``:
        off as well when api.headers sets its own ``traceparent`` (the user's wins, unjoined)."""
        own = any(k.lower() == HEADER for k in (getattr(api, "headers", None) or {}))
        return cls(getattr(api, "traceparent", True) and not own)

    def trace_id(self, request_id: int) -> str:
        return f"{self.prefix}{request_id & _MASK:016x}"

    def stamp(self, headers: dict, rec) -> dict:
        """``headers`` with this request's ``traceparent`` (a copy) and ``rec.trace_id`` set;
        off: ``headers`` itself."""
        if not self.on:
            return headers
        i = rec.id & _MASK
        tid = rec.trace_id = f"{self.prefix}{i:016x}"
        out = dict(headers)
        out[HEADER] = f"00-{tid}-{(i + 1) & _MASK or 1:016x}-01"     # span_id(i), inlined
        return out


def span_id(request_id: int) -> str:
    """The parent span id sent for ``request_id``: loadgen's own span of that request
    (--otlp-endpoint: loadgen/run/client_spans.py) has this id, so the server's span is its child."""
    return f"{((request_id & _MASK) + 1) & _MASK or 1:016x}"
