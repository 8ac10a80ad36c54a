"""Figures from a Prometheus histogram over the window: the mean, and a quantile with the bucket
that holds it.

    Series + histogram base name + window edges (a, b)
        ─► hist_mean():     Δ_sum / Δ_count ─► ms, with the count
        ─► hist_quantile(): Prometheus-style histogram_quantile over the Δ buckets, with the
                            bucket, its width (resolution) and whether the value is a point, an
                            upper or a lower bound (hist_quantile's docstring)
Every server figure is ``figure()``: {value, unit, evidence, metric, ...}; ``unmeasured()`` is
one with no value and the reason.
"""
from __future__ import annotations

from typing import Optional

from analysis.server.series import Series


def figure(value, unit: str, evidence: str, metric: Optional[str], **kw) -> dict:
    return {"value": value, "unit": unit, "evidence": evidence, "metric": metric, **kw}


def unmeasured(unit: str, metric: Optional[str], reason: str, **kw) -> dict:
    return figure(None, unit, "unmeasured", metric, reason=reason, **kw)


def hist_mean(s: Series, base: str, a: int, b: int) -> dict:
    csum, ccount = s.delta_checked(base + "_sum", a, b), s.delta_checked(base + "_count", a, b)
    dsum, dcount = csum.value, ccount.value
    if dsum is None or dcount is None:
        if base + "_count" not in s.by_name:
            return unmeasured("ms", base, f"the server exposes no {base}")
        return unmeasured("ms", base, ccount.reason or csum.reason)
    if dcount == 0:
        return unmeasured("ms", base, f"{base}_count did not grow in the window: no observations")
    return figure(dsum / dcount * 1e3, "ms", "measured", base, count=int(dcount))


def _ms(v: float) -> str:
    return f"{v:.3g}" if v < 100 else f"{v:.0f}"


def hist_quantile(s: Series, base: str, a: int, b: int, q: float) -> dict:
    """Prometheus-style histogram_quantile over the window, with the bucket that holds it.

    Every figure carries ``bucket_ms`` [lo, hi] (the bucket holding the rank; hi None for +Inf),
    ``resolution_ms`` (its width), ``bound`` and ``display`` (what the report prints):
      "point"  interpolated linearly inside a bucket with a lower edge above 0 that does not
               hold every observation: ``value`` is the estimate, ±``resolution_ms``;
      "upper"  the rank falls in the first bucket (0, hi], or every observation lies in one
               bucket: the buckets cannot place it, ``value`` is hi and the text says "≤ hi";
      "lower"  above the highest finite bucket: ``value`` is its bound, the text says "> lo".
    An interpolated point inside (0, hi] or inside a bucket that holds everything would only
    restate the interpolation's assumption (uniform inside the bucket): e.g. vLLM's queue time
    (first bucket 0–300 ms) would read "p99 297 ms" beside a 0.01 ms mean."""
    bd, refused = s.bucket_deltas_checked(base, a, b)
    if refused:
        return unmeasured("ms", base, refused)
    if not bd or bd[-1][1] <= 0:
        return unmeasured("ms", base, f"no {base} bucket observations in the window")
    total, rank = bd[-1][1], q * bd[-1][1]
    n, pct = int(total), f"p{q * 100:g}"
    lo, lo_c = 0.0, 0.0
    for i, (le, c) in enumerate(bd):
        if c >= rank:
            if le == float("inf"):
                if len(bd) == 1:
                    return unmeasured("ms", base, f"{base} has no finite buckets")
                return figure(lo * 1e3, "ms", "calculated", base, count=n,
                            bucket_ms=[lo * 1e3, None], resolution_ms=None, bound="lower",
                            display=f"> {_ms(lo * 1e3)} ms (above the highest finite bucket; "
                                    f"n={n})",
                            note="above the highest finite bucket: a lower bound")
            lo_ms, hi_ms = lo * 1e3, le * 1e3
            in_bucket = c - lo_c
            common = dict(count=n, bucket_ms=[lo_ms, hi_ms], resolution_ms=hi_ms - lo_ms)
            if in_bucket >= total:           # every observation in this one bucket
                where = "the first bucket" if i == 0 else "one bucket"
                return figure(hi_ms, "ms", "calculated", base, bound="upper",
                            display=f"≤ {_ms(hi_ms)} ms (all {n} in {where}, "
                                    f"{_ms(lo_ms)}–{_ms(hi_ms)} ms)",
                            note=f"all observations in {where}: {pct} not resolved, an upper "
                                 "bound", **common)
            if i == 0 or lo <= 0:
                return figure(hi_ms, "ms", "calculated", base, bound="upper",
                            display=f"≤ {_ms(hi_ms)} ms (in the first bucket, 0–{_ms(hi_ms)} ms;"
                                    f" n={n})",
                            note=f"{pct} in the first bucket: not resolved, an upper bound",
                            **common)
            v = lo + (le - lo) * (rank - lo_c) / in_bucket if in_bucket > 0 else le
            return figure(v * 1e3, "ms", "calculated", base, bound="point",
                        display=f"≈ {_ms(v * 1e3)} ms (interpolated in bucket "
                                f"{_ms(lo_ms)}–{_ms(hi_ms)} ms, resolution {_ms(hi_ms - lo_ms)}"
                                f" ms; n={n})",
                        note="interpolated inside its bucket", **common)
        lo, lo_c = le, c
    return unmeasured("ms", base, "inconsistent buckets")
