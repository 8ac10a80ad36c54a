"""analysis.metrics.prefix_cache: summary.json "prefix_cache" from records and the server's figure."""
import pytest

from analysis.metrics.prefix_cache import NO_USAGE, prefix_cache_block


def rec(i, cached, prompt=64, ttft_ms=10.0, status="ok", phase="measured"):
    return {"id": i, "phase": phase, "status": status, "sent_at_ns": 0,
            "first_token_at_ns": int(ttft_ms * 1e6), "end_at_ns": int(2e8),
            "prompt_tokens": prompt, "cached_tokens": cached}


def server(value=None, reason=None, status="measured"):
    fig = {"value": value, "reason": reason}
    return {"status": status, "reason": "no scrape" if status != "measured" else None,
            "figures": {"prefix_cache_hit_rate": fig}}


def test_hits_misses_fraction_and_server_rate():
    recs = [rec(0, 0, ttft_ms=40), rec(1, 48, ttft_ms=8), rec(2, 48, ttft_ms=12),
            rec(3, 32, ttft_ms=10), rec(4, 0, ttft_ms=50), rec(5, None, ttft_ms=1),
            rec(6, 64, ttft_ms=1, phase="warmup"), rec(7, 64, ttft_ms=1, status="error")]
    b = prefix_cache_block(recs, server(0.4))
    assert b["server_hit_rate"] == 0.4
    assert b["cached_prompt_fraction"] == pytest.approx((48 + 48 + 32) / (5 * 64))
    assert b["ttft_ms_p50_hit"] == pytest.approx(10.0)
    assert b["ttft_ms_p50_miss"] == pytest.approx(45.0)
    assert (b["requests_hit"], b["requests_miss"], b["requests_unreported"]) == (3, 2, 1)
    assert b["prompt_tokens_mean_hit"] == 64 and b["reasons"] == {}


def test_server_saying_nothing_gives_none_with_reasons_never_zero():
    b = prefix_cache_block([rec(0, None), rec(1, None)])
    for k in ("server_hit_rate", "cached_prompt_fraction", "ttft_ms_p50_hit", "ttft_ms_p50_miss"):
        assert b[k] is None and b["reasons"][k], k
    assert b["reasons"]["cached_prompt_fraction"] == NO_USAGE
    assert "scraper" in b["reasons"]["server_hit_rate"]
    b = prefix_cache_block([rec(0, 0)], server(None, "the server exposes no prefix-cache counters"))
    assert b["server_hit_rate"] is None and "counters" in b["reasons"]["server_hit_rate"]
    assert b["cached_prompt_fraction"] == 0.0 and b["ttft_ms_p50_hit"] is None
    assert "cached_tokens > 0" in b["reasons"]["ttft_ms_p50_hit"]
    b = prefix_cache_block([rec(0, 16)], server(status="unmeasured"))
    assert "unmeasured" in b["reasons"]["server_hit_rate"] and b["ttft_ms_p50_miss"] is None
    assert prefix_cache_block([])["reasons"]["cached_prompt_fraction"] == "no completed measured request"
