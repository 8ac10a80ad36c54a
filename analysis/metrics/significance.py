"""Is a difference between two runs beyond noise? Pure statistics for ``loadgen compare``.

    per-request values (+ which request owns each) ─► quantile_diff(...)  bootstrap over requests
    per-bucket rates of one run each               ─► mean_diff(...)      bootstrap over buckets
    one figure per run of two repeat series        ─► welch(...)          Welch's t on run means
        ─► {"a", "b", "diff_ci": [lo, hi], "significant", "method", "n": [na, nb], "reason"}

Bootstrap: ``RESAMPLES`` (2000) resamples of each run independently, seeded (``SEED``), the 95 %
interval of the difference = the 2.5th and 97.5th percentiles of (B* − A*) (percentile
method); significant when the interval excludes 0. A request is the unit resampled: a figure
pooled over requests (ITL: many gaps per request) resamples whole requests, so the gaps of one
request stay together (a cluster bootstrap). Quantiles are numpy's "linear" percentiles of the
resampled multiset, the same definition as summary.json's, so the point figures match it.

Too few values for an interval (the tail rule): a pq figure gets an interval only with at least
``TAIL_K`` (10) values beyond the quantile, i.e. ⌈TAIL_K / (1 − q/100)⌉ values (p99: 1,000; p95:
200; p90: 100), and any figure ``MIN_N`` (20) values from ``MIN_N`` requests; below that the
reason says how many are needed and ``significant`` is None. With 1/(1 − q) values (one beyond
it) p99 is nearly the sample maximum: a bootstrap of p99 over 30 values calls identical runs
different about one time in six, and p99 of 120 requests moved +26 % and +119 % between two
runs of the same setup on a busy host (issue 29).
"""
from __future__ import annotations

import math
from typing import Optional

import numpy as np
from scipy.stats import t as student_t

RESAMPLES = 2000
SEED = 0
MIN_N = 20
TAIL_K = 10                   # values beyond a quantile before it gets an interval
_CELLS = 4_000_000            # resamples × values handled at once (memory bound, ~16 MB int32)
_WINDOW = 5000               # sorted values each side of the quantile tried first


def _result(a, b, diff_ci, method: str, n, reason: Optional[str] = None, **extra) -> dict:
    sig = None if diff_ci is None else bool(diff_ci[0] > 0 or diff_ci[1] < 0)
    return {"a": a, "b": b, "diff_ci": diff_ci, "significant": sig, "method": method,
            "n": list(n), "reason": reason, **extra}


def min_count(q: float) -> int:
    """Values needed before the q-th percentile gets an interval: TAIL_K beyond it, MIN_N in
    all (p50: 20, p90: 100, p99: 1,000)."""
    return max(MIN_N, math.ceil(TAIL_K / (1 - q / 100) - 1e-9)) if q < 100 else MIN_N


def quantile(values: np.ndarray, q: float) -> Optional[float]:
    return float(np.percentile(values, q, method="linear")) if values.size else None


def resample_counts(rng, n: int, resamples: int) -> np.ndarray:
    """(resamples, n) int32: how often each of n units is drawn in each resample of n draws."""
    idx = rng.integers(0, n, size=(resamples, n)) + (np.arange(resamples) * n)[:, None]
    return np.bincount(idx.ravel(), minlength=resamples * n).reshape(resamples, n).astype(
        np.int32)


def _window_quantiles(x, own, counts, lo: int, hi: int, q: float) -> tuple[np.ndarray, np.ndarray]:
    """Quantiles of each resample from the sorted values x[lo:hi] only; ``ok`` False for rows
    whose quantile lies outside that slice (the caller redoes those over all values)."""
    n = counts.shape[1]
    total = counts @ np.bincount(own, minlength=n).astype(np.int64)          # values drawn
    below = counts @ np.bincount(own[:lo], minlength=n).astype(np.int64)     # ... under x[lo]
    h = q / 100 * (total - 1)
    k0 = np.floor(h)
    k1 = np.minimum(k0 + 1, total - 1)
    seg, width = own[lo:hi], hi - lo
    vals, ok = np.full(len(counts), np.nan), np.zeros(len(counts), dtype=bool)
    step = max(1, _CELLS // max(1, width))
    for s in range(0, len(counts), step):
        r = slice(s, s + step)
        c = below[r, None] + np.cumsum(counts[r][:, seg], axis=1, dtype=np.int64)   # ranks
        j0 = lo + np.minimum((c <= k0[r, None]).sum(axis=1), width - 1)   # the k-th smallest
        j1 = lo + np.minimum((c <= k1[r, None]).sum(axis=1), width - 1)
        vals[r] = x[j0] + (h[r] - k0[r]) * (x[j1] - x[j0])
        ok[r] = (total[r] > 0) & (below[r] <= k0[r]) & (k1[r] < c[:, -1])
    return vals, ok


def resampled_quantiles(values, owners, n_owners: int, q: float, rng, resamples: int = RESAMPLES
                        ) -> np.ndarray:
    """q-th percentile of each of ``resamples`` bootstrap resamples: each resample draws
    ``n_owners`` requests with replacement and pools the values they own (``owners[i]`` is the
    request of ``values[i]``). NaN where a resample holds no value. Works on the sorted values
    near the full sample's quantile first (pooled ITL can hold 10⁵–10⁶ values), and over all
    values for the few resamples whose quantile falls outside that slice."""
    x = np.asarray(values, dtype=float)
    order = np.argsort(x, kind="stable")
    x, own = x[order], np.asarray(owners, dtype=np.int64)[order]
    counts = resample_counts(rng, n_owners, resamples)
    if x.size == 0:
        return np.full(resamples, np.nan)
    centre, half = int(q / 100 * (x.size - 1)), max(_WINDOW, x.size // 20)
    lo, hi = max(0, centre - half), min(x.size, centre + half + 1)
    vals, ok = _window_quantiles(x, own, counts, lo, hi, q)
    redo = ~ok & (counts.sum(axis=1) > 0)
    if redo.any() and (lo, hi) != (0, x.size):
        vals[redo], _ = _window_quantiles(x, own, counts[redo], 0, x.size, q)
    return vals


def _ci(diffs: np.ndarray) -> Optional[list]:
    d = diffs[np.isfinite(diffs)]
    if d.size < 0.9 * diffs.size:
        return None
    lo, hi = np.percentile(d, [2.5, 97.5])
    return [float(lo), float(hi)]


def quantile_diff(a_vals, a_owners, a_n: int, b_vals, b_owners, b_n: int, q: float,
                  seed: int = SEED, resamples: int = RESAMPLES) -> dict:
    """Bootstrap interval of pq(B) − pq(A); ``*_n`` = requests of each run (resampling units)."""
    av, bv = np.asarray(a_vals, dtype=float), np.asarray(b_vals, dtype=float)
    a, b = quantile(av, q), quantile(bv, q)
    method = f"bootstrap over requests ({resamples} resamples, seed {seed})"
    need = min_count(q)
    n = (int(av.size), int(bv.size))
    if a is None or b is None:
        return _result(a, b, None, method, n, "no data")
    if min(n) < need or min(a_n, b_n) < MIN_N:
        return _result(a, b, None, method, n,
                       f"too few values for an interval of p{q:g}: {min(n)} of the {need} "
                       f"needed ({TAIL_K} beyond the quantile) and {MIN_N} requests per run; "
                       "gate on --repeat series instead")
    rng = np.random.default_rng(seed)
    qa = resampled_quantiles(av, a_owners, a_n, q, rng, resamples)
    qb = resampled_quantiles(bv, b_owners, b_n, q, rng, resamples)
    ci = _ci(qb - qa)
    return _result(a, b, ci, method, n, None if ci else "resamples without data")


def mean_diff(a_buckets, b_buckets, seed: int = SEED, resamples: int = RESAMPLES,
              unit: str = "time buckets") -> dict:
    """Bootstrap interval of mean(B) − mean(A) over ``unit`` (e.g. the per-bucket rates of one
    run each: their mean is the run's rate when the buckets split its window evenly)."""
    av, bv = np.asarray(a_buckets, dtype=float), np.asarray(b_buckets, dtype=float)
    method = f"bootstrap over {unit} ({resamples} resamples, seed {seed})"
    a = float(av.mean()) if av.size else None
    b = float(bv.mean()) if bv.size else None
    if a is None or b is None:
        return _result(a, b, None, method, (av.size, bv.size), "no data")
    rng = np.random.default_rng(seed)

    def means(v: np.ndarray) -> np.ndarray:
        return resample_counts(rng, v.size, resamples) @ v / v.size
    return _result(a, b, _ci(means(bv) - means(av)), method, (av.size, bv.size))


def welch(a_runs, b_runs) -> dict:
    """Welch's t on run means: mean(B) − mean(A) ± t(0.975, ν)·√(s²a/na + s²b/nb), ν by
    Welch–Satterthwaite; significant when the interval excludes 0 (p < 0.05, two-sided)."""
    av = np.asarray([v for v in a_runs if v is not None], dtype=float)
    bv = np.asarray([v for v in b_runs if v is not None], dtype=float)
    method = "Welch's t on run means"
    n = (int(av.size), int(bv.size))
    a = float(av.mean()) if av.size else None
    b = float(bv.mean()) if bv.size else None
    if min(n) < 2:
        return _result(a, b, None, method, n,
                       "no data" if a is None or b is None else "fewer than 2 runs on a side")
    va, vb = av.var(ddof=1) / n[0], bv.var(ddof=1) / n[1]
    se, d = math.sqrt(va + vb), b - a
    if se == 0:
        return _result(a, b, [d, d], method, n, p_value=None if d == 0 else 0.0)
    df = (va + vb) ** 2 / (va ** 2 / (n[0] - 1) + vb ** 2 / (n[1] - 1))
    half = float(student_t.ppf(0.975, df)) * se
    p = float(2 * student_t.sf(abs(d) / se, df))
    return _result(a, b, [d - half, d + half], method, n, p_value=p, df=float(df))
