"""Arrival schedules: rates within statistical tolerance, seeded, exact where they should be."""
from types import SimpleNamespace

import numpy as np
import pytest

from loadgen.scenario.model import Load
from loadgen.scenario.schedule import (NS, build_schedule, gap_cv, offline_offsets_ns, scheduled_rate,
                              seed_for, server_offsets_ns)


def rng(seed=0):
    return np.random.default_rng(seed)


def test_seed_for_load_seed_else_workload_seed_plus_one():
    def sc(load_seed, wl_seed=3):
        return SimpleNamespace(load=SimpleNamespace(seed=load_seed),
                               workload=SimpleNamespace(seed=wl_seed))
    assert seed_for(sc(None)) == 4
    assert seed_for(sc(11)) == 11
    assert seed_for(sc(0)) == 0                  # 0 is a seed, not "unset"


def test_poisson_rate_within_tolerance():
    n, rate = 20_000, 8.0
    off = server_offsets_ns(rng(1), "poisson", rate, n=n)
    assert len(off) == n and off[0] == 0 and np.all(np.diff(off) >= 0)
    # mean gap of n-1 exponential gaps: relative std 1/sqrt(n-1) ≈ 0.7 %; allow 5 sigma
    assert scheduled_rate(off) == pytest.approx(rate, rel=5 / np.sqrt(n - 1))
    assert gap_cv(off) == pytest.approx(1.0, abs=0.05)


def test_poisson_reproducible_and_seed_dependent():
    a = server_offsets_ns(rng(7), "poisson", 3.0, n=100)
    b = server_offsets_ns(rng(7), "poisson", 3.0, n=100)
    c = server_offsets_ns(rng(8), "poisson", 3.0, n=100)
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_constant_is_exact():
    off = server_offsets_ns(rng(), "constant", 4.0, n=9)
    assert off.tolist() == [i * NS // 4 for i in range(9)]
    assert scheduled_rate(off) == 4.0
    assert gap_cv(off) == 0.0
    third = server_offsets_ns(rng(), "constant", 3.0, n=4)
    assert third.tolist() == [0, 333_333_333, 666_666_667, 1_000_000_000]


def test_gamma_burstiness_changes_cv_not_rate():
    n, rate = 20_000, 5.0
    bursty = server_offsets_ns(rng(2), "gamma", rate, n=n, burstiness=0.25)
    smooth = server_offsets_ns(rng(2), "gamma", rate, n=n, burstiness=4.0)
    # CV of gamma gaps = 1/sqrt(shape): 2.0 and 0.5
    assert gap_cv(bursty) == pytest.approx(2.0, rel=0.1)
    assert gap_cv(smooth) == pytest.approx(0.5, rel=0.05)
    for off in (bursty, smooth):
        assert scheduled_rate(off) == pytest.approx(rate, rel=0.05)


def test_duration_bound_and_both_bounds():
    off = server_offsets_ns(rng(3), "poisson", 10.0, duration_s=30.0)
    assert off[-1] < 30 * NS and len(off) == pytest.approx(300, abs=5 * np.sqrt(300))
    both = server_offsets_ns(rng(3), "constant", 10.0, n=1000, duration_s=2.0)
    assert len(both) == 20                       # the duration bound wins
    fewer = server_offsets_ns(rng(3), "constant", 10.0, n=5, duration_s=100.0)
    assert len(fewer) == 5                       # the count bound wins


def test_bad_inputs_raise():
    with pytest.raises(ValueError):
        server_offsets_ns(rng(), "poisson", 0.0, n=3)
    with pytest.raises(ValueError):
        server_offsets_ns(rng(), "poisson", 1.0)
    with pytest.raises(ValueError):
        server_offsets_ns(rng(), "weibull", 1.0, n=3)


def test_offline_and_closed_schedules():
    assert offline_offsets_ns(5).tolist() == [0] * 5
    s = build_schedule(Load(mode="offline", num_requests=6), seed=0)
    assert s.count == 6 and s.describe()["scheduled_rate"] is None
    c = build_schedule(Load(mode="concurrency", concurrency=2, num_requests=6), seed=0)
    assert c.offsets_ns is None and c.count is None


def test_build_schedule_server_describe():
    s = build_schedule(Load(mode="server", rate=2.0, num_requests=50, arrival="gamma",
                            burstiness=0.5), seed=11)
    d = s.describe()
    assert d["scheduled_count"] == 50 and d["burstiness"] == 0.5
    assert d["scheduled_rate"] == pytest.approx(scheduled_rate(s.offsets_ns))
    again = build_schedule(Load(mode="server", rate=2.0, num_requests=50, arrival="gamma",
                                burstiness=0.5), seed=11)
    assert np.array_equal(s.offsets_ns, again.offsets_ns)
