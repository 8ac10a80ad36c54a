"""The live metric families and the one update rule: a finished record ─► the families.

    record (dict, one records.jsonl line) ─► observe(rec)
        loadgen_requests_total{status}    +1 (status: ok | error | cancelled, as recorded)
        loadgen_output_tokens_total       + output_tokens (any status: tokens that streamed)
        loadgen_schedule_lag_seconds      sent_at − scheduled_at      (ok and error: sent ones)
        loadgen_ttft_seconds              first_token_at − sent_at    (ok only)
        loadgen_tpot_seconds              (E2E − TTFT)/(tokens − 1)   (ok, tokens > 1)
        loadgen_itl_seconds               gap_k / n_k, n_k times      (ok; token-weighted)
    live counters (loadgen.live.feed) ─► loadgen_in_flight (read at each scrape)

Each per-request figure is the same function the report uses (analysis.metrics.figures), in
seconds instead of ms, so a live p99 differs from the report's only by bucket resolution and by
the report's measured-phase window: every record is counted here, warm-up included.
"""
from __future__ import annotations

from typing import Callable, Optional

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from analysis.metrics import figures as m

STATUSES = ("ok", "error", "cancelled", "aborted")      # children made at start: rate() sees them from 0

# Seconds. TTFT: a 5 ms cached prefill to a minute-long queue; ITL / TPOT: 1 ms (a small model
# on a GPU) to 2.5 s (an overloaded CPU server); schedule lag: 0.1 ms (a client on time) to 10 s
# (a client far behind its schedule). Quantiles interpolate within a bucket.
TTFT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0,
                3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 60.0)
TOKEN_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075,
                 0.1, 0.15, 0.2, 0.3, 0.5, 1.0, 2.5)
LAG_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
               1.0, 2.5, 5.0, 10.0)

# every family as Prometheus exposes it (the Grafana dashboard's queries are checked against it)
FAMILIES = {"loadgen_requests_total": "counter", "loadgen_output_tokens_total": "counter",
            "loadgen_ttft_seconds": "histogram", "loadgen_itl_seconds": "histogram",
            "loadgen_tpot_seconds": "histogram", "loadgen_schedule_lag_seconds": "histogram",
            "loadgen_in_flight": "gauge"}


def _s(ms: Optional[float]) -> Optional[float]:
    return None if ms is None else ms / 1e3


class LiveMetrics:
    """The families in their own registry (nothing else is exported: no process or GC series).
    ``in_flight``: a function read at each scrape (the live counters), else the gauge is 0."""

    def __init__(self, registry: Optional[CollectorRegistry] = None,
                 in_flight: Optional[Callable[[], float]] = None):
        self.registry = r = registry or CollectorRegistry(auto_describe=True)
        self.requests = Counter("loadgen_requests", "Requests recorded (records.jsonl lines), "
                                "warm-up included, by status", ["status"], registry=r)
        for s in STATUSES:
            self.requests.labels(s)
        self.output_tokens = Counter("loadgen_output_tokens", "Output tokens of the recorded "
                                     "requests (usage, else the chunk count), any status",
                                     registry=r)
        self.ttft = Histogram("loadgen_ttft_seconds", "Time to first token from the send "
                              "(completed requests)", buckets=TTFT_BUCKETS, registry=r)
        self.itl = Histogram("loadgen_itl_seconds", "Inter-token latency, token-weighted: each "
                             "gap between token chunks / its tokens, once per token",
                             buckets=TOKEN_BUCKETS, registry=r)
        self.tpot = Histogram("loadgen_tpot_seconds", "Time per output token after the first "
                              "(completed requests with > 1 token)", buckets=TOKEN_BUCKETS,
                              registry=r)
        self.schedule_lag = Histogram("loadgen_schedule_lag_seconds", "Send time minus scheduled "
                                      "time (requests that were sent)", buckets=LAG_BUCKETS,
                                      registry=r)
        self.in_flight = Gauge("loadgen_in_flight", "Requests sent and not yet recorded (the "
                               "live progress counters)", registry=r)
        self.in_flight.set_function(in_flight or (lambda: 0.0))

    def observe(self, rec: dict) -> None:
        """One finished request (a records.jsonl line as a dict) into the families."""
        status = rec.get("status")
        self.requests.labels(status if isinstance(status, str) else "unknown").inc()
        n = rec.get("output_tokens")
        if isinstance(n, int) and not isinstance(n, bool) and n > 0:
            self.output_tokens.inc(n)
        if status in ("ok", "error"):
            lag = _s(m.schedule_lag_ms(rec))
            if lag is not None:
                self.schedule_lag.observe(lag)
        if status != "ok":
            return
        ttft, tpot = _s(m.ttft_ms(rec)), _s(m.tpot_ms(rec))
        if ttft is not None:
            self.ttft.observe(ttft)
        if tpot is not None:
            self.tpot.observe(tpot)
        tc = m.token_chunks(rec)
        for k in range(1, len(tc)):
            n_k = tc[k][1]
            per_token = (tc[k][0] - tc[k - 1][0]) / 1e9 / n_k
            for _ in range(n_k):
                self.itl.observe(per_token)
