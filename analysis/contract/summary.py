"""summary.json: the figures of one run and its verdict, as analysis.metrics.summary computed them.

    analysis.metrics.summary.summarize_run ─► Summary.dump ─► summary.json
        ─► Summary.read ─► the report, compare, sweeps, loadgen.open_run(...).summary

Key names are the users' contract. Figures are None (null) when the data was missing, never 0.
Latency blocks are in milliseconds over completed measured requests. Blocks computed by another
package (energy, server metrics, stages, sessions, reasoning, roofline) name the keys readers use
and keep the rest as computed.
"""
from __future__ import annotations

from typing import Any, Optional

from pydantic import Field

from analysis.contract.base import Model, Open, RunFile
from analysis.contract.meta import ClientTransport
from analysis.contract.stats import P50P99, Stats
from analysis.contract.summary_blocks import Audio, Cancel, Energy, ModelFigures, Retries, Slo
from analysis.contract.summary_roofline import Roofline
from analysis.contract.summary_server import ServerMetrics, ServerTiming, SpecDecode
from analysis.contract.summary_workload import Images, ProbeStream, Reasoning, Sessions, Stage


class Window(Model):
    rule: Optional[str] = None
    start_ns: Optional[int] = None
    end_ns: Optional[int] = None


class TokenCounts(Model):
    output_tokens_source: dict[str, int] = Field(default_factory=dict)
    prompt_tokens_source: dict[str, int] = Field(default_factory=dict)
    with_both_counts: int = 0
    mismatch_count: int = 0
    usage_output_tokens_total: Optional[int] = None
    chunk_output_tokens_total: Optional[int] = None


class Client(ClientTransport):
    """Client health (analysis.metrics.summary.client_block): CPU, lag growth, saturation."""
    coalesced_reads: Optional[int] = None
    coalesced_reads_share: Optional[float] = None
    cpu_fraction: Optional[float] = None
    loop_lag_ms_p99: Optional[float] = None
    lag_growth_ms: Optional[float] = None
    achieved_send_rate: Optional[float] = None
    schedule_rate: Optional[float] = None
    target_rate: Optional[float] = None
    saturated: bool = False
    warnings: list[str] = Field(default_factory=list)
    reasons: Optional[list[Any]] = Field(
        None, description="why the client counts as saturated, each with its figure")
    processes: Optional[list[Any]] = Field(
        None, description="--procs N: each sender process's figures and reasons")
    host: Optional[dict[str, Any]] = Field(
        None, description="the host's load over the measured phase (meta host_load): busy, "
                          "reasons, what it explains (analysis.metrics.saturation); null: "
                          "not recorded")
    evidence: Optional[str] = None


class Check(Open):
    name: str
    ok: bool
    value: Any = None
    limit: Any = None


class Verdict(Open):
    """analysis.metrics.slo.verdict: VALID only when every check passed."""
    valid: bool
    reasons: list[str] = Field(default_factory=list)
    checks: list[Check] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    percentile: Optional[float] = None
    requests_without_record: Optional[int] = Field(
        None, description="planned measured requests without a record (analysis.metrics.run_end)"
                          "; null: the plan had no fixed count")
    run_end: Optional[dict[str, Any]] = Field(
        None, description="analysis.metrics.run_end: did the run end cleanly, and why not")
    records_excluded: Optional[int] = Field(
        None, description="records left out of every figure: they break a rule of "
                          "analysis.contract.sanity (ids, time order, token counts); each rule "
                          "broken is a reason")


class SteadyState(Open):
    """analysis.metrics.steady.steady_window: the window without ramp-up and drain."""
    rule: Optional[str] = None
    status: Optional[str] = None
    reason: Optional[str] = None
    start_ns: Optional[int] = None
    end_ns: Optional[int] = None
    duration_s: Optional[float] = None
    level: Optional[int] = None
    output_throughput: Optional[float] = None
    request_throughput: Optional[float] = None
    mean_in_flight: Optional[float] = None


class Replica(ModelFigures):
    """One replica of target.urls (analysis.metrics.replicas): its requests and figures, rates
    over the run's window (the figures of a model of api.models, and its url)."""
    url: str


class Replicas(Open):
    ttft: Optional[str] = Field(None, description="which TTFT the replicas' ttft_ms is")
    window_rule: Optional[str] = None
    urls: list[Replica] = Field(default_factory=list)


class Embeddings(Open):
    """analysis.metrics.embeddings: an embeddings run's figures (None for other runs)."""
    latency_ms: Optional[Stats] = None
    request_throughput: Optional[float] = None
    input_token_throughput: Optional[float] = Field(None, description="prompt tokens/s")
    input_throughput: Optional[float] = Field(None, description="inputs (texts embedded)/s")
    inputs_per_request: Optional[float] = None
    prompt_tokens_source: dict[str, int] = Field(default_factory=dict)


class StructuredGroup(Open):
    """analysis.metrics.structured: requests that offered tools, or asked for a response_format."""
    requests: int = 0
    called: Optional[int] = Field(None, description="tools: answers with at least one tool call")
    called_share: Optional[float] = None
    tool_calls_total: Optional[int] = None
    parsed_share: Optional[float] = Field(None, description="the final call's arguments / the "
                                          "answer's text parse as JSON")
    valid_share: Optional[float] = Field(None, description="... and validate against the schema")
    checked: Optional[int] = Field(None, description="answers checked against a schema")
    ttft_ms: Optional[P50P99] = None
    e2el_ms: Optional[P50P99] = None
    invalid_examples: list[str] = Field(default_factory=list)


class Structured(Open):
    tools: Optional[StructuredGroup] = None
    response_format: Optional[StructuredGroup] = None
    rule: Optional[str] = None


class Accuracy(Open):
    """analysis.metrics.accuracy: n checkable answers, how many right, Wilson 95 % interval."""
    n: int = 0
    correct: int = 0
    fraction: Optional[float] = None
    ci95: Optional[list[float]] = Field(None, description="[low, high], Wilson score, z 1.96")
    reason: Optional[str] = None
    requests: Optional[int] = None
    unchecked: dict[str, int] = Field(default_factory=dict, description="why not checkable: count")
    dataset: Optional[str] = None
    rule: Optional[str] = None
    ci_rule: Optional[str] = None


class CostInputs(Open):
    """The prices and amounts the cost figures were computed from."""
    usd_per_hour: Optional[float] = None
    usd_per_kwh: Optional[float] = None


class CostBlock(Open):
    """analysis.metrics.cost: dollars per million tokens; ``how`` says how each was computed
    (or why it is null)."""
    usd_per_million_output_tokens: Optional[float] = None
    usd_per_million_input_tokens: Optional[float] = None
    usd_per_million_tokens_at_slo: Optional[float] = None
    energy_usd_per_million_output_tokens: Optional[float] = None
    usd_per_million_total_tokens: Optional[float] = None
    window_usd: Optional[float] = None
    how: dict[str, str] = Field(default_factory=dict)
    inputs: Optional[CostInputs] = None


class PrefixCache(Open):
    """analysis.metrics.prefix_cache: what the server's prefix cache did (None: it said nothing;
    ``reasons`` says why for each None figure)."""
    server_hit_rate: Optional[float] = Field(None, description="Δprefix_cache_hits / "
                                             "Δprefix_cache_queries (tokens) over the window")
    cached_prompt_fraction: Optional[float] = Field(None, description="Σ cached_tokens / Σ "
                                                    "prompt_tokens of the answers that said")
    ttft_ms_p50_hit: Optional[float] = None
    ttft_ms_p50_miss: Optional[float] = None
    prompt_tokens_mean_hit: Optional[float] = None
    prompt_tokens_mean_miss: Optional[float] = None
    requests_hit: int = 0
    requests_miss: int = 0
    requests_unreported: int = 0
    reasons: dict[str, str] = Field(default_factory=dict)
    rule: Optional[str] = None


class Interactivity(Open):
    """analysis.metrics.capacity.interactivity: tokens/s one user sees while decoding."""
    p50: Optional[float] = None
    p10: Optional[float] = Field(None, description="10th percentile of the per-request speeds "
                                 "(slow tail)")
    count: int = 0
    rule: Optional[str] = None
    reason: Optional[str] = None


class Capacity(Open):
    """analysis.metrics.capacity.capacity_fields: accelerators and each figure's rule/reason."""
    accelerators: Optional[int] = None
    accelerators_from: Optional[str] = None
    rules: dict[str, str] = Field(default_factory=dict)
    reasons: dict[str, str] = Field(default_factory=dict, description="why a figure is null")


class Summary(RunFile):
    """summary.json (docs/metrics.md defines each figure)."""
    summary_version: Optional[int] = None
    mode: Optional[str] = None
    requests_completed: int = 0
    requests_failed: int = 0
    requests_cancelled: int = 0
    requests_warmup: int = 0
    unsent_requests: Optional[int] = Field(
        None, description="planned requests never sent (meta.json's count)")
    duration_s: Optional[float] = None
    window: Optional[Window] = None
    request_throughput: Optional[float] = None
    output_throughput: Optional[float] = None
    total_token_throughput: Optional[float] = None
    goodput: Optional[float] = None
    goodput_rule: Optional[str] = None
    headline_ttft: Optional[str] = Field(None, description="the TTFT key the headline uses")
    ttft_ms: Optional[Stats] = None
    ttft_from_scheduled_ms: Optional[Stats] = None
    tpot_ms: Optional[Stats] = None
    itl_ms: Optional[Stats] = None
    e2el_ms: Optional[Stats] = None
    e2el_from_scheduled_ms: Optional[Stats] = None
    schedule_lag_ms: Optional[Stats] = None
    chunk_gap_ms: Optional[Stats] = None
    failures_by_kind: dict[str, int] = Field(default_factory=dict)
    requests_retried: int = 0
    dropped_fields: list[str] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    token_counts: Optional[TokenCounts] = None
    client: Optional[Client] = None
    slo: Optional[Slo] = None
    verdict: Optional[Verdict] = None
    steady_state: Optional[SteadyState] = None
    stages: Optional[list[Stage]] = None
    sessions: Optional[Sessions] = None
    replicas: Optional[Replicas] = None
    images: Optional[Images] = Field(
        None, description="workload.images: requests with images, images sent, their shape")
    probe_stream: Optional[ProbeStream] = Field(
        None, description="load.probe: the side stream alone vs under the main load")
    reasoning: Optional[Reasoning] = None
    embeddings: Optional[Embeddings] = None
    structured: Optional[Structured] = Field(None, description="tool calls and response_format: "
                                             "parsed / valid shares beside the latencies")
    energy: Optional[Energy] = None
    evidence: Optional[dict[str, Any]] = None
    server_metrics: Optional[ServerMetrics] = None
    roofline: Optional[Roofline] = None
    models: Optional[dict[str, ModelFigures]] = Field(
        None, description="api.models: per model its share of the measured requests and the "
        "replicas' figures (analysis.metrics.models); None with one model")
    spec_decode: Optional[SpecDecode] = Field(
        None, description="speculative decoding: the server's draft/accept counters over the "
        "window and the client's tokens per chunk (analysis.server.spec_decode)")
    accuracy: Optional[Accuracy] = Field(None, description="workload.dataset: the answers "
                                         "checked beside the speed (null: no check ran)")
    cost: Optional[CostBlock] = Field(None, description="the scenario's cost block: $ per "
                                      "million tokens, each with how it was computed")
    prefix_cache: Optional[PrefixCache] = Field(None, description="prefix-cache hits: server rate, "
                                                "cached share, TTFT of hits vs misses")
    audio: Optional[Audio] = Field(
        None, description="api.endpoint transcriptions: rtfx (audio s per wall s), "
        "rtfx_per_request, audio seconds sent")
    interactivity_tok_s: Optional[Interactivity] = Field(
        None, description="per-user decode speed, 1000 / TPOT_ms per request: p50, and p10 of "
                          "the speeds (the slow tail)")
    output_throughput_per_accelerator: Optional[float] = Field(
        None, description="output tokens/s / target.accelerators (sut.json)")
    joules_per_output_token: Optional[float] = Field(
        None, description="measured energy per output token (energy.j_per_output_token when "
                          "energy.status is measured)")
    capacity: Optional[Capacity] = Field(
        None, description="analysis.metrics.capacity: accelerators, rules, why a figure is null")
    requests_aborted: int = Field(0, description="load.cancel: measured requests the client "
                                  "hung up on (status aborted; not failures)")
    cancel: Optional[Cancel] = Field(
        None, description="load.cancel: aborted requests, their TTFT, the server's running "
                          "gauge after the run (analysis.metrics.hangups)")
    retries: Optional[Retries] = Field(
        None, description="api.retry: {requests, attempts, wait_s} (apart from requests_retried)")
    server_timing: Optional[ServerTiming] = Field(
        None, description="server_traces: the server's spans joined per request: status (ok | "
        "n/a: reason), joined, bad_spans, phases (Stats per phase, ms), ttft_split (queue / "
        "prefill / server_other / rest; analysis.server.timing_summary)")

