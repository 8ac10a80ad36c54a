"""Rounds of probes and sweep points on one server: their order, the rate points, and the errors
of every round brought together against the issue's bar (pure; bench.predict_vs_measured).

    values, round r (1, 2, ...) ─► round_order() ─► as given on odd rounds, reversed on even ones
        (the VM's speed drifts 10–20 % minute to minute: a point is measured early in one round
         and late in the next, so the drift falls on every point alike)
    a round's probes ─► max_rate() ─► the request throughput of its highest-concurrency probe
        (closed loop at the slots: the engine saturated) ─► rate_values(max, fractions)
    every round's rows [{point, value, error: {figure: {rel_error, ...}}}] (round r fitted to
        round r's probes only) ─► aggregate() ─► per point: each round's error, the median and
        the spread (min..max) per figure, and the verdict: |median| within the bar
        ─► rounds_table() (the bench's text) + the JSON line

The bar (issue 40): TPOT p50 and output throughput within 15 % at every point of a concurrency
sweep; TTFT p50 within 25 % in a Poisson rate sweep at rates up to 80 % of the measured max rate
(a point above that is shown, not judged).
"""
from __future__ import annotations

import statistics
from typing import Optional, Sequence

BARS = {"concurrency": {"tpot_ms_p50": 0.15, "output_throughput": 0.15},
        "rate": {"ttft_ms_p50": 0.25}}
RATE_JUDGED_UP_TO = 0.8                  # of the measured max rate
LABELS = {"tpot_ms_p50": "TPOT p50", "output_throughput": "out tok/s",
          "ttft_ms_p50": "TTFT p50", "interactivity_tok_s_p50": "tok/s/user"}


def round_order(values: Sequence[float], r: int) -> list:
    """Round ``r``'s (1-based) order of the points: as given on odd rounds, reversed on even."""
    vals = list(values)
    return vals if r % 2 == 1 else vals[::-1]


def max_rate(probes: list[dict]) -> Optional[float]:
    """The measured max rate (requests/s) of one round: the request throughput of its
    highest-concurrency probe that has one; None when none has."""
    got = [p for p in probes if isinstance(p.get("request_throughput"), (int, float))
           and p["request_throughput"] > 0]
    if not got:
        return None
    return float(max(got, key=lambda p: p["point"].concurrency or 0)["request_throughput"])


def rate_values(rate_max: float, fractions: Sequence[float]) -> list[float]:
    """The rate points (req/s) at ``fractions`` of a round's max rate, 4 significant digits."""
    return [float(f"{f * rate_max:.4g}") for f in fractions]


def judged(param: str, values: Sequence[Optional[float]],
           rate_max: Sequence[Optional[float]]) -> tuple[bool, str]:
    """(judged?, why not) of one point over the rounds: every concurrency point is; a rate point
    when the median over the rounds of its rate / that round's measured max rate is at most
    80 % (a round with no max rate measured does not count)."""
    if param != "rate":
        return True, ""
    share = [v / m for v, m in zip(values, rate_max) if v is not None and m]
    if not share:
        return False, "no max rate measured (no probe's request throughput)"
    mid = statistics.median(share)
    if mid > RATE_JUDGED_UP_TO * (1 + 1e-9):
        return False, (f"at {mid:.0%} of the measured max rate (median over the rounds), above "
                       f"{RATE_JUDGED_UP_TO:.0%}")
    return True, ""


def _stats(errs: list) -> dict:
    got = [e for e in errs if e is not None]
    if not got:
        return {"median": None, "min": None, "max": None, "rounds": 0}
    return {"median": statistics.median(got), "min": min(got), "max": max(got),
            "rounds": len(got)}


def aggregate(rounds: list[list[dict]], param: str,
              rate_max: Optional[list[Optional[float]]] = None,
              figures: Sequence[str] = tuple(LABELS)) -> list[dict]:
    """Per point (sorted by point): each round's error per figure, their median and spread
    (min..max; a round without the figure left out), and the verdict on the bar with the median.
    ``rounds[i]``: round i+1's rows {"point" (its identity: the value, or a rate's fraction of
    the max), "value", "error"}; ``rate_max[i]``: round i+1's measured max rate (rate sweeps)."""
    bar = BARS[param]
    rate_max = list(rate_max or []) + [None] * len(rounds)
    by: dict = {}
    for i, rows in enumerate(rounds):
        for row in rows:
            pid = row.get("point", row["value"])
            p = by.setdefault(pid, {"values": [None] * len(rounds),
                                    "errors": {k: [None] * len(rounds) for k in figures}})
            p["values"][i] = row["value"]
            for k in figures:
                p["errors"][k][i] = ((row.get("error") or {}).get(k) or {}).get("rel_error")
    out = []
    for pid in sorted(by):
        p = by[pid]
        stats = {k: _stats(p["errors"][k]) for k in figures}
        ok, why = judged(param, p["values"], rate_max[:len(rounds)])
        verdict = {k: {"tolerance": tol, "median": stats[k]["median"],
                       "pass": stats[k]["median"] is not None and abs(stats[k]["median"]) <= tol}
                   for k, tol in bar.items()}
        out.append({"point": pid, "values": p["values"], "errors": p["errors"], "stats": stats,
                    "judged": ok, "not_judged": why or None, "verdict": verdict,
                    "pass": all(v["pass"] for v in verdict.values()) if ok else None})
    return out


def passed(points: list[dict]) -> bool:
    """Every judged point within the bar (and at least one judged)."""
    judged_pts = [p for p in points if p["judged"]]
    return bool(judged_pts) and all(p["pass"] for p in judged_pts)


def _pct(e: Optional[float]) -> str:
    return "n/a" if e is None else f"{e * 100:+.1f} %"


def point_label(param: str, p: dict) -> str:
    vals = [v for v in p["values"] if v is not None]
    if param == "rate" and p["point"] not in vals:      # a fraction of each round's max rate
        return (f"rate {p['point']:g}×max (" + ", ".join(f"{v:.4g}" for v in vals)
                + " req/s)")
    return f"{param}={p['point']:g}"


def rounds_table(points: list[dict], param: str, n_rounds: int,
                 figures: Sequence[str] = tuple(LABELS)) -> str:
    """One row per point and figure: each round's error, the median, the spread; then one
    verdict line per point against the bar (the median)."""
    head = (["point", "figure"] + [f"round {r}" for r in range(1, n_rounds + 1)]
            + ["median", "spread (min..max)"])
    lines = [" | ".join(head), " | ".join("---" for _ in head)]
    for p in points:
        for k in figures:
            s = p["stats"][k]
            spread = "n/a" if s["min"] is None else f"{_pct(s['min'])} .. {_pct(s['max'])}"
            lines.append(" | ".join([point_label(param, p), LABELS.get(k, k)]
                                    + [_pct(e) for e in p["errors"][k]]
                                    + [_pct(s["median"]), spread]))
    lines.append("")
    for p in points:
        figs = ", ".join(f"{LABELS.get(k, k)} median {_pct(v['median'])} (bar "
                         f"{v['tolerance']:.0%})" for k, v in p["verdict"].items())
        if not p["judged"]:
            lines.append(f"verdict {point_label(param, p)}: not judged ({p['not_judged']}); "
                         f"{figs}")
        else:
            lines.append(f"verdict {point_label(param, p)}: "
                         f"{'within the bar' if p['pass'] else 'NOT within the bar'}: {figs}")
    return "\n".join(lines)
