"""Prometheus metrics of the JAX server, under vLLM's metric names so dashboards and scrapers carry over.

    api.py handlers ─► ServerMetrics.on_first_token / on_token / on_finish   (server-side perf_counter_ns)
    GET /metrics    ─► ServerMetrics.render() ─► gauges refreshed from orchestrator.stats() ─► text format

Every metric carries a `model_name` label, as vLLM's do. Each app owns its own CollectorRegistry (never the
process-global one), so several apps can live in one test process.

Names and meaning (vLLM v1 names; documented in vLLM's docs/design/metrics.md):
    vllm:num_requests_running / vllm:num_requests_waiting   gauges, from orchestrator.stats()
    vllm:kv_cache_usage_perc                                gauge, fraction 0..1 of KV-cache slots in use
    vllm:prompt_tokens_total / vllm:generation_tokens_total counters (prompt counted at its first token)
    vllm:time_to_first_token_seconds                        arrival at the HTTP handler → first token
    vllm:inter_token_latency_seconds                        gap between consecutive tokens of one request
    vllm:e2e_request_latency_seconds                        arrival → last token / finish
    vllm:request_queue_time_seconds                         arrival → engine picked it up (when known)
    vllm:request_prefill_time_seconds                       engine pick-up → first token (when known)
    vllm:request_decode_time_seconds                        first token → last token
    vllm:request_success_total{finished_reason}             finished requests by reason (stop/length/abort)
    vllm:prefix_cache_queries_total / vllm:prefix_cache_hits_total   counters in prompt TOKENS: looked up /
                                                            served from the prefix cache (only with
                                                            --prefix-cache on; vLLM v1's names)
A /v1/embeddings request counts its input tokens in vllm:prompt_tokens_total, its latency in
vllm:e2e_request_latency_seconds and one vllm:request_success_total{finished_reason="stop"}; it has
no first token, so no TTFT/ITL/prefill/decode observation.
When the orchestrator does not report when a request left the queue, queue and prefill time are not observed
(their _count stays 0) rather than guessed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client import CONTENT_TYPE_LATEST

NS = 1e-9

# Bucket edges in seconds. vLLM's TTFT / ITL / latency edges, extended downwards because a CPU tiny
# model produces tokens in a few milliseconds.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
               0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
REQUEST_BUCKETS = (0.01, 0.05, 0.1, 0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
                   50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0)


@dataclass
class RequestTiming:
    """Server-side timestamps of one request, all time.perf_counter_ns()."""

    arrival_ns: int
    scheduled_ns: int | None = None  # when the engine took it off the waiting queue (if reported)
    first_token_ns: int | None = None
    last_token_ns: int | None = None
    end_ns: int | None = None
    token_ns: list[int] = field(default_factory=list)
    trace: tuple[str, str] | None = None   # (trace id, caller's span id) of a W3C traceparent (spans.py)


class ServerMetrics:
    """The per-app registry and the vLLM-named metrics; `stats` is the orchestrator's stats() function."""

    def __init__(self, model_name: str, stats: Callable[[], dict]) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._stats = stats
        self.finished_hooks: list[Callable[[RequestTiming], None]] = []   # spans.py's, when traced
        self._labels = {"model_name": model_name}
        r, ln = self.registry, ["model_name"]
        self.running = Gauge("vllm:num_requests_running", "Number of requests in the running batch.",
                             ln, registry=r).labels(**self._labels)
        self.waiting = Gauge("vllm:num_requests_waiting", "Number of requests waiting for a slot.",
                             ln, registry=r).labels(**self._labels)
        self.kv_usage = Gauge("vllm:kv_cache_usage_perc", "KV-cache usage, fraction 0..1 (1 = 100 percent).",
                              ln, registry=r).labels(**self._labels)
        self.prompt_tokens = Counter("vllm:prompt_tokens", "Number of prefill tokens processed.",
                                     ln, registry=r).labels(**self._labels)
        self.generation_tokens = Counter("vllm:generation_tokens", "Number of generated tokens.",
                                         ln, registry=r).labels(**self._labels)
        self.ttft = self._hist("vllm:time_to_first_token_seconds", "Time to first token, seconds.", TTFT_BUCKETS)
        self.itl = self._hist("vllm:inter_token_latency_seconds", "Inter-token latency, seconds.", ITL_BUCKETS)
        self.e2e = self._hist("vllm:e2e_request_latency_seconds", "End-to-end request latency, seconds.",
                              REQUEST_BUCKETS)
        self.queue_time = self._hist("vllm:request_queue_time_seconds", "Time spent waiting, seconds.",
                                     REQUEST_BUCKETS)
        self.prefill_time = self._hist("vllm:request_prefill_time_seconds", "Time spent in prefill, seconds.",
                                       REQUEST_BUCKETS)
        self.decode_time = self._hist("vllm:request_decode_time_seconds", "Time spent in decode, seconds.",
                                      REQUEST_BUCKETS)
        self._success = Counter("vllm:request_success", "Finished requests, by finish reason.",
                                ["model_name", "finished_reason"], registry=r)
        for reason in ("stop", "length", "abort"):
            self._success.labels(finished_reason=reason, **self._labels)  # expose zeros from the start
        # prefix cache (engine thread's totals, copied at scrape): absent when the cache is off
        self._prefix: dict[str, Counter] = {}
        self._prefix_seen = {"queries": 0, "hits": 0}
        if "prefix_cache_queries_total" in stats():
            for key, doc in (("queries", "Prefix-cache queries, in prompt tokens."),
                             ("hits", "Prefix-cache hits, in prompt tokens.")):
                self._prefix[key] = Counter(f"vllm:prefix_cache_{key}", doc, ln,
                                            registry=r).labels(**self._labels)

    def _hist(self, name: str, doc: str, buckets: tuple[float, ...]):
        return Histogram(name, doc, ["model_name"], buckets=buckets,
                         registry=self.registry).labels(**self._labels)

    # ---- per-request events (called on the event loop) ------------------------------------------------------
    def on_token(self, timing: RequestTiming, t_ns: int, prompt_tokens: int) -> None:
        """One generated token arrived at t_ns."""
        if timing.first_token_ns is None:
            timing.first_token_ns = t_ns
            self.prompt_tokens.inc(prompt_tokens)
            self.ttft.observe((t_ns - timing.arrival_ns) * NS)
        elif timing.last_token_ns is not None:
            self.itl.observe(max(0, t_ns - timing.last_token_ns) * NS)
        timing.last_token_ns = t_ns
        self.generation_tokens.inc()

    def on_finish(self, timing: RequestTiming, finished_reason: str, end_ns: int) -> None:
        """The request ended (stop / length / abort); observe its whole-request histograms once."""
        if timing.end_ns is not None:
            return
        timing.end_ns = end_ns
        self._success.labels(finished_reason=finished_reason, **self._labels).inc()
        self.e2e.observe(max(0, end_ns - timing.arrival_ns) * NS)
        if timing.scheduled_ns is not None:
            self.queue_time.observe(max(0, timing.scheduled_ns - timing.arrival_ns) * NS)
            if timing.first_token_ns is not None:
                self.prefill_time.observe(max(0, timing.first_token_ns - timing.scheduled_ns) * NS)
        if timing.first_token_ns is not None and timing.last_token_ns is not None:
            self.decode_time.observe(max(0, timing.last_token_ns - timing.first_token_ns) * NS)
        for hook in self.finished_hooks:
            hook(timing)

    def on_embedded(self, arrival_ns: int, end_ns: int, prompt_tokens: int) -> None:
        """An embeddings request answered: its input tokens, its latency, one success."""
        self.prompt_tokens.inc(prompt_tokens)
        self.e2e.observe(max(0, end_ns - arrival_ns) * NS)
        self._success.labels(finished_reason="stop", **self._labels).inc()

    # ---- scrape -----------------------------------------------------------------------------------------------
    def render(self) -> tuple[bytes, str]:
        """Refresh the gauges from the orchestrator and return (body, content type)."""
        st = self._stats()
        self.running.set(st.get("running", 0))
        self.waiting.set(st.get("waiting", 0))
        self.kv_usage.set(float(st.get("kv_cache_usage", 0.0)))
        for key, c in self._prefix.items():     # a counter follows the engine's monotonic total
            total = int(st.get(f"prefix_cache_{key}_total", 0))
            if total > self._prefix_seen[key]:
                c.inc(total - self._prefix_seen[key])
                self._prefix_seen[key] = total
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
