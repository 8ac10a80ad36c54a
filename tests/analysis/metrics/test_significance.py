"""analysis/metrics/significance.py: bootstrap intervals of quantile differences, Welch's t."""
import numpy as np
import pytest
from scipy.stats import ttest_ind

from analysis.metrics import significance as sig


def test_resampled_quantiles_are_numpys_percentile_of_each_resample():
    # 6 requests owning 1..3 values each (a pooled figure such as ITL): the weighted quantile of
    # each resample equals np.percentile of the explicit pooled multiset of that resample
    rng = np.random.default_rng(7)
    values = rng.lognormal(0, 0.5, 12)
    owners = np.array([0, 0, 1, 2, 2, 2, 3, 4, 4, 5, 5, 5])
    for q in (50, 90, 99):
        got = sig.resampled_quantiles(values, owners, 6, q, np.random.default_rng(3), 50)
        counts = sig.resample_counts(np.random.default_rng(3), 6, 50)
        want = [np.percentile(np.concatenate([np.repeat(values[owners == o], c[o])
                                              for o in range(6)]), q) for c in counts]
        assert got == pytest.approx(want)
    # 30 requests of 1000 values each, request i holding the i-th block of the sorted values:
    # resampled medians jump by whole blocks, most outside the slice tried first (redone)
    values, owners = np.arange(30_000.0), np.repeat(np.arange(30), 1000)
    got = sig.resampled_quantiles(values, owners, 30, 50, np.random.default_rng(5), 40)
    counts = sig.resample_counts(np.random.default_rng(5), 30, 40)
    want = [np.percentile(np.repeat(values, c[owners]), 50) for c in counts]
    assert got == pytest.approx(want) and got.min() < 10_000     # below the slice: redone


def test_same_distribution_is_within_noise_and_a_30_percent_shift_is_not():
    rng = np.random.default_rng(1)      # p99 needs many requests to see 30 %: 1000 here
    a, b = rng.lognormal(3, 0.3, 1000), rng.lognormal(3, 0.3, 1000)
    own = np.arange(1000)
    for q in (50, 99):
        same = sig.quantile_diff(a, own, 1000, b, own, 1000, q)
        assert same["significant"] is False and same["reason"] is None
        assert same["a"] == pytest.approx(np.percentile(a, q))      # summary.json's definition
        assert same["diff_ci"][0] < 0 < same["diff_ci"][1]
        shifted = sig.quantile_diff(a, own, 1000, 1.3 * b, own, 1000, q)
        assert shifted["significant"] is True and shifted["diff_ci"][0] > 0
    again = sig.quantile_diff(a, own, 1000, 1.3 * b, own, 1000, 50)
    assert again == sig.quantile_diff(a, own, 1000, 1.3 * b, own, 1000, 50)     # seeded


def test_too_few_values_give_no_interval():
    x = np.arange(50.0)
    res = sig.quantile_diff(x, np.arange(50), 50, x, np.arange(50), 50, 99)
    assert res["significant"] is None and res["diff_ci"] is None
    assert "50 of the 1000 needed (10 beyond the quantile)" in res["reason"]
    # the tail rule (issue 29 item 9): 10 values beyond the quantile; p99 of 120 requests is
    # nearly their maximum and gets no interval
    assert sig.min_count(50) == 20 and sig.min_count(90) == 100 and sig.min_count(99) == 1000
    x = np.arange(120.0)
    assert sig.quantile_diff(x, np.arange(120), 120, x, np.arange(120), 120, 99)[
        "significant"] is None
    empty = sig.quantile_diff([], [], 0, x, np.arange(50), 50, 50)
    assert (empty["a"], empty["significant"], empty["reason"]) == (None, None, "no data")


def test_welch_matches_scipy_and_needs_two_runs_a_side():
    a, b = [10.0, 11.0, 10.5, 9.8], [12.0, 12.5, 11.7]
    res = sig.welch(a, b)
    assert res["p_value"] == pytest.approx(ttest_ind(b, a, equal_var=False).pvalue)
    assert res["significant"] is True and res["diff_ci"][0] > 0
    assert res["b"] - res["a"] == pytest.approx(np.mean(b) - np.mean(a))
    assert sig.welch([10.0, 10.4, 9.9], [10.1, 10.2, 10.3])["significant"] is False
    one = sig.welch([10.0], [12.0, 12.5])
    assert one["significant"] is None and one["reason"] == "fewer than 2 runs on a side"
    assert sig.welch([None, None], [1.0, 2.0])["reason"] == "no data"
    assert sig.welch([5.0, 5.0], [5.0, 5.0])["significant"] is False       # no spread, no change


def test_mean_diff_over_buckets():
    flat = [20.0, 21.0, 19.0, 20.5, 19.5] * 2
    assert sig.mean_diff(flat, flat)["significant"] is False
    res = sig.mean_diff(flat, [v * 0.7 for v in flat])
    assert res["significant"] is True and res["diff_ci"][1] < 0
    assert res["a"] == pytest.approx(20.0) and res["n"] == [10, 10]
