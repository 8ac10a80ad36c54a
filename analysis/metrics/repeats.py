"""Repeats: N runs of one scenario ─► the mean and a 95 % confidence interval of each headline.

    [summary.json of run 1..N] ─► repeat_summary() ─► {"runs", "rule", "figures": {name: {"mean",
        "std", "ci95_low", "ci95_high", "n", "values"}}, "verdicts"}

CI: mean ± t(0.975, n−1) · s / √n (Student's t; s the sample std, ddof 1). A figure missing in a
run is left out of that figure's n; with fewer than 2 values the interval is None, never 0.
"""
from __future__ import annotations

import math
from typing import Optional

from scipy.stats import t as student_t

HEADLINES = {  # name ─► path in summary.json
    "request_throughput": ("request_throughput",), "output_throughput": ("output_throughput",),
    "goodput": ("goodput",),
    "ttft_ms_p50": ("ttft_ms", "p50"), "ttft_ms_p99": ("ttft_ms", "p99"),
    "ttft_from_scheduled_ms_p50": ("ttft_from_scheduled_ms", "p50"),
    "ttft_from_scheduled_ms_p99": ("ttft_from_scheduled_ms", "p99"),
    "tpot_ms_p50": ("tpot_ms", "p50"), "tpot_ms_p99": ("tpot_ms", "p99"),
    "itl_ms_p99": ("itl_ms", "p99"), "e2el_ms_p50": ("e2el_ms", "p50"),
}
RULE = "mean ± t(0.975, n−1)·s/√n over the runs (Student's t, sample std); None below 2 values"


def _get(summary: dict, path: tuple) -> Optional[float]:
    v = summary
    for k in path:
        v = v.get(k) if isinstance(v, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def interval(values: list[float]) -> dict:
    """mean, std (ddof 1), the 95 % CI and n of ``values``."""
    n = len(values)
    out: dict = {"n": n, "values": values, "mean": None, "std": None,
                 "ci95_low": None, "ci95_high": None}
    if not n:
        return out
    mean = sum(values) / n
    out["mean"] = mean
    if n >= 2:
        s = math.sqrt(sum((x - mean) ** 2 for x in values) / (n - 1))
        half = float(student_t.ppf(0.975, n - 1)) * s / math.sqrt(n)
        out.update(std=s, ci95_low=mean - half, ci95_high=mean + half)
    return out


def repeat_summary(summaries: list[dict]) -> dict:
    figures = {name: interval([v for v in (_get(s, p) for s in summaries) if v is not None])
               for name, p in HEADLINES.items()}
    return {"runs": len(summaries), "rule": RULE, "figures": figures,
            "verdicts": [(s.get("verdict") or {}).get("valid") for s in summaries]}
