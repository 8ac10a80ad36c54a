"""analysis.metrics.stages on hand-built records: every figure worked out on paper."""
import pytest

from analysis.metrics.stages import stage_summaries
from analysis.metrics.summary import summarize
from tests.analysis.synth import rec, server_meta, steady

STAGES = [{"index": 0, "rate": 20.0, "start_s": 0.0, "duration_s": 1.0},
          {"index": 1, "rate": 40.0, "start_s": 1.0, "duration_s": 1.0}]


def staged_records():
    # stage 0: 20 requests every 50 ms from 0 (TTFT 20 ms); stage 1: 40 every 25 ms from 1000 ms,
    # TTFT 60 ms. 8 tokens each, 10 ms apart.
    return steady(20) + [dict(r, id=20 + r["id"]) for r in
                         steady(40, gap_ms=25, start_ms=1000, ttft_ms=60)]


def test_each_stage_on_its_own_window():
    meta = server_meta(schedule={"stages": STAGES})
    s0, s1 = stage_summaries(staged_records(), meta)
    assert (s0["index"], s0["requests"], s0["completed"], s0["failed"]) == (0, 20, 20, 0)
    assert (s1["index"], s1["requests"], s1["rate"]) == (1, 40, 40.0)
    # TTFT from scheduled = lag 1 ms + TTFT
    assert s0["ttft_from_scheduled_ms"]["p50"] == pytest.approx(21.0)
    assert s1["ttft_from_scheduled_ms"]["p99"] == pytest.approx(61.0)
    # TPOT = (E2E − TTFT)/(n − 1); the end is the usage chunk 10 ms after the last token: 80/7
    assert s0["tpot_ms"]["p50"] == pytest.approx(80 / 7)
    # sends every 50 ms (stage 0): 19 gaps over 950 ms = 20/s; stage 1: 40/s
    assert s0["achieved_send_rate"] == pytest.approx(20.0)
    assert s1["achieved_send_rate"] == pytest.approx(40.0)
    # stage 0's window [0, 1000) ms holds 160 tokens of its requests but request 19 (sent at
    # 951 ms) has tokens at 971, 981, 991, 1001, ..., 1041 ms: 5 of them fall in stage 1's window
    assert s0["output_throughput"] == pytest.approx((20 * 8 - 5) / 1.0)


def test_a_failed_request_counts_in_its_stage_and_no_stages_is_none():
    recs = staged_records()
    recs[25] = rec(25, sched=1125, sent=1126, status="error", error_kind="http")
    s0, s1 = stage_summaries(recs, server_meta(schedule={"stages": STAGES}))
    assert (s0["failed"], s1["failed"], s1["completed"]) == (0, 1, 39)
    assert stage_summaries(recs, server_meta()) is None
    assert stage_summaries(recs, server_meta(schedule={"stages": STAGES}, t0_ns=None)) is None


def test_summary_carries_the_stages():
    s = summarize(staged_records(), server_meta(schedule={"stages": STAGES}))
    assert [x["index"] for x in s["stages"]] == [0, 1]
    assert summarize(staged_records(), server_meta())["stages"] is None
