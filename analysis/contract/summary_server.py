"""summary.json's blocks of what the server said (speculative decoding, its /metrics figures),
typed for the readers.

    analysis.server.spec_decode.spec_decode_summary (+ analysis.metrics.bursts.bursts_block)
        ─► SpecDecode (summary.json "spec_decode") ─► analysis.report.served (report, console)
    analysis.server.metrics.server_metrics_summary ─► ServerMetrics (summary "server_metrics")
        ─► analysis.report.server_metrics (the report's section)

Open blocks: the keys readers use are named and typed (a misspelt one is an AttributeError, not a
silent None), the rest kept as computed. A figure the server did not give is None, never 0.
"""
from __future__ import annotations

from typing import Any, Optional

from pydantic import Field

from analysis.contract.base import Open, SourcedStatus, StatusBlock
from analysis.contract.stats import ChunkStats


class SpecPosition(Open):
    """One draft position: the tokens accepted there, and their share of the drafts."""
    position: int
    accepted_tokens: Optional[int] = None
    acceptance_rate: Optional[float] = None


class SpecClient(StatusBlock):
    """analysis.metrics.bursts.bursts_block: the client's tokens per content chunk."""
    tokens_per_chunk: Optional[ChunkStats] = None
    histogram: Optional[dict[str, int]] = Field(None, description="tokens per chunk: chunks")
    multi_token_chunk_share: Optional[float] = None
    tokens_in_bursts_share: Optional[float] = None
    itl_ms_per_token: Optional[ChunkStats] = None
    itl_ms_per_chunk: Optional[ChunkStats] = None


class SpecDecode(SourcedStatus):
    """Speculative decoding: the server's draft/accept counters over the window (measured, or
    unmeasured with the reason) and the client's tokens per chunk."""
    draft_tokens: Optional[int] = None
    accepted_tokens: Optional[int] = None
    drafts: Optional[int] = None
    acceptance_rate: Optional[float] = None
    mean_acceptance_length: Optional[float] = None
    per_position: Optional[list[SpecPosition]] = None
    client: Optional[SpecClient] = None


class ServerFigure(Open):
    """One figure from the server's /metrics (analysis.server.metrics): its value over the
    window, unit and evidence; a histogram percentile also its bucket and how it was placed."""
    value: Optional[float] = None
    unit: Optional[str] = None
    evidence: Optional[str] = None
    metric: Optional[str] = None
    reason: Optional[str] = None
    count: Optional[Any] = Field(None, description="observations (the server's counter)")
    display: Optional[str] = None
    bound: Optional[str] = Field(None, description="point | upper | lower")
    bucket_ms: Optional[list[Optional[float]]] = None


class ScrapeWindow(Open):
    """The scrapes that bracket the measured window."""
    start_lead_ms: Optional[float] = None
    end_lag_ms: Optional[float] = None
    notes: list[str] = Field(default_factory=list)


class TtftDecomposition(StatusBlock):
    """client TTFT = network/client + server queue + server prefill + server other."""
    client_ttft_mean_ms: Optional[float] = None
    client_requests: Optional[int] = None
    server_requests: Optional[Any] = None
    network_client_ms: Optional[float] = None
    server_queue_ms: Optional[float] = None
    server_prefill_ms: Optional[float] = None
    server_other_ms: Optional[float] = None
    residual_ms: Optional[float] = None
    queue_share: Optional[float] = None


class ServerMetrics(SourcedStatus):
    """summary.json "server_metrics" (analysis.server.metrics.server_metrics_summary)."""
    scrapes: Optional[int] = None
    scrapes_failed: Optional[int] = None
    window: Optional[ScrapeWindow] = None
    figures: dict[str, ServerFigure] = Field(default_factory=dict)
    ttft_decomposition: Optional[TtftDecomposition] = None


class TtftParts(Open):
    """One request's TTFT split (ms): queue + prefill + server_other + rest = client_ttft_ms; the
    slowest 1 % block adds ``requests`` (how many were averaged), a listed request its ``id``."""
    queue_ms: Optional[float] = None
    prefill_ms: Optional[float] = None
    server_other_ms: Optional[float] = None
    rest_ms: Optional[float] = None
    client_ttft_ms: Optional[float] = None
    requests: Optional[int] = None
    id: Optional[int] = None


class TtftSplit(Open):
    """summary ``server_timing.ttft_split``: Stats of each part, the median request (``p50``), the
    mean of the slowest 1 % (``slowest_1pct``), the ten slowest (``slowest``)."""
    p50: Optional[TtftParts] = None
    slowest_1pct: Optional[TtftParts] = None
    slowest: list[TtftParts] = Field(default_factory=list)


class ServerTiming(Open):
    """summary ``server_timing`` (analysis.server.timing_summary): the server's spans joined per
    request; ``status`` "ok" or "n/a: reason"; ``phases`` Stats (ms) per phase."""
    status: str = "n/a"
    joined: Optional[int] = None
    records_traced: Optional[int] = None
    unmatched_spans: Optional[int] = None
    bad_spans: dict[str, int] = Field(default_factory=dict)
    phases: dict[str, ChunkStats] = Field(default_factory=dict)
    ttft_split: TtftSplit = Field(default_factory=TtftSplit)


class ServerSpansFile(Open):
    """run_dir/server_spans.json (loadgen.run.server_traces): the OTLP receiver's and the join's
    counts, read by analysis.server.timing_summary."""
    endpoint: Optional[str] = None
    traceparent: Optional[bool] = None
    records_with_trace_id: Optional[int] = None
    joined: Optional[int] = None
    spans: Optional[int] = None
    unmatched_spans: Optional[int] = None
    bad_spans: dict[str, int] = Field(default_factory=dict)
    refused_bodies: dict[str, int] = Field(default_factory=dict)
    foreign_spans: Optional[int] = None
    dropped_spans: Optional[int] = None
    duplicate_spans: Optional[int] = None
