"""analysis.metrics.bursts: tokens-per-chunk figures on the narrow counts themselves."""
import numpy as np

from analysis.metrics import bursts
from analysis.metrics.figures import stats


def test_count_stats_are_the_float_stats_of_the_same_counts():
    rng = np.random.default_rng(0)
    for _ in range(200):
        k = int(rng.integers(1, 3000))
        top = int(rng.choice([3, 17, 300, 30000]))
        sizes = rng.integers(1, top, k).astype(rng.choice([np.int16, np.int32, np.int64]))
        want = stats(sizes.astype(float))
        got = bursts._count_stats(sizes.copy())
        assert got == {key: want[key] for key in got}
        assert set(got) == {"mean", "p50", "p90", "p99", "max", "count"}
