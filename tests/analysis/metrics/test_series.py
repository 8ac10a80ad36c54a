"""Per-bin time series: throughput, requests in flight, power."""
import pytest

from analysis.metrics import series
from tests.analysis.synth import MS, power_rows, steady


def test_tokens_requests_and_in_flight_per_bin():
    recs = steady(30, warmup=2)   # 28 measured, one every 50 ms, each 100 ms long, 8 tokens
    s = series.run_series(recs, bin_s=0.1)
    # window: first measured send (100 ms + 1 ms lag) to the last end; 0.1 s bins, the last cut
    dur = (recs[-1]["end_at_ns"] - recs[2]["sent_at_ns"]) / 1e9
    assert sum(s["widths_s"]) == pytest.approx(dur)
    assert s["widths_s"][:-1] == pytest.approx([0.1] * (len(s["widths_s"]) - 1))
    # every measured token and completion is counted once
    assert sum(r * w for r, w in zip(s["output_tokens_per_s"], s["widths_s"])) == \
        pytest.approx(28 * 8)
    assert sum(r * w for r, w in zip(s["requests_per_s"], s["widths_s"])) == pytest.approx(28)
    # two requests overlap at any time in the middle of the run
    assert s["in_flight"][3:-3] == pytest.approx([2.0] * len(s["in_flight"][3:-3]))
    assert s["power"] == []


def test_power_per_bin_from_power_and_counter_rows():
    recs = steady(20)
    end = max(r["end_at_ns"] for r in recs) / MS
    rows = power_rows(0, end, 150.0)
    # a cumulative counter rising 50 J per second from 1000 J: 50 W
    rows += [{"t_ns": int(t * 1e8), "source": "rapl", "device": "package-0",
              "scope": "cpu_package", "kind": "energy_j", "value": 1000 + 5.0 * t}
             for t in range(0, int(end / 100) + 2)]
    rows += [{"t_ns": int(t * 1e8), "source": "estimate", "device": "host", "scope": "system",
              "kind": "power_w", "value": 80.0} for t in range(0, int(end / 100) + 2)]
    s = series.run_series(recs, rows, bin_s=0.1)
    by = {p["label"]: p for p in s["power"]}
    assert set(by) == {"nvml/gpu0", "rapl/package-0", "estimate/host"}
    assert by["nvml/gpu0"]["watts"] == pytest.approx([150.0] * len(s["t_s"]))
    assert by["rapl/package-0"]["watts"] == pytest.approx([50.0] * len(s["t_s"]))
    assert by["estimate/host"]["evidence"] == "estimated"
    assert by["nvml/gpu0"]["evidence"] == "measured"


def test_no_window_and_uncovered_bins():
    assert series.run_series([])["status"] == "unavailable"
    recs = steady(20)
    rows = power_rows(0, 350, 100.0)     # samples stop at 350 ms; the run lasts ~1.05 s
    s = series.run_series(recs, rows, bin_s=0.1)
    watts = s["power"][0]["watts"]
    # bins start at the first send (1 ms): [1, 101], [101, 201], [201, 301] ms are covered
    assert watts[:3] == pytest.approx([100.0] * 3) and watts[3:] == [None] * (len(watts) - 3)
    assert series.bin_width_s(120.0) == 1.0 and series.bin_width_s(2.0) == pytest.approx(0.1)


def test_token_rates_a_block_at_a_time_are_numpys_histogram(monkeypatch):
    """series._token_rates bins token chunks a block at a time (searchsorted + bincount): the
    same sums as np.histogram (bins [a, b), the last [a, b]) for every block size."""
    import numpy as np

    class Tab:
        def __init__(self, t, n, owner):
            self.t, self.n, self._o = t, n, owner

        def record_of_chunk(self):
            return self._o

    rng = np.random.default_rng(2)
    edges = np.array([100, 150, 200, 260, 300])
    for block in (1, 3, 7, 1 << 20):
        monkeypatch.setattr(series, "BLOCK", block)
        for _ in range(50):
            m = int(rng.integers(0, 30))
            t = rng.integers(80, 320, m).astype(np.int64)
            t[: m // 4] = 300                                   # on the last edge: counted
            n = rng.integers(0, 4, m).astype(np.int16)
            owner = np.sort(rng.integers(0, 5, m)).astype(np.int32)
            meas = rng.random(5) < 0.7
            keep = (n > 0) & meas[owner]
            h, _ = np.histogram(t[keep], bins=edges, weights=n[keep].astype(float))
            want = [float(x) for x in h / (np.diff(edges).astype(float) / 1e9)]
            assert series._token_rates(Tab(t, n, owner), meas, edges) == want
