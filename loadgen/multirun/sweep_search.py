"""The max-concurrency-under-SLO search: integer bisection over full runs (no I/O here).

    probe(n) ─► True when the run at load.concurrency = n passes (its verdict is VALID)
    bracket: from concurrency_low, halve down (to 1) while it fails; then from concurrency_high
             (default 2 × the passing one) double up while it passes
    bisect:  mid = (lo + hi) // 2 until hi = lo + 1            ─► max_passing_concurrency = lo
    cap:     no probe doubles past ``cap`` (the scenario's limit, or num_requests: no run has
             more in flight); passing at the cap ends the search there, "capped at N: why"

Like max_rate_under_slo (loadgen/multirun/sweep.py) it assumes passing is monotone in the load (a
higher concurrency never passes where a lower one failed); each probe is a whole run, reused on
a rerun. The bracket after every probe is recorded with it, so the search can be read back.
"""
from __future__ import annotations

from typing import Callable, Optional


def concurrency_search(probe: Callable[[int], bool], low: int, high: Optional[int],
                       max_probes: int, cap: Optional[int] = None, cap_why: str = "") -> dict:
    """Run the search; returns {max_passing_concurrency, min_failing_concurrency, bracket:
    [[lo, hi] after each probe], converged, stopped}. ``probe`` is called at most
    ``max_probes`` times, never twice with the same value."""
    lo: Optional[int] = None
    hi: Optional[int] = None
    seen: dict[int, bool] = {}
    bracket: list[list[Optional[int]]] = []

    def ask(n: int) -> bool:
        nonlocal lo, hi
        ok = seen[n] if n in seen else probe(n)
        seen[n] = ok
        if ok:
            lo = n if lo is None else max(lo, n)
        else:
            hi = n if hi is None else min(hi, n)
        bracket.append([lo, hi])
        return ok

    top = cap if cap is not None else float("inf")
    n = low
    while len(seen) < max_probes:                 # down: a passing concurrency
        if ask(n) or n == 1:
            break
        n = max(1, n // 2)
    if lo is not None and hi is None and lo < top:    # up: a failing one, never past the cap
        n = int(min(high or lo * 2, top))
        while len(seen) < max_probes and n not in seen:
            if not ask(n) or n >= top:
                break
            n = int(min(n * 2, top))
    while lo is not None and hi is not None and hi - lo > 1 and len(seen) < max_probes:
        ask((lo + hi) // 2)
    out = {"max_passing_concurrency": lo, "min_failing_concurrency": hi, "bracket": bracket,
           "converged": False, "stopped": None, "capped": None}
    if hi is None and lo is not None and cap is not None and lo >= cap:
        shown = f"{cap:,}"
        out["capped"] = f"capped at {shown}: {cap_why}" if cap_why else f"capped at {shown}"
        out["stopped"] = (f"{out['capped']} (every probed concurrency passed; no run can go "
                          "higher)")
    elif lo is None:
        out["stopped"] = ("no probed concurrency passed" + (" (not even 1)" if 1 in seen else
                          " (max_probes reached before 1)"))
    elif hi is None:
        out["stopped"] = "every probed concurrency passed (raise sweep.concurrency_high/max_probes)"
    elif hi - lo == 1:
        out["converged"] = True
    else:
        out["stopped"] = f"max_probes {max_probes} reached before the bracket closed"
    return out
