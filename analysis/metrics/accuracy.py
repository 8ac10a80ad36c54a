"""summary.json ``accuracy``: how many checkable answers were right, with a 95 % interval.

    records' ``correct`` (loadgen.client.accuracy.grade, after each stream) + meta ``accuracy``
    (the check that ran: dataset, rule) ─► accuracy_block ─► {n, correct, fraction, ci95, ...}

n counts the measured records whose answer was checkable (correct true or false); the rest are
counted by why not (failed or cancelled; cut by max_tokens while it could still match;
over_budget, listed when seen: output_chars, reasoning included, over MAX_GRADED_CHARS
(loadgen.scenario.limits' bound, mirrored here: analysis reads no loadgen), not graded; other:
e.g. a regex grade past its time bound, loadgen.client.accuracy.GRADE_BUDGET_S).
fraction = correct / n; ci95 = the Wilson score interval (z = 1.96), which stays inside [0, 1]
and is defined at 0 and n (a normal interval is not). n = 0: fraction and ci95 null with the
reason. No check ran (no workload.dataset): the block is null.
"""
from __future__ import annotations

import math
from typing import Optional

from analysis.metrics.figures import field, measured

Z95 = 1.959963984540054
MAX_GRADED_CHARS = 65_536   # a longer answer is not graded (loadgen.client.accuracy): unchecked


def wilson(k: int, n: int, z: float = Z95) -> Optional[tuple[float, float]]:
    """The Wilson score interval of k successes in n trials; None when n is 0."""
    if n <= 0:
        return None
    p = k / n
    den = 1 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    lo = 0.0 if k == 0 else max(0.0, mid - half)     # exact at the ends (no 1e-17 residue)
    hi = 1.0 if k == n else min(1.0, mid + half)
    return lo, hi


def accuracy_block(records: list, meta: dict) -> Optional[dict]:
    """The "accuracy" object (see the module doc); None when no check ran."""
    check = meta.get("accuracy")
    recs = measured(records)
    graded = field(recs, "correct")
    if not check and graded.count(None) == len(graded):
        return None
    n = sum(g is not None for g in graded)
    k = sum(g is True for g in graded)
    unchecked = {"failed_or_cancelled": 0, "cut_by_max_tokens": 0, "other": 0}
    ungraded = [i for i, g in enumerate(graded) if g is None]     # fields, not Records
    status, finish, chars = (field(recs, f) for f in ("status", "finish_reason", "output_chars"))
    for i in ungraded:
        why = ("failed_or_cancelled" if status[i] != "ok" else
               "cut_by_max_tokens" if finish[i] == "length" else
               "over_budget" if (chars[i] or 0) > MAX_GRADED_CHARS else "other")
        unchecked[why] = unchecked.get(why, 0) + 1     # over_budget: listed when seen
    ci = wilson(k, n)
    out = {"ran": True, "n": n, "correct": k, "fraction": k / n if n else None,
           "ci95": list(ci) if ci else None, "requests": len(recs), "unchecked": unchecked,
           "ci_rule": "Wilson score interval, z = 1.96, over the n checkable answers",
           "dataset": (check or {}).get("dataset") if isinstance(check, dict) else None,
           "rule": (check or {}).get("rule") if isinstance(check, dict) else None}
    if not n:
        out["reason"] = ("no answer was checkable: " + ", ".join(
            f"{v} {k_.replace('_', ' ')}" for k_, v in unchecked.items() if v)
            if recs else "no measured request")
    return out
