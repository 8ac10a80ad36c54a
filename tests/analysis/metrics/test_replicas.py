"""analysis.metrics.replicas on hand-built records: each replica's figures worked out on paper."""
import pytest

from analysis.metrics.replicas import replicas_block
from analysis.metrics.summary import summarize
from analysis.contract import Summary
from tests.analysis.synth import rec, server_meta, steady

A, B = "http://127.0.0.1:8001", "http://127.0.0.1:8002"


def balanced():
    # 20 requests every 50 ms; even ids to A (TTFT 20 ms), odd ids to B (TTFT 40 ms)
    fast = steady(20)
    slow = steady(20, ttft_ms=40)
    return [dict(fast[i] if i % 2 == 0 else slow[i], target_url=A if i % 2 == 0 else B)
            for i in range(20)]


def test_each_replica_on_the_runs_window():
    blk = replicas_block(balanced(), None, from_scheduled=False)
    a, b = blk["urls"]
    assert (a["url"], b["url"]) == (A, B) and blk["ttft"] == "ttft_ms"
    assert (a["requests"], a["completed"], b["requests"], b["completed"]) == (10, 10, 10, 10)
    assert a["share"] == b["share"] == pytest.approx(0.5)
    assert a["ttft_ms"]["p50"] == pytest.approx(20.0) and b["ttft_ms"]["p99"] == pytest.approx(40.0)
    # the run's window: first send 1 ms to the last end (request 19, sent 951, TTFT 40, 7 gaps of
    # 10 ms, usage chunk 10 ms later) = 951 + 40 + 70 + 10 = 1071 ms -> 1.070 s for both replicas
    assert a["request_throughput"] == pytest.approx(10 / 1.070)
    assert a["request_throughput"] + b["request_throughput"] == pytest.approx(20 / 1.070)
    assert a["output_throughput"] == pytest.approx(80 / 1.070)
    assert a["goodput"] is None                      # no SLO given


def test_from_scheduled_and_goodput_per_replica():
    slo = {"ttft_ms": 30.0}
    blk = replicas_block(balanced(), slo, from_scheduled=True)
    a, b = blk["urls"]
    assert blk["ttft"] == "ttft_from_scheduled_ms"
    assert a["ttft_ms"]["p50"] == pytest.approx(21.0)        # 1 ms lag + 20 ms
    assert a["goodput"] == pytest.approx(10 / 1.070) and b["goodput"] == 0.0


def test_failures_count_on_their_replica_and_no_urls_is_none():
    recs = balanced()
    recs[3] = rec(3, sched=150, sent=151, status="error", error_kind="connection", target_url=B)
    b = replicas_block(recs, None, False)["urls"][1]
    assert (b["requests"], b["completed"], b["failed"]) == (10, 9, 1)
    assert replicas_block(steady(5), None, False) is None
    warm = [dict(r, phase="warmup", target_url=A) for r in steady(3)]
    assert replicas_block(warm + steady(5), None, False) is None   # warm-up is not measured


def test_summary_carries_replicas_and_validates():
    s = summarize(balanced(), server_meta())
    assert [u["url"] for u in s["replicas"]["urls"]] == [A, B]
    assert Summary.model_validate(s).replicas.urls[1].requests == 10
    assert summarize(steady(5), server_meta())["replicas"] is None
