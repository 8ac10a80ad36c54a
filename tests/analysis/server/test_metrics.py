"""analysis.server (series.py, histogram.py, metrics.py) on hand-built server_metrics.jsonl rows:
every figure computed by hand.

Time line (ns): scrapes at 5k (before warm-up ended), 9k (measure_start mark, before t0=10k),
15k, an error at 12k, 21k (measure_end mark, after end=20k), 25k (the final scrape).
"""
import json

import pytest

from analysis.report.server_metrics import server_metrics_section
from analysis.server.histogram import hist_quantile
from analysis.server.metrics import server_metrics_summary, summarize_server_metrics
from analysis.server.series import Series, window_edges

T0, END = 10_000, 20_000
M = {"model_name": "m"}


def row(t, name, value, **labels):
    return {"t_ns": t, "name": name, "labels": {**M, **labels}, "value": value}


def scrape(t, ok=True):
    return {"t_ns": t, "name": "loadgen:scrape",
            "labels": {"status": "ok"} if ok else {"status": "error", "error": "HTTP 500"},
            "value": 0.001}


def hist(t, base, s, c, buckets=None):
    """_sum, _count and cumulative buckets {le: count} (default: only +Inf = count)."""
    buckets = buckets or {"+Inf": c}
    return [row(t, base + "_sum", s), row(t, base + "_count", c),
            *(row(t, base + "_bucket", n, le=le) for le, n in buckets.items())]


def full(t, ttft, queue, prefill, running, kv, hits, queries):
    """A snapshot that wrote every metric (the window's edges): the TTFT / queue / prefill
    histograms (sum, count[, buckets]), an empty decode one, engine 0's gauges (engine 1 idle),
    the KV-cache use and the prefix-cache counters."""
    return [*hist(t, "vllm:time_to_first_token_seconds", *ttft),
            *hist(t, "vllm:request_queue_time_seconds", *queue),
            *hist(t, "vllm:request_prefill_time_seconds", *prefill),
            *hist(t, "vllm:request_decode_time_seconds", 0.0, 0),
            row(t, "vllm:num_requests_running", running, engine="0"),
            row(t, "vllm:num_requests_running", 0, engine="1"),
            row(t, "vllm:num_requests_waiting", 0, engine="0"),
            row(t, "vllm:kv_cache_usage_perc", kv),
            row(t, "vllm:prefix_cache_hits_total", hits),
            row(t, "vllm:prefix_cache_queries_total", queries)]


def rows():
    out = [scrape(5_000), *hist(5_000, "vllm:time_to_first_token_seconds", 0.5, 2),
           row(5_000, "vllm:num_requests_running", 9, engine="0"),
           row(5_000, "vllm:kv_cache_usage_perc", 0.9),
           row(5_000, "vllm:generation_tokens_total", 10)]
    # measure_start: a full snapshot at 9k (warm-up finished: 4 requests in TTFT)
    out += [{"t_ns": 8_900, "name": "loadgen:mark", "labels": {"mark": "measure_start"},
             "value": 1}, scrape(9_000),
            *full(9_000, (1.0, 4, {"0.1": 2, "0.25": 4, "+Inf": 4}), (0.0, 0), (0.2, 4),
                  running=1, kv=0.1, hits=100, queries=400),
            row(9_000, "vllm:generation_tokens_total", 50)]
    out += [scrape(12_000, ok=False)]
    # 15k: only gauges (counters unchanged are not written)
    out += [scrape(15_000), row(15_000, "vllm:num_requests_running", 2, engine="0"),
            row(15_000, "vllm:num_requests_running", 1, engine="1"),
            row(15_000, "vllm:num_requests_waiting", 5, engine="0"),
            row(15_000, "vllm:kv_cache_usage_perc", 0.5)]
    # measure_end: full snapshot at 21k; generation tokens not rewritten (forward fill: 80 at 17k)
    out += [row(17_000, "vllm:generation_tokens_total", 80), scrape(21_000),
            *full(21_000, (1.6, 7, {"0.1": 2, "0.25": 6, "+Inf": 7}), (0.15, 3), (0.5, 7),
                  running=2, kv=0.3, hits=160, queries=600),
            {"t_ns": 21_100, "name": "loadgen:mark", "labels": {"mark": "measure_end"},
             "value": 1}]
    out += [scrape(25_000), row(25_000, "vllm:num_requests_running", 0, engine="0"),
            row(25_000, "vllm:kv_cache_usage_perc", 0.0)]
    return out


def rec(ttft_ms, phase="measured", status="ok"):
    return {"phase": phase, "status": status, "sent_at_ns": 1_000_000,
            "first_token_at_ns": 1_000_000 + int(ttft_ms * 1e6)}


RECORDS = [rec(240), rec(260), rec(250), rec(1000, phase="warmup"), rec(5, status="error")]


def test_figures_are_the_deltas_over_the_window():
    out = summarize_server_metrics(rows(), (T0, END), RECORDS, {"url": "http://x/metrics"})
    f = out["figures"]
    assert out["status"] == "measured"
    assert out["window"]["start_edge_ns"] == 9_000 and out["window"]["end_edge_ns"] == 21_000
    assert out["window"]["start_lead_ms"] == pytest.approx(1_000 / 1e6)
    assert f["server_ttft"]["value"] == pytest.approx(600 / 3) and f["server_ttft"]["count"] == 3
    assert f["server_queue"]["value"] == pytest.approx(50.0)
    # prefill: (0.5 - 0.2) s over (7 - 4) requests
    assert f["server_prefill"]["value"] == pytest.approx(100.0)
    assert f["server_decode"]["value"] is None and "did not grow" in f["server_decode"]["reason"]
    assert f["server_decode"]["evidence"] == "unmeasured"
    assert f["server_e2e"]["value"] is None and "exposes no" in f["server_e2e"]["reason"]
    # buckets over the window: (0.1, 0.25] gained 2, +Inf 1 more. p50: rank 1.5 of 3
    assert f["server_ttft_p50"]["value"] == pytest.approx((0.1 + 0.15 * 1.5 / 2) * 1e3)
    assert f["server_ttft_p50"]["bucket_ms"] == [100.0, 250.0]
    assert f["server_ttft_p50"]["evidence"] == "calculated"
    p99 = f["server_ttft_p99"]                      # in the +Inf bucket: only a lower bound
    assert p99["value"] == pytest.approx(250.0) and "lower bound" in p99["note"]
    assert f["server_queue_p99"]["value"] is None   # queue histogram has no finite buckets
    assert "no finite buckets" in f["server_queue_p99"]["reason"]
    assert f["server_itl"]["value"] is None and f["server_itl"]["evidence"] == "unmeasured"
    # running summed over engines at 9k, 15k, 21k: 1, 3, 2 (the 5k value 9 is outside)
    assert f["max_running"]["value"] == 3 and f["max_running"]["samples"] == 3
    assert f["max_waiting"]["value"] == 5
    assert f["kv_usage_mean"]["value"] == pytest.approx(0.3)
    assert f["kv_usage_max"]["value"] == pytest.approx(0.5)
    assert f["prefix_cache_hit_rate"]["value"] == pytest.approx(60 / 200)
    assert f["prefix_cache_hit_rate"]["queried_tokens"] == 200
    assert f["server_generation_tokens"]["value"] == 30          # 80 (forward filled) - 50
    assert f["server_generation_tokens"]["per_s"] == pytest.approx(30 / (12_000 / 1e9))
    assert f["server_prompt_tokens"]["value"] is None


def test_ttft_decomposition():
    d = summarize_server_metrics(rows(), (T0, END), RECORDS)["ttft_decomposition"]
    assert d["status"] == "calculated" and d["client_requests"] == 3 and d["server_requests"] == 3
    assert d["client_ttft_mean_ms"] == pytest.approx(250.0)
    assert d["network_client_ms"] == pytest.approx(50.0)       # 250 - 200
    assert d["server_other_ms"] == pytest.approx(50.0)         # 200 - 50 - 100
    assert d["residual_ms"] == pytest.approx(100.0)            # 250 - 50 - 100
    assert d["queue_share"] == pytest.approx(0.2)
    assert d["reason"] is None


def test_missing_queue_time_is_said_not_zeroed():
    rs = [r for r in rows() if "queue_time" not in r["name"]]
    out = summarize_server_metrics(rs, (T0, END), RECORDS)
    d = out["ttft_decomposition"]
    assert out["figures"]["server_queue"]["value"] is None
    assert d["residual_ms"] is None and d["queue_share"] is None and d["server_other_ms"] is None
    assert d["network_client_ms"] == pytest.approx(50.0)
    assert "queue time" in d["reason"]


def test_no_client_ttft():
    d = summarize_server_metrics(rows(), (T0, END), [rec(5, status="error")])["ttft_decomposition"]
    assert d["status"] == "unmeasured" and "client TTFT" in d["reason"]


def test_edges_and_counter_reset():
    s = Series(rows())
    assert s.scrapes == [5_000, 9_000, 15_000, 21_000, 25_000]   # the 12k error is no edge
    assert window_edges(s, (T0, END))[:2] == (9_000, 21_000)
    a, b, notes = window_edges(s, (T0, 30_000))
    assert (a, b) == (9_000, 25_000) and "last scrape came before the window end" in notes[0]
    a, b, notes = window_edges(s, (1_000, END))
    assert a == 5_000 and "first scrape came after t0" in notes[0]
    assert s.at("vllm:generation_tokens_total", 16_999) == 50
    assert s.at("vllm:generation_tokens_total", 4_000) is None
    assert s.delta("vllm:num_requests_running", 5_000, 9_000) is None    # 9 ─► 1: a "reset"


def test_unmeasured_without_rows_or_window():
    out = summarize_server_metrics([], (T0, END), RECORDS,
                                   {"status": "unavailable", "reason": "GET u: HTTP 404"})
    assert out == {"status": "unmeasured", "reason": "GET u: HTTP 404", "source": None}
    assert "off" in summarize_server_metrics([], None, [], {"status": "off"})["reason"]
    only_before = [r for r in rows() if r["t_ns"] <= 5_000]
    out = summarize_server_metrics(only_before, (T0, END), RECORDS)
    assert out["status"] == "unmeasured" and "no scrape interval" in out["reason"]
    # no meta window: the marks give it
    assert summarize_server_metrics(rows(), None, RECORDS)["status"] == "measured"


def _run_dir(tmp_path, with_rows=True):
    if with_rows:
        (tmp_path / "server_metrics.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows()) + '{"t_ns": 3', encoding="utf-8")
    (tmp_path / "records.jsonl").write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    (tmp_path / "meta.json").write_text(json.dumps(
        {"t0_ns": T0, "end_ns": END, "server_metrics": {
            "status": "measured" if with_rows else "unavailable", "url": "http://h/metrics",
            "reason": None if with_rows else "GET http://h/metrics: HTTP 404",
            "scrapes_failed": 1}}))
    return tmp_path


def test_summary_and_section_from_a_run_dir(tmp_path):
    d = _run_dir(tmp_path)
    sm = server_metrics_summary(d)              # the torn last line is skipped
    assert sm["status"] == "measured" and sm["source"] == "http://h/metrics"
    assert sm["scrapes_failed"] == 1
    md, ht = server_metrics_section(d)
    assert md.startswith("## Server metrics")
    assert "| Server TTFT (mean) | 200.00 ms (n=3) | measured |" in md
    assert "| Prefix-cache hit rate | 30.0 % | measured |" in md
    assert "queueing is 20.0 % of client TTFT" in md
    assert "<table>" in ht and "Queue time (mean)" in ht


def test_section_when_unmeasured(tmp_path):
    md, ht = server_metrics_section(_run_dir(tmp_path, with_rows=False))
    assert "Unmeasured: GET http://h/metrics: HTTP 404" in md and "HTTP 404" in ht


VLLM_QUEUE_LE = ("0.3", "0.5", "0.8", "1.0", "1.5", "2.0", "2.5", "5.0", "+Inf")  # vLLM's first


def _queue_rows(counts_at_end: dict, n: int, total_s: float) -> list:
    """Queue-time histogram (vLLM's bucket bounds) empty at the start edge, ``counts_at_end``
    (cumulative, by le) at the end edge; TTFT rows so the section renders."""
    zero = {le: 0 for le in VLLM_QUEUE_LE}
    end = {le: counts_at_end.get(le, n) for le in VLLM_QUEUE_LE}
    return [scrape(9_000), *hist(9_000, "vllm:request_queue_time_seconds", 0.0, 0, zero),
            scrape(21_000), *hist(21_000, "vllm:request_queue_time_seconds", total_s, n, end)]


def test_percentile_the_buckets_cannot_resolve_is_a_bound_not_a_point(tmp_path):
    # 40 requests that each queued 10 µs: all in vLLM's first bucket (0, 0.3 s]. Interpolating
    # would print "p99 297 ms" beside a 0.01 ms mean.
    out = summarize_server_metrics(_queue_rows({}, 40, 40 * 1e-5), (T0, END), RECORDS)
    f = out["figures"]
    assert f["server_queue"]["value"] == pytest.approx(0.01)
    p99 = f["server_queue_p99"]
    assert p99["bound"] == "upper" and p99["value"] == pytest.approx(300.0)
    assert p99["bucket_ms"] == [0.0, 300.0] and p99["resolution_ms"] == pytest.approx(300.0)
    assert p99["display"] == "≤ 300 ms (all 40 in the first bucket, 0–300 ms)"
    (tmp_path / "server_metrics.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in _queue_rows({}, 40, 40 * 1e-5)))
    (tmp_path / "meta.json").write_text(json.dumps({"t0_ns": T0, "end_ns": END}))
    md, ht = server_metrics_section(tmp_path)
    assert "| Queue time p99 | ≤ 300 ms (all 40 in the first bucket, 0–300 ms) |" in md
    assert "297" not in md and "≤ 300 ms" in ht
    # most in the first bucket, a few later: p99 in (0.3, 0.5] is a point, with its bucket
    out = summarize_server_metrics(_queue_rows({"0.3": 90}, 100, 5.0), (T0, END), RECORDS)
    p99 = out["figures"]["server_queue_p99"]
    assert p99["bound"] == "point" and p99["bucket_ms"] == [300.0, 500.0]
    assert p99["value"] == pytest.approx(300 + 200 * 9 / 10)
    assert p99["resolution_ms"] == pytest.approx(200.0)
    assert p99["display"] == "≈ 480 ms (interpolated in bucket 300–500 ms, resolution 200 ms; n=100)"
    # p50 in the first bucket while others lie above it: an upper bound, not 300 * 50/90
    s = Series(_queue_rows({"0.3": 90}, 100, 5.0))
    p50 = hist_quantile(s, "vllm:request_queue_time_seconds", 9_000, 21_000, 0.5)
    assert p50["bound"] == "upper" and p50["value"] == pytest.approx(300.0)
    assert p50["display"] == "≤ 300 ms (in the first bucket, 0–300 ms; n=100)"
    # everything in one later bucket: a range, not a point
    one = hist_quantile(Series(_queue_rows({"0.3": 0, "0.5": 0}, 10, 6.0)),
                        "vllm:request_queue_time_seconds", 9_000, 21_000, 0.99)
    assert one["bound"] == "upper" and one["bucket_ms"] == [500.0, 800.0]
    assert one["display"] == "≤ 800 ms (all 10 in one bucket, 500–800 ms)"
