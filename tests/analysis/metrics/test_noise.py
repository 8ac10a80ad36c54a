"""analysis/metrics/noise.py: headline figures of two runs, their change, interval and verdict."""
import pytest

from analysis.metrics import noise, summary
from tests.analysis.synth import noisy_loop, server_meta, steady

META = server_meta(mode="concurrency", slo={"ttft_ms": 100.0, "tpot_ms": 30.0, "percentile": 99.0})


def test_two_runs_of_identical_load_are_within_noise():
    # 1,000 requests a run: p99 gets an interval (10 values beyond it)
    figs = noise.compare_runs(noisy_loop(1, per_lane=250), META, noisy_loop(2, per_lane=250),
                              META)["figures"]
    assert set(figs) == set(noise.FIGURES)
    for name, f in figs.items():
        assert f["significant"] is False and f["worse"] is False, name
        assert f["ci_pct"][0] < 0 < f["ci_pct"][1], name
        assert noise.verdict(f) == "within noise"
    assert figs["ttft_ms_p50"]["method"] == "bootstrap over requests (2000 resamples, seed 0)"
    assert figs["goodput"]["method"].startswith("bootstrap over time buckets")


def test_a_30_percent_slower_server_is_significant_and_worse():
    figs = noise.compare_runs(noisy_loop(1, per_lane=250), META,
                              noisy_loop(2, scale=1.3, per_lane=250), META)["figures"]
    for name, f in figs.items():
        assert f["significant"] and f["worse"], name
        assert noise.verdict(f) == "significant (worse)"
    assert figs["tpot_ms_p50"]["change_pct"] == pytest.approx(30, abs=3)
    assert figs["request_throughput"]["change_pct"] < -15          # lower throughput: worse
    assert figs["request_throughput"]["higher_is_worse"] is False
    back = noise.compare_runs(noisy_loop(2, scale=1.3), META, noisy_loop(1), META)["figures"]
    assert noise.verdict(back["itl_ms_p99"]) == "significant (better)"


def test_points_are_the_summary_figures():
    recs = noisy_loop(3)
    s = summary.summarize(recs, META)
    figs = noise.compare_runs(recs, META, recs, META)["figures"]
    for name in ("request_throughput", "output_throughput", "goodput"):
        assert figs[name]["a"] == pytest.approx(s[name])
        rate, buckets = noise.bucket_rates(recs, META, {"request_throughput": "requests",
                                                        "output_throughput": "output_tokens",
                                                        "goodput": "goodput"}[name])
        assert sum(buckets) / len(buckets) == pytest.approx(rate) and len(buckets) == 10
    assert figs["ttft_ms_p99"]["a"] == s["ttft_ms"]["p99"]
    assert figs["itl_ms_p99"]["a"] == s["itl_ms"]["p99"]
    assert figs["e2el_ms_p50"]["change_pct"] == 0 and figs["e2el_ms_p50"]["significant"] is False


def test_missing_data_gives_none_with_the_reason():
    no_slo = server_meta(mode="concurrency", slo={"percentile": 99.0})
    small = noise.compare_runs(steady(10), no_slo, steady(10), no_slo)["figures"]
    assert small["goodput"]["a"] is None and small["goodput"]["reason"] == "no data"
    assert small["goodput"]["change_pct"] is None and small["goodput"]["significant"] is None
    rt = small["request_throughput"]
    assert rt["a"] is not None and rt["ci_pct"] is None
    assert noise.verdict(rt) == "no interval: single run with fewer than 20 completed requests"
    assert "too few values" in small["ttft_ms_p99"]["reason"]
    assert small["ttft_ms_p99"]["worse"] is None


def test_repeat_series_use_welch_on_the_run_figures():
    def runs(tpots):
        return [{"tpot_ms": {"p50": v, "p99": v * 1.2}, "request_throughput": 10.0 - v / 10}
                for v in tpots]
    figs = noise.compare_repeats(runs([10.0, 10.3, 9.9]), runs([13.0, 13.2, 12.9]))["figures"]
    f = figs["tpot_ms_p50"]
    assert f["method"] == "Welch's t on run means" and f["n"] == [3, 3]
    assert f["significant"] and f["worse"] and f["p_value"] < 0.01
    assert f["a"] == pytest.approx(10.0667, abs=1e-3)
    assert figs["request_throughput"]["worse"] is True               # 8.99 -> 8.70 req/s
    assert figs["ttft_ms_p50"]["reason"] == "no data"


def test_regressions_are_direction_aware_and_need_the_whole_interval_beyond_pct():
    def f(ch, hw, ci):
        sig = ci is not None and (ci[0] > 0 or ci[1] < 0)
        return {"change_pct": ch, "higher_is_worse": hw, "significant": sig if ci else None,
                "worse": sig and ((ch > 0) == hw), "ci_pct": ci}
    figs = {"ttft_ms_p99": f(+14.0, True, [12.0, 16.0]), "tpot_ms_p50": f(+40.0, True, [-2, 80]),
            "itl_ms_p99": f(-30.0, True, [-35, -25]), "output_throughput": f(-13, False, [-15, -11]),
            "goodput": f(+50.0, False, [40, 60]), "request_throughput": f(-5.0, False, [-7, -3]),
            "e2el_ms_p50": f(+30.0, True, None)}
    assert noise.regressions(figs, 10) == ["ttft_ms_p99", "output_throughput"]
    assert noise.regressions(figs, 11.5) == ["ttft_ms_p99"]
    assert noise.regressions(figs, 20) == []
    # issue 29: "ttft_ms_p99 +5.3 % (interval +0.0 .. +6.1 %)" failed a 5 % gate; it must not
    cry_wolf = {"ttft_ms_p99": f(+5.3, True, [0.01, 6.1])}
    assert cry_wolf["ttft_ms_p99"]["significant"] and noise.regressions(cry_wolf, 5) == []
