"""analysis.metrics.probe_stream on hand-built probe rows: alone vs beside the load."""
import pytest

from analysis.metrics.probe_stream import probe_block
from tests.analysis.synth import rec, steady


def rows(phase, n, ttft_ms, itl_ms=10):
    return [dict(r, phase=phase) for r in steady(n, ttft_ms=ttft_ms, itl_ms=itl_ms)]


def test_slowdown_is_beside_over_alone():
    b = probe_block(rows("probe_alone", 4, 20) + rows("probe", 6, 40, itl_ms=15),
                    {"probe_stream": {"rate": 0.5, "prompt_tokens": 32, "output_tokens": 8}})
    assert (b["alone"]["requests"], b["under_load"]["requests"]) == (4, 6)
    assert b["alone"]["ttft_ms"]["p50"] == pytest.approx(20.0)
    assert b["under_load"]["ttft_ms"]["p99"] == pytest.approx(40.0)
    assert b["slowdown"]["ttft_p50"] == pytest.approx(2.0)
    # TPOT = (E2E − TTFT) / 7: (70 + 10) / 7 alone, (105 + 15) / 7 beside -> 1.5×
    assert b["slowdown"]["tpot_p50"] == pytest.approx(1.5)
    assert (b["rate"], b["prompt_tokens"]) == (0.5, 32)


def test_a_missing_side_is_none_never_zero():
    b = probe_block(rows("probe_alone", 3, 20), None)
    assert b["under_load"]["requests"] == 0 and b["under_load"]["ttft_ms"]["p50"] is None
    assert b["slowdown"] == {k: None for k in b["slowdown"]}
    failed = [rec(0, phase="probe", status="error", error_kind="http")]
    b = probe_block(rows("probe_alone", 3, 20) + failed, None)
    assert b["under_load"]["failed"] == 1 and b["slowdown"]["ttft_p50"] is None
    assert probe_block([], None) is None
