"""SLO presets and the MLPerf-style verdict, one rule at a time."""
from pathlib import Path

import pytest

from analysis.metrics import slo
from tests.analysis.synth import rec, server_meta, steady


def _reasons(records, **meta_over):
    v = slo.verdict(records, server_meta(**meta_over))
    return v["valid"], v["reasons"], v


# (preset, TTFT p99 ms, TPOT p99 ms, the ttft_latency line in mlperf.conf at commit b66003e1)
MLPERF_V61 = [("server/llama2-70b", 2000, 200, 117), ("interactive/llama2-70b", 450, 40, 121),
              ("server/mixtral-8x7b", 2000, 200, 126), ("server/llama3_1-405b", 6000, 175, 130),
              ("interactive/llama3_1-405b", 4500, 80, 135), ("server/llama3_1-8b", 2000, 100, 140),
              ("interactive/llama3_1-8b", 500, 30, 145), ("server/deepseek-r1", 2000, 80, 149),
              ("interactive/deepseek-r1", 1500, 15, 154), ("server/gpt-oss-120b", 3000, 80, 158),
              ("interactive/gpt-oss-120b", 2000, 15, 163)]


def test_presets_match_mlperf_conf():
    p = slo.PRESETS
    assert sorted(p) == sorted(name for name, *_ in MLPERF_V61)
    for name, ttft, tpot, line in MLPERF_V61:
        assert (p[name].ttft_ms, p[name].tpot_ms, p[name].percentile) == (ttft, tpot, 99), name
        assert p[name].source.endswith(f"mlperf.conf lines {line}-{line + 1}"), name
    assert len(slo.preset_table()) == len(p)


def test_docs_table_lists_every_preset_with_its_limits():
    text = (Path(__file__).resolve().parents[3] / "docs" / "metrics.md").read_text()
    for name, ttft, tpot, line in MLPERF_V61:
        assert f"| `{name}` | {ttft} | {tpot} | {line}–{line + 1} |" in text, name


def test_resolve_slo_preset_then_explicit_override():
    s = slo.resolve_slo({"preset": "interactive/llama2-70b", "tpot_ms": 25.0})
    assert (s["ttft_ms"], s["tpot_ms"], s["percentile"]) == (450, 25.0, 99.0)
    assert "interactive/llama2-70b" in s["source"]
    assert slo.resolve_slo(None)["ttft_ms"] is None
    with pytest.raises(slo.UnknownPreset, match="slo.preset: unknown preset 'server/nope'"):
        slo.resolve_slo({"preset": "server/nope"})


def test_clean_server_run_is_valid():
    # 40 requests every 50 ms (2 s), 1 ms late, TTFT 20 ms, 8 tokens 10 ms apart
    valid, reasons, v = _reasons(steady(40))
    assert valid and reasons == []
    assert {c["name"] for c in v["checks"]} >= {"p99_ttft_ms", "p99_tpot_ms", "send_rate",
                                                 "p99_schedule_lag_ms", "client_cpu"}


def test_failure_and_cancel_make_it_invalid():
    recs = steady(40)
    recs[5].update(status="error", error_kind="http")
    recs[6].update(status="cancelled", error_kind="cancelled")
    valid, reasons, _ = _reasons(recs, interrupted=True)
    assert not valid
    assert any("1 measured request(s) failed" in r for r in reasons)
    assert any("cancelled" in r for r in reasons)
    assert "the run was interrupted" in reasons


def test_minimums_listed_together():
    valid, reasons, _ = _reasons(steady(40), min_duration_s=600.0, min_queries=100)
    assert not valid
    assert any("min_duration_s 600" in r for r in reasons)
    assert any("40 completed requests < min_queries 100" in r for r in reasons)


def test_ttft_judged_from_scheduled_in_server_mode():
    # every request sent 2.1 s late: TTFT from send 20 ms, from scheduled 2121 ms > 2000
    recs = steady(40, lag_ms=2101)
    valid, reasons, _ = _reasons(recs)
    assert not valid
    assert any(r.startswith("p99 TTFT from scheduled 2121.000 ms > 2000") for r in reasons)
    assert any("schedule lag" in r for r in reasons)
    # the same records judged as an offline run use TTFT from send and pass the SLO
    v = slo.verdict(recs, server_meta(mode="offline"))
    assert v["valid"], v["reasons"]
    assert any("no schedule checks" in n for n in v["notes"])


def test_one_token_outputs_leave_tpot_without_data():
    recs = steady(40, tokens=1)
    valid, reasons, _ = _reasons(recs)
    assert not valid
    assert any("p99 TPOT: no data" in r for r in reasons)


def test_tpot_over_limit():
    valid, reasons, _ = _reasons(steady(40, itl_ms=150))
    # TPOT = (E2E - TTFT)/(n-1) = (20 + 7*150 + 150 - 20) / 7 = 171.43 > 100
    assert not valid and any(r.startswith("p99 TPOT 171.429 ms > 100") for r in reasons)


def test_send_rate_below_fraction_and_cpu_saturated():
    recs = steady(40)
    for i, r in enumerate(recs):  # sends spread to 1.5x the schedule's span; lag grows
        r["sent_at_ns"] = r["scheduled_at_ns"] + i * 25_000_000
    valid, reasons, _ = _reasons(recs, client_cpu=0.97)
    assert not valid
    assert any(r.startswith("achieved send rate") for r in reasons)
    assert any(r.startswith("client CPU 0.97") for r in reasons)


def test_unknown_cpu_is_a_note_not_a_failure():
    v = slo.verdict(steady(40), server_meta(client_cpu=None))
    assert v["valid"]
    assert "client CPU not recorded: saturation not checked" in v["notes"]


def test_no_completed_request():
    valid, reasons, _ = _reasons([rec(0, status="error", error_kind="connection", sent=0, end=1)])
    assert not valid and "no measured request completed" in reasons


def test_unknown_preset_after_a_run_is_an_invalid_reason_not_a_crash():
    v = slo.verdict(steady(40), server_meta(slo={"preset": "server/typo", "ttft_ms": 5000.0}))
    assert not v["valid"]
    assert v["reasons"][0].startswith("slo.preset: unknown preset 'server/typo'")
    assert any(c["name"] == "p99_ttft_ms" and c["ok"] for c in v["checks"])  # explicit limit kept


def test_client_cpu_given_as_a_dict_is_read_like_the_summary_does():
    v = slo.verdict(steady(40), server_meta(client_cpu={"fraction": 0.97}))
    cpu = next(c for c in v["checks"] if c["name"] == "client_cpu")
    assert cpu["value"] == 0.97 and not cpu["ok"] and not v["valid"]
