"""loadgen/live/metrics.py: hand-written records ─► the families' samples."""
import pytest

from loadgen.live.metrics import FAMILIES, LiveMetrics

MS = 1_000_000


def sample(live, name, **labels):
    return live.registry.get_sample_value(name, labels or None)


def rec(i, status="ok", sched=0, sent=1 * MS, chunks=(), out=None, **kw):
    base = {"id": i, "phase": "measured", "status": status, "scheduled_at_ns": sched,
            "sent_at_ns": sent, "chunks": [list(c) for c in chunks], "output_tokens": out}
    base.update(kw)
    return base


def test_a_completed_request_fills_every_family():
    live = LiveMetrics(in_flight=lambda: 3)
    # sent at 1 ms (scheduled at 0: lag 1 ms); a role chunk, then tokens at 21, 31 (2 tokens),
    # 41 ms; end at 41 ms; 4 tokens: TTFT 20 ms, TPOT (40 - 20) / 3 ms
    live.observe(rec(0, chunks=[(11 * MS, 0), (21 * MS, 1), (31 * MS, 2), (41 * MS, 1)], out=4,
                     first_token_at_ns=21 * MS, end_at_ns=41 * MS))
    assert sample(live, "loadgen_requests_total", status="ok") == 1
    assert sample(live, "loadgen_requests_total", status="error") == 0
    assert sample(live, "loadgen_output_tokens_total") == 4
    assert sample(live, "loadgen_ttft_seconds_count") == 1
    assert sample(live, "loadgen_ttft_seconds_sum") == pytest.approx(0.020)
    assert sample(live, "loadgen_tpot_seconds_sum") == pytest.approx(0.020 / 3)
    # ITL token-weighted: 10 ms / 2 twice (the 2-token chunk), then 10 ms once
    assert sample(live, "loadgen_itl_seconds_count") == 3
    assert sample(live, "loadgen_itl_seconds_sum") == pytest.approx(0.005 * 2 + 0.010)
    assert sample(live, "loadgen_itl_seconds_bucket", le="0.005") == 2
    assert sample(live, "loadgen_schedule_lag_seconds_sum") == pytest.approx(0.001)
    assert sample(live, "loadgen_in_flight") == 3


def test_failed_and_cancelled_requests_count_but_give_no_latency():
    live = LiveMetrics()
    live.observe(rec(1, status="error", error_kind="http", chunks=[], out=0, end_at_ns=5 * MS))
    live.observe(rec(2, status="cancelled", sent=None, out=None))
    live.observe(rec(3, status="error", error_kind="incomplete", chunks=[(3 * MS, 1)], out=1,
                     first_token_at_ns=3 * MS, end_at_ns=4 * MS))
    assert sample(live, "loadgen_requests_total", status="error") == 2
    assert sample(live, "loadgen_requests_total", status="cancelled") == 1
    assert sample(live, "loadgen_output_tokens_total") == 1        # tokens that did stream
    assert sample(live, "loadgen_ttft_seconds_count") == 0
    assert sample(live, "loadgen_itl_seconds_count") == 0
    assert sample(live, "loadgen_schedule_lag_seconds_count") == 2  # sent: the two errors
    assert sample(live, "loadgen_in_flight") == 0                   # no feed: 0


def test_missing_times_leave_the_histograms_alone():
    live = LiveMetrics()
    # one token: no TPOT, no ITL; no scheduled time: no lag; warm-up counted like the rest
    live.observe(rec(4, phase="warmup", sched=None, chunks=[(9 * MS, 1)], out=1,
                     first_token_at_ns=9 * MS, end_at_ns=9 * MS))
    assert sample(live, "loadgen_requests_total", status="ok") == 1
    assert sample(live, "loadgen_ttft_seconds_sum") == pytest.approx(0.008)
    assert sample(live, "loadgen_tpot_seconds_count") == 0
    assert sample(live, "loadgen_itl_seconds_count") == 0
    assert sample(live, "loadgen_schedule_lag_seconds_count") == 0


def test_the_registry_holds_exactly_the_documented_families():
    live = LiveMetrics()
    names = {}
    for fam in live.registry.collect():
        kind = fam.type
        names[fam.name + ("_total" if kind == "counter" else "")] = kind
    assert names == FAMILIES
