"""Every server-derived block through the sanity gate (issue #41 items 2, 8, 21): hand-built
server_metrics.jsonl rows and meta.json ``running_after`` objects with what hostile servers say
(NaN / Inf gauges, a counter reset mid-window whose end is above its start, hits > queries,
accepted > draft tokens). Each figure is a value or None with the reason; nothing raises."""
import math

import pytest

from analysis.metrics import hangups
from analysis.metrics.prefix_cache import prefix_cache_block
from analysis.server.metrics import summarize_server_metrics
from analysis.server.spec_decode import ACCEPTED, DRAFT_TOKENS, DRAFTS, server_figures

WINDOW = (10_000, 20_000)
NAN, INF = float("nan"), float("inf")


def row(t, name, value):
    return {"t_ns": t, "name": name, "labels": {"model_name": "m"}, "value": value}


def scrapes(*ts):
    return [{"t_ns": t, "name": "loadgen:scrape", "labels": {"status": "ok"}, "value": 0.01}
            for t in ts]


def figs(rows):
    out = summarize_server_metrics(rows, WINDOW, [])
    assert out["status"] == "measured"
    return out["figures"]


def prefix(hits, queries):
    """hits and queries: [(t, value)] each; scrapes at 9k, 15k, 21k."""
    return (scrapes(9_000, 15_000, 21_000)
            + [row(t, "vllm:prefix_cache_hits_total", v) for t, v in hits]
            + [row(t, "vllm:prefix_cache_queries_total", v) for t, v in queries])


@pytest.mark.parametrize("bad", [NAN, INF, -1.0])
def test_a_running_gauge_that_is_not_a_count_is_no_figure(bad):
    rows = scrapes(9_000, 15_000, 21_000) + [row(9_000, "vllm:num_requests_running", 1.0),
                                             row(15_000, "vllm:num_requests_running", bad),
                                             row(21_000, "vllm:num_requests_running", 0.0)]
    f = figs(rows)["max_running"]
    assert f["value"] is None and f["evidence"] == "unmeasured" and "refused" in f["reason"]


def test_prefix_hits_above_queries_give_no_hit_rate():
    f = figs(prefix([(9_000, 0.0), (21_000, 1000.0)], [(9_000, 0.0), (21_000, 100.0)]))
    f = f["prefix_cache_hit_rate"]
    assert f["value"] is None and "> prefix-cache queries" in f["reason"]     # was 10.0


def test_a_reset_mid_window_whose_end_is_above_its_start_is_a_reset():
    # hits 400 → 190 then up to 450, queries 800 → 200 then up to 1000: end points say 50 / 200
    f = figs(prefix([(9_000, 400.0), (15_000, 190.0), (21_000, 450.0)],
                    [(9_000, 800.0), (15_000, 200.0), (21_000, 1000.0)]))
    f = f["prefix_cache_hit_rate"]
    assert f["value"] is None and "went down" in f["reason"]                # was 0.25, measured


def test_a_restart_is_called_a_restart_not_no_queries():
    f = figs(prefix([(9_000, 400.0), (21_000, 10.0)], [(9_000, 800.0), (21_000, 20.0)]))
    reason = f["prefix_cache_hit_rate"]["reason"]
    assert "restarted or reset" in reason and "no prefix-cache queries" not in reason


def test_the_prefix_cache_block_carries_the_gates_reason():
    sm = summarize_server_metrics(prefix([(9_000, 0.0), (21_000, 1000.0)],
                                         [(9_000, 0.0), (21_000, 100.0)]), WINDOW, [])
    out = prefix_cache_block([], sm)
    assert out["server_hit_rate"] is None and "> prefix-cache queries" in out["reasons"]["server_hit_rate"]


def spec(draft_tokens, accepted, drafts=(0.0, 10.0)):
    rows = scrapes(9_000, 21_000)
    for name, (a, b) in ((DRAFT_TOKENS, draft_tokens), (ACCEPTED, accepted), (DRAFTS, drafts)):
        rows += [row(9_000, name, a), row(21_000, name, b)]
    return server_figures(rows, WINDOW)


def test_accepted_above_draft_tokens_gives_no_acceptance_rate():
    out = spec((0.0, 20.0), (0.0, 100.0))
    assert out["acceptance_rate"] is None and out["mean_acceptance_length"] is None   # was 5.0
    assert "accepted tokens (100) > draft tokens (20)" in out["reason"]


def test_nan_spec_counters_are_not_called_a_restart():
    out = spec((0.0, NAN), (0.0, 5.0))
    assert out["acceptance_rate"] is None and "NaN" in out["reason"]
    assert "went down" not in out["reason"]


def test_good_spec_counters_still_give_the_figures():
    out = spec((0.0, 20.0), (0.0, 10.0))
    assert out["acceptance_rate"] == 0.5 and out["mean_acceptance_length"] == 2.0


@pytest.mark.parametrize("after", [
    {"metric": "vllm:num_requests_running", "value": None, "waited_s": 10.0, "leaked": True,
     "reason": None},                                   # an old meta.json: NaN written as null
    {"metric": "vllm:num_requests_running", "value": NAN, "waited_s": 10.0, "leaked": True,
     "reason": "still nan running after 10 s"},
    {"metric": "vllm:num_requests_running", "value": "abc", "waited_s": 10.0, "leaked": True},
])
def test_a_leak_verdict_on_a_value_that_is_not_a_count_is_unknown(after):
    out = {"warnings": []}
    hangups.fill(out, [], {"running_after": after})      # was a TypeError (leak_warning)
    c = out["cancel"]
    assert c["leaked"] is None and c["server_running_after"]["value"] is None
    assert "unknown" in c["leaked_reason"] and not out["warnings"]


def test_a_leak_check_without_metrics_says_why():
    after = {"metric": None, "value": None, "waited_s": 0.0, "leaked": None,
             "reason": "GET /metrics: HTTPError: HTTP Error 404: Not Found"}
    out = {"warnings": []}
    hangups.fill(out, [], {"running_after": after})
    assert out["cancel"]["leaked"] is None and "404" in out["cancel"]["leaked_reason"]


def test_a_real_leak_still_warns():
    after = {"metric": "vllm:num_requests_running", "value": 2.0, "waited_s": 10.0,
             "leaked": True, "reason": "still 2 running after 10 s"}
    out = {"warnings": []}
    hangups.fill(out, [], {"running_after": after})
    assert out["cancel"]["leaked"] is True and "did not free the slots" in out["warnings"][0]
    assert not math.isnan(out["cancel"]["server_running_after"]["value"])


def test_the_prefix_cache_block_refuses_an_absurd_rate_and_a_string_count():
    sm = {"status": "measured", "figures": {"prefix_cache_hit_rate": {"value": 10.0}}}
    recs = [{"id": 0, "phase": "measured", "status": "ok", "cached_tokens": "5",
             "prompt_tokens": 10, "sent_at_ns": 0, "first_token_at_ns": 1_000_000}]
    out = prefix_cache_block(recs, sm)                  # was 10.0, and a TypeError on "5" > 0
    assert out["server_hit_rate"] is None and "outside [0, 1]" in out["reasons"]["server_hit_rate"]
    assert out["requests_unreported"] == 1 and out["requests_hit"] == 0


def test_spans_that_disagree_split_no_server_time():
    from analysis.server.metrics import decomposition
    figs = {"server_ttft": {"value": 40.0, "count": 3}, "server_queue": {"value": 30.0},
            "server_prefill": {"value": 25.0}}              # queue + prefill > TTFT
    out = decomposition(100.0, 3, figs)
    assert out["server_other_ms"] is None and "spans disagree" in out["reason"]
    figs["server_prefill"]["value"] = 5.0
    out = decomposition(100.0, 3, figs)
    assert out["server_other_ms"] == 5.0 and out["reason"] is None


def test_a_histogram_bucket_reset_mid_window_gives_no_quantile():
    base = "vllm:time_to_first_token_seconds"
    rows = scrapes(9_000, 15_000, 21_000)
    for t, n in ((9_000, 100.0), (15_000, 2.0), (21_000, 150.0)):      # a restart, then past
        rows += [row(t, base + "_sum", n / 10), row(t, base + "_count", n),
                 {**row(t, base + "_bucket", n), "labels": {"le": "0.1"}},
                 {**row(t, base + "_bucket", n), "labels": {"le": "+Inf"}}]
    f = figs(rows)
    for key in ("server_ttft", "server_ttft_p50", "server_ttft_p99"):
        assert f[key]["value"] is None and "went down" in f[key]["reason"], (key, f[key])
