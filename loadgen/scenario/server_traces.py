"""The scenario's ``server_traces`` section: receive the server's own per-request spans (OTLP).

    server_traces: {otlp_port: 4318}   (0: any free port, printed at the start)
        ─► loadgen.run.server_traces starts analysis.server.otlp_receiver on host:otlp_port for
           the run, waits at most wait_s after the load for late spans (returning as soon as
           none came for quiet_s), joins them to the records by trace id (docs/server-traces.md)

``keep_raw_mb: N`` also keeps the server's export bodies as they came (server_spans.raw.jsonl, at
most N MB; analysis/server/spans_replay.py reads them again).

Needs ``api.traceparent`` on (the default): the trace id is what joins a span to its record.
"""
from __future__ import annotations

from pydantic import Field

from loadgen.scenario.strict import Strict


class ServerTraces(Strict):
    otlp_port: int = Field(0, ge=0, le=65535)          # 0: any free port (printed)
    host: str = "127.0.0.1"                             # where the receiver listens
    wait_s: float = Field(5.0, ge=0, le=600)            # late spans: at most this long
    quiet_s: float = Field(0.5, ge=0, le=60)            # ... or until none came for this long
    max_body_mb: float = Field(16.0, gt=0, le=1024)     # one export request
    max_spans: int = Field(1_000_000, ge=1, le=10_000_000)  # kept per run; the rest counted
    keep_raw_mb: float = Field(0, ge=0, le=4096)        # > 0: the bodies as sent, in server_spans.raw.jsonl
