"""loadgen/client/kernel_stamps.py: the clock conversion on fixed numbers, the per-pool figures."""
import socket
import struct
import time
from types import SimpleNamespace

import pytest

from loadgen.client import kernel_stamps
from loadgen.client.wire.pool import WirePool
from loadgen.record import now_ns


def test_clock_conversion_on_fixed_numbers():
    samples = [(1_000, 5_000_000_700, 1_900),      # width 900
               (2_000, 5_000_001_350, 2_100),      # width 100: kept; midpoint 2_050
               (3_000, 5_000_002_000, 3_400),
               (4_000, 1, 3_999)]                  # mono went backwards: ignored
    off, width = kernel_stamps.best_bracket(samples)
    assert (off, width) == (5_000_001_350 - 2_050, 100)
    cm = kernel_stamps.ClockMap(off, width, 4, 0, "test")
    assert cm.to_mono(5_000_001_350) == 2_050 and cm.to_mono(5_000_011_350) == 12_050
    ts = struct.pack("qq", 1_700_000_000, 123_456_789)
    assert kernel_stamps.realtime_ns(ts) == 1_700_000_000_123_456_789
    anc = [(socket.SOL_SOCKET, 99, b"x" * 16), (socket.SOL_SOCKET, kernel_stamps.SCM_TIMESTAMPNS, ts)]
    assert kernel_stamps.stamp_of(anc) == 1_700_000_000_123_456_789
    assert kernel_stamps.stamp_of([]) is None
    with pytest.raises(ValueError):
        kernel_stamps.best_bracket([])


def test_measure_takes_the_tightest_bracket_of_injected_clocks():
    mono = iter(range(0, 10_000, 10)).__next__          # +10 per call
    rt = iter(range(1_000_000, 2_000_000, 1_000)).__next__
    cm = kernel_stamps.measure(5, mono=mono, realtime=rt)
    assert cm.width_ns == 10 and cm.samples == 5 and "tightest of 5" in cm.method
    assert cm.offset_ns == 1_000_000 - 5                 # first sample: (0, 1_000_000, 10)


def test_real_clock_offset_is_consistent():
    cm = kernel_stamps.measure()
    m = now_ns()
    r = time.time_ns()
    assert cm.width_ns >= 0 and abs(cm.to_mono(r) - m) < 50_000_000   # same clock, any load


def test_stamps_fold_and_describe_the_source():
    st = kernel_stamps.Stamps("user")
    assert st.source == "user" and st.describe()["clock"] is None
    resp = SimpleNamespace(n_reads=4, kernel_reads=4, future_stamps=0, lag_sum_ns=400, lag_max_ns=150)
    st.fold(resp)
    assert st.source == "kernel" and st.describe()["read_lag_ns"] == {"max": 150, "mean": 100}
    st.fold(SimpleNamespace(n_reads=2, kernel_reads=0, future_stamps=0, lag_sum_ns=0, lag_max_ns=0))
    d = st.describe()
    assert (d["stamp_source"], d["reads"], d["kernel_stamped_reads"], d["responses"]) == ("mixed", 6, 4, 2)
    with pytest.raises(ValueError):
        kernel_stamps.Stamps("kernel")


async def test_a_stepped_wall_clock_is_adopted_and_listed():
    async with WirePool() as pool:
        st = pool.stamps
        if st.clock is None:
            pytest.skip("no kernel timestamps here")
        true = st.clock.offset_ns
        st.clock.offset_ns = true + 10_000_000          # as if REALTIME had been stepped by -10 ms
        moved = st.check_clock()
        assert abs(moved + 10_000_000) < 1_000_000
        assert abs(st.clock.offset_ns - true) < 1_000_000
        assert len(st.clock_steps) == 1 and pool.describe()["clock_steps"] == st.clock_steps
        assert abs(st.check_clock()) < 500_000 and len(st.clock_steps) == 1
