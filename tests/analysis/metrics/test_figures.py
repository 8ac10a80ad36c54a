"""Metric definitions on records whose answers are worked out by hand."""
import math

import pytest

from analysis.metrics import figures as m
from tests.analysis.synth import MS, rec


def test_role_only_first_chunk_is_not_the_first_token():
    # sent at 1 ms; role-only chunk at 3 ms; tokens at 11 ms and 21 ms; usage-only chunk at 22 ms
    r = rec(sched=0, sent=1, chunks=[[3, 0], [11, 1], [21, 1], [22, 0]])
    r["first_token_at_ns"] = None  # derive from chunks
    assert m.ttft_ms(r) == pytest.approx(10.0)
    assert m.ttft_from_scheduled_ms(r) == pytest.approx(11.0)
    assert m.schedule_lag_ms(r) == pytest.approx(1.0)
    assert m.e2el_ms(r) == pytest.approx(21.0)
    assert m.e2el_from_scheduled_ms(r) == pytest.approx(22.0)


def test_recorded_first_token_field_is_used():
    r = rec(sent=0, chunks=[[10, 1], [20, 1]], first_token=8)
    assert m.ttft_ms(r) == pytest.approx(8.0)


def test_multi_token_chunks_itl_token_weighted_and_raw_gaps():
    # tokens: 1 at 10 ms, 2 at 20 ms, 3 at 50 ms; end at 60 ms; 6 output tokens
    r = rec(sent=0, chunks=[[10, 1], [20, 2], [50, 3]], end=60)
    assert m.itl_ms(r) == pytest.approx([5.0, 5.0, 10.0, 10.0, 10.0])
    assert m.chunk_gaps_ms(r) == pytest.approx([10.0, 30.0])
    # TPOT = (E2E - TTFT) / (n - 1) = (60 - 10) / 5
    assert m.tpot_ms(r) == pytest.approx(10.0)


def test_one_token_request_has_no_tpot_and_no_itl():
    r = rec(sent=0, chunks=[[10, 1], [11, 0]])
    assert r["output_tokens"] == 1
    assert m.tpot_ms(r) is None
    assert m.itl_ms(r) == []
    assert m.chunk_gaps_ms(r) == []


def test_missing_times_give_none_not_zero():
    r = rec(sent=None, chunks=[[10, 1], [20, 1]])
    assert m.ttft_ms(r) is None and m.e2el_ms(r) is None and m.tpot_ms(r) is None
    assert m.schedule_lag_ms(rec(sched=None, sent=1)) is None
    assert m.ttft_ms(rec(sent=0, chunks=[[5, 0]])) is None  # no token ever arrived
    r2 = rec(sent=0, chunks=[[10, 1], [20, 1]])
    r2["output_tokens"] = None
    assert m.tpot_ms(r2) is None


def test_stats_linear_percentiles_by_hand():
    s = m.stats([4.0, 1.0, None, 3.0, 2.0])
    assert s["count"] == 4
    assert s["mean"] == pytest.approx(2.5)
    assert s["std"] == pytest.approx(math.sqrt(1.25))  # population std
    assert (s["min"], s["max"]) == (1.0, 4.0)
    # linear: rank = q/100 * (n-1); p90 -> 2.7 -> 3 + 0.7 * (4 - 3)
    assert s["p50"] == pytest.approx(2.5)
    assert s["p90"] == pytest.approx(3.7)
    assert s["p95"] == pytest.approx(3.85)
    assert s["p99"] == pytest.approx(3.97)
    assert s["p999"] == pytest.approx(3.997)


def test_stats_no_data_all_none():
    s = m.stats([None])
    assert s["count"] == 0
    assert all(s[k] is None for k in m.STAT_KEYS if k != "count")
    assert m.percentile([], 99) is None


def test_window_excludes_warmup_and_cancelled_includes_failed():
    recs = [rec(0, phase="warmup", sent=0, chunks=[[5, 1]]),
            rec(1, sent=10, chunks=[[20, 1], [30, 1]]),
            rec(2, sent=15, end=100, status="error", error_kind="timeout", chunks=[]),
            rec(3, sent=20, end=500, status="cancelled", chunks=[])]
    assert m.window(recs) == (10 * MS, 100 * MS)
    assert m.duration_s(m.window(recs)) == pytest.approx(0.09)
    assert m.window([rec(0, phase="warmup", sent=0, chunks=[[5, 1]])]) is None
    assert m.duration_s(None) is None


def test_throughputs_by_hand():
    # two completed requests in a 1 s window: 3 + 5 output tokens, 10 + 10 prompt tokens
    recs = [rec(0, sent=0, chunks=[[100, 1], [200, 2]], end=500),
            rec(1, sent=100, chunks=[[300, 5]], end=1000),
            rec(2, sent=50, end=60, status="error", error_kind="http", chunks=[])]
    win = m.window(recs)
    assert win == (0, 1000 * MS)
    assert m.request_throughput(recs, win) == pytest.approx(2.0)
    assert m.output_throughput(recs, win) == pytest.approx(8.0)
    assert m.total_token_throughput(recs, win) == pytest.approx(28.0)
    recs[0]["prompt_tokens"] = None
    assert m.total_token_throughput(recs, win) is None
    assert m.request_throughput(recs, None) is None


def test_goodput_one_token_request_fails_tpot_slo():
    recs = [rec(0, sent=0, chunks=[[10, 1], [20, 1], [30, 1]], end=30),   # TPOT 10
            rec(1, sent=0, chunks=[[10, 1]], end=1000),                    # 1 token: no TPOT
            rec(2, sent=0, chunks=[[10, 1], [100, 1]], end=100)]           # TPOT 90
    win = m.window(recs)  # 0 .. 1000 ms
    assert m.goodput(recs, {"tpot_ms": 50}, win, from_scheduled=False) == pytest.approx(1.0)
    assert m.goodput(recs, {"ttft_ms": 15}, win, from_scheduled=False) == pytest.approx(3.0)
    assert m.goodput(recs, {}, win, from_scheduled=False) is None
    assert m.goodput(recs, {"itl_ms": 50}, win, from_scheduled=False) == pytest.approx(1.0)


def test_goodput_from_scheduled_sees_a_late_client():
    r = rec(sched=0, sent=500, chunks=[[510, 1], [520, 1]], end=520)
    assert m.meets_slo(r, {"ttft_ms": 100}, from_scheduled=False)
    assert not m.meets_slo(r, {"ttft_ms": 100}, from_scheduled=True)


def test_failures_and_token_provenance():
    recs = [rec(0, status="error", error_kind="http", sent=0, end=1, chunks=[]),
            rec(1, status="error", error_kind="http", sent=0, end=1, chunks=[]),
            rec(2, status="error", error_kind=None, sent=0, end=1, chunks=[]),
            rec(3, phase="warmup", status="error", error_kind="timeout", sent=0, end=1, chunks=[]),
            rec(4, sent=0, chunks=[[1, 2]], usage_output_tokens=2, chunk_output_tokens=2,
                token_count_mismatch=False),
            rec(5, sent=0, chunks=[[1, 1]], out=2, usage_output_tokens=2, chunk_output_tokens=1,
                token_count_mismatch=True),
            rec(6, sent=0, chunks=[[1, 3]], output_tokens_source="chunks")]
    assert m.failures_by_kind(recs) == {"http": 2, "unknown": 1}
    t = m.token_provenance(recs)
    assert t["output_tokens_source"] == {"chunks": 1, "usage": 2}
    assert t["with_both_counts"] == 2 and t["mismatch_count"] == 1
    assert (t["usage_output_tokens_total"], t["chunk_output_tokens_total"]) == (4, 3)


def test_rate_lag_growth_and_in_flight():
    assert m.rate_of([0, 500 * MS, 1000 * MS, None]) == pytest.approx(2.0)
    assert m.rate_of([5]) is None
    # lags 1,1,1,1 then 1,1,9,9,9,9 ordered by schedule -> thirds: first [1,1,1] last [9,9,9]
    lags = [1, 1, 1, 1, 1, 1, 9, 9, 9]
    recs = [rec(i, sched=10 * i, sent=10 * i + lag, chunks=[[10 * i + 50, 1]])
            for i, lag in enumerate(lags)]
    assert m.lag_growth_ms(recs) == pytest.approx(8.0)
    assert m.lag_growth_ms(recs[:5]) is None
    steps = m.in_flight([rec(0, sent=0, end=10, chunks=[]), rec(1, sent=5, end=20, chunks=[]),
                         rec(2, sent=10, end=15, chunks=[])])
    assert [(t // MS, n) for t, n in steps] == [(0, 1), (5, 2), (10, 1), (10, 2), (15, 1), (20, 0)]


# ---- issue 42: the same figures in less memory ------------------------------------------------
def test_in_flight_steps_by_one_packed_sort_are_lexsorts():
    """figures._steps sorts one key 2·t + (1 for a send): the same steps as a lexsort of
    (t, ±1), ends first at equal times, near the int64 edge too (then lexsort itself)."""
    import numpy as np
    rng = np.random.default_rng(1)
    for base in (0, -(1 << 40), (1 << 62)):
        for _ in range(100):
            k = int(rng.integers(0, 40))
            s = rng.integers(0, 20, k) + base
            e = s + rng.integers(0, 5, k)
            t = np.concatenate([s, e])
            d = np.concatenate([np.ones(k, np.int64), -np.ones(k, np.int64)])
            o = np.lexsort((d, t))
            got_t, got_n = m._steps(s, e)
            assert got_t.dtype == got_n.dtype == np.int64
            assert np.array_equal(got_t, t[o]) and np.array_equal(got_n, np.cumsum(d[o]))


def test_stats_leaves_its_input_as_it_was_and_makes_the_same_figures():
    import numpy as np
    v = np.array([5.0, np.nan, 1.0, 3.0, 2.0])
    before = v.copy()
    s = m.stats(v)
    assert np.array_equal(v, before, equal_nan=True)        # partitioned: its own copy only
    assert (s["count"], s["p50"], s["min"], s["max"]) == (4, 2.5, 1.0, 5.0)
    assert m.stats(np.array([1, 2, 3, 4], np.int16)) == m.stats([1.0, 2.0, 3.0, 4.0])
