"""Server-side figures from server_metrics.jsonl, beside the client's, over the measured window.

    run_dir/server_metrics.jsonl ─► series.read_rows ─► series.Series (per sample name: rows in
        time order)
    meta.json t0_ns / end_ns (else the "loadgen:mark" rows) ─► window edges = the last good scrape
        at or before t0 and the first at or after the end (the scraper takes one at each mark)
    histograms  Δ_sum / Δ_count between the edges ─► mean server TTFT, queue, prefill, decode, E2E;
                Δ buckets ─► TTFT p50 / p99, queue p99 (histogram.py: with bucket resolution)
    gauges      every scrape inside the window    ─► max running / waiting, mean / max KV-cache use
    counters    Δ between the edges               ─► prefix-cache hit rate (Δhits / Δqueries), tokens
    every value through sanity.py: a NaN / Inf / negative gauge, a counter reset mid-window, hits
                > queries, spans that disagree ─► the figure None with the gate's reason
    records.jsonl (measured, ok) ─► client TTFT mean ─► decomposition:
        client TTFT = (client TTFT − server TTFT)        network, HTTP, client; evidence calculated
                    + server queue + server prefill       measured by the server
                    + (server TTFT − queue − prefill)     the server's other time (tokenize, IPC, ...)

Metric names are vLLM's (vllm/v1/metrics/loggers.py); the JAX server exposes the same. A value is
a sample's last row at or before t (the scraper writes counters only when they change). Every
figure carries its evidence; a missing one is ``None`` with the reason, never 0.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

from analysis.server import sanity
from analysis.server.histogram import figure, hist_mean, hist_quantile, unmeasured
from analysis.contract import ContractError
from analysis.contract.records import Records, as_records, read_records
from analysis.contract.rundir import has_records, read_meta, read_server_metrics, records_path
from analysis.server.series import FILE, Series, window_edges

HISTOGRAMS = {  # figure ─► vLLM histogram (seconds); alternatives: older names
    "server_ttft": ("vllm:time_to_first_token_seconds",),
    "server_queue": ("vllm:request_queue_time_seconds",),
    "server_prefill": ("vllm:request_prefill_time_seconds",),
    "server_decode": ("vllm:request_decode_time_seconds",),
    "server_e2e": ("vllm:e2e_request_latency_seconds",),
    "server_itl": ("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
}
QUANTILES = {"server_ttft_p50": ("server_ttft", 0.50), "server_ttft_p99": ("server_ttft", 0.99),
             "server_queue_p99": ("server_queue", 0.99)}
RUNNING, WAITING = ("vllm:num_requests_running",), ("vllm:num_requests_waiting",)
KV_USAGE = ("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc")  # new name, pre-0.9 name
PREFIX_HITS = ("vllm:prefix_cache_hits_total", "vllm:gpu_prefix_cache_hits_total")
PREFIX_QUERIES = ("vllm:prefix_cache_queries_total", "vllm:gpu_prefix_cache_queries_total")
PROMPT_TOKENS, GEN_TOKENS = ("vllm:prompt_tokens_total",), ("vllm:generation_tokens_total",)


def client_ttft_mean_ms(records: Records) -> tuple[Optional[float], int]:
    records = as_records(records)
    vals = [(r.first_token_at_ns - r.sent_at_ns) / 1e6 for r in records
            if r.phase != "warmup" and r.status == "ok"
            and r.first_token_at_ns is not None and r.sent_at_ns is not None]
    return (sum(vals) / len(vals) if vals else None), len(vals)


def decomposition(client_ms: Optional[float], n_client: int, figs: dict) -> dict:
    """client TTFT = network/client + server queue + server prefill + server other (residual)."""
    ttft, queue, prefill = (figs[k]["value"] for k in ("server_ttft", "server_queue",
                                                      "server_prefill"))
    if client_ms is None:
        return {"status": "unmeasured", "reason": "no completed streamed measured request "
                "with a first token (client TTFT)"}
    out: dict[str, Any] = {"status": "calculated", "client_ttft_mean_ms": client_ms,
                           "client_requests": n_client,
                           "server_requests": figs["server_ttft"].get("count"),
                           "server_ttft_mean_ms": ttft,
                           "server_queue_ms": queue, "server_prefill_ms": prefill}
    out["network_client_ms"] = client_ms - ttft if ttft is not None else None
    out["server_other_ms"] = (ttft - queue - prefill
                              if None not in (ttft, queue, prefill) else None)
    spans = (sanity.spans(queue / 1e3, prefill / 1e3, ttft / 1e3)
             if None not in (ttft, queue, prefill) else sanity.Checked(None))
    if not spans.ok:                   # the server's own spans disagree: no split of its time
        out["server_other_ms"] = None
    out["residual_ms"] = (client_ms - queue - prefill if None not in (queue, prefill) else None)
    out["queue_share"] = queue / client_ms if queue is not None and client_ms > 0 else None
    missing = [k for k, v in (("server TTFT", ttft), ("queue time", queue),
                              ("prefill time", prefill)) if v is None]
    out["reason"] = (f"server did not report {', '.join(missing)}: those parts are not split"
                     if missing else spans.reason)
    out["note"] = ("means over different sets when the server's request count differs from "
                   "the client's (other traffic, window edges); residual = client TTFT − queue "
                   "− prefill = network/client + server other")
    return out


def prefix_hit_rate(s: Series, a: int, b: int) -> dict:
    """Δhits / Δqueries over the window, through the gate: each counter's every sample checked
    (a reset mid-window is no delta), hits ≤ queries (else no rate), queries > 0."""
    (hits, has_h), (queries, has_q) = s.pick(PREFIX_HITS), s.pick(PREFIX_QUERIES)
    if not (has_h and has_q):
        return unmeasured("fraction", queries, "the server exposes no prefix-cache counters")
    dq, dh = s.delta_checked(queries, a, b), s.delta_checked(hits, a, b)
    for c in (dq, dh):
        if not c.ok:
            return unmeasured("fraction", queries, c.reason)
    r = sanity.ratio(dh.value, dq.value, "prefix-cache hits", "prefix-cache queries")
    if not r.ok:
        return unmeasured("fraction", queries, r.reason, queried_tokens=int(dq.value),
                          hit_tokens=int(dh.value))
    return figure(r.value, "fraction", "measured", hits, queried_tokens=int(dq.value),
                  hit_tokens=int(dh.value))


def summarize_server_metrics(rows: list[dict], window: Optional[tuple[int, int]],
                             records: Records, scraper: Optional[dict] = None) -> dict:
    """The summary's "server_metrics" object from rows, the measured window and the records."""
    scraper = scraper or {}
    if scraper.get("status") == "unavailable" or not rows:
        why = scraper.get("reason") or scraper.get("first_error") or (
            "scraping was off" if scraper.get("status") == "off" else f"no {FILE}")
        return {"status": "unmeasured", "reason": why, "source": scraper.get("url")}
    s = Series(rows)
    if window is None and "measure_start" in s.marks and "measure_end" in s.marks:
        window = (s.marks["measure_start"], s.marks["measure_end"])
    if window is None or None in window:
        return {"status": "unmeasured", "reason": "no measured window (t0/end) in meta.json",
                "source": scraper.get("url")}
    a, b, notes = window_edges(s, window)
    if a is None:
        return {"status": "unmeasured", "reason": "; ".join(notes), "source": scraper.get("url")}
    bases = {k: s.pick(v, "_count")[0] for k, v in HISTOGRAMS.items()}
    figs: dict[str, dict] = {k: hist_mean(s, v, a, b) for k, v in bases.items()}
    for k, (h, q) in QUANTILES.items():
        figs[k] = hist_quantile(s, bases[h], a, b, q)
    for key, names, unit, how in (("max_running", RUNNING, "count", "max"),
                                  ("max_waiting", WAITING, "count", "max"),
                                  ("kv_usage_mean", KV_USAGE, "fraction", "mean"),
                                  ("kv_usage_max", KV_USAGE, "fraction", "max")):
        name, present = s.pick(names)
        vals, refused = s.gauge_checked(name, a, b) if present else ([], None)
        if refused:
            figs[key] = unmeasured(unit, name, refused)
        elif not vals:
            figs[key] = unmeasured(unit, name, "not exposed by the server")
        else:
            v = max(vals) if how == "max" else sum(vals) / len(vals)
            figs[key] = figure(v, unit, "measured", name, samples=len(vals))
    figs["prefix_cache_hit_rate"] = prefix_hit_rate(s, a, b)
    span_s = (b - a) / 1e9
    for key, name in (("server_prompt_tokens", PROMPT_TOKENS), ("server_generation_tokens",
                                                                GEN_TOKENS)):
        name = s.pick(name)[0]
        d = s.delta_checked(name, a, b)
        figs[key] = (figure(int(d.value), "tokens", "measured", name, per_s=d.value / span_s)
                     if d.value is not None else unmeasured("tokens", name, d.reason))
    client_ms, n_client = client_ttft_mean_ms(records)
    return {"status": "measured", "reason": None, "source": scraper.get("url"),
            "scrapes": len(s.scrapes), "scrapes_failed": scraper.get("scrapes_failed"),
            "window": {"start_edge_ns": a, "end_edge_ns": b, "span_s": span_s,
                       "start_lead_ms": (window[0] - a) / 1e6,
                       "end_lag_ms": (b - window[1]) / 1e6, "notes": notes},
            "figures": figs, "ttft_decomposition": decomposition(client_ms, n_client, figs)}


def scrape_inputs(run_dir: str | Path) -> tuple[list, Optional[tuple[int, int]], Optional[dict]]:
    """A run directory's scrapes (server_metrics.jsonl), its measured window (meta.json t0/end)
    and the scraper's own account (meta.json server_metrics): what every server figure needs."""
    d = Path(run_dir)
    try:
        meta = read_meta(d)
    except ContractError:
        meta = None
    window = (meta.t0_ns, meta.end_ns) if meta is not None and meta.t0_ns else None
    scraper = meta.server_metrics.as_dict() if meta is not None and meta.server_metrics else None
    return read_server_metrics(d), window, scraper


def server_metrics_summary(run_dir: str | Path) -> dict:
    """summary.json's "server_metrics" for a run directory (its files read through
    analysis.contract: meta.json as RunMeta, records.jsonl as Records, server_metrics.jsonl)."""
    d = Path(run_dir)
    rows, window, scraper = scrape_inputs(d)
    records = read_records(records_path(d)) if has_records(d) else []
    return summarize_server_metrics(rows, window, records, scraper)
