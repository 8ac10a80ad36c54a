"""A big run's timeline is drawn through a bounded subset that keeps the outliers (plots.drawn)."""
import numpy as np
import pytest

from analysis.report import plots
from tests.analysis.synth import steady


def test_drawn_keeps_all_below_the_limit():
    v = np.arange(10.0)
    assert plots.drawn([v, v], limit=10).tolist() == list(range(10))


def test_drawn_bounds_the_points_and_keeps_each_series_slowest():
    rng = np.random.default_rng(3)
    ttft, e2e = rng.gamma(2.0, 10.0, 100_000), rng.gamma(2.0, 50.0, 100_000)
    ttft[17], e2e[99_000] = 1e6, 1e7                # one outlier in each series
    ttft[5] = np.nan                                # undefined: never taken for a slow one
    pick = plots.drawn([ttft, e2e])
    assert pick.size == plots.TIMELINE_POINTS
    assert (np.diff(pick) > 0).all()                # in their order, no point twice
    assert 17 in pick and 99_000 in pick
    k = int(100_000 * plots.TAIL)                   # the slowest 1 % of each series, all of them
    for v in (ttft, e2e):
        slowest = np.argsort(np.where(np.isnan(v), -np.inf, v))[-k:]
        assert np.isin(slowest, pick).all()
    again = plots.drawn([ttft.copy(), e2e.copy()])  # seeded: the same picture every time
    assert again.tolist() == pick.tolist()


def test_timeline_caption_says_how_many_were_drawn():
    if not plots.available():
        pytest.skip("matplotlib not installed")
    recs = steady(plots.TIMELINE_POINTS + 500, gap_ms=1)
    img, note = plots.timeline_png(recs, False)
    assert img and f"{plots.TIMELINE_POINTS:,} of {plots.TIMELINE_POINTS + 500:,} completed" in note
    img, note = plots.timeline_png(recs[:100], False)
    assert img and note == "per-request latency vs send time (measured, client-side)"
