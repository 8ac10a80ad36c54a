"""The throughput–interactivity frontier of a sweep, and two frontiers compared at one speed.

    sweep.json points (value, run_dir, interactivity_tok_s, output_throughput_per_accelerator,
                       [usd_per_million_output_tokens])
        ─► frontier(points, param) ─► frontier.json {x, y, points: [{run, param, value, x, y,
                                       on_frontier}], line, excluded, rule}
    frontiers ─► at_interactivity(line, X) ─► y on each, linear between its two neighbours;
                 refused (None, why) where X lies outside the frontier's measured x range
        ─► ahead(frontiers, X) ─► who is ahead and by how much

x = interactivity p50 (tokens/s per user, higher is better); y = output tokens/s per accelerator
(higher is better), or the cost in $ per million output tokens (lower is better) when asked.
A point is ON the frontier when no other point is at least as good on both axes and strictly
better on one (Pareto). Equal points are both on it (neither dominates). A point without x or y
is never on it and is listed under ``excluded`` with the reason; so is one whose figure is not a
finite number (NaN, Infinity: written as null, the file stays valid JSON). Only VALID points
make the frontier a comparison reads (valid_line): an INVALID point's throughput broke the SLO.
Pure functions, no I/O.
"""
from __future__ import annotations

import math
from typing import Optional

from analysis.contract.summary import Summary
from analysis.contract.sweep import Frontier, SweepPoint

X = "interactivity_tok_s.p50"
Y = "output_throughput_per_accelerator"
Y_COST = "cost.usd_per_million_output_tokens"
RULE = ("on_frontier: no other point has x ≥ and y ≥ (y ≤ for a cost) with one strictly better; "
        "ties are both on it; a point without x or y is excluded")


def capacity_row(summary: dict | Summary) -> dict:
    """A sweep point's frontier figures from its summary (analysis.metrics.capacity), the
    reasons of those that are null, and the cost per million output tokens when the summary has
    one (read, never computed here)."""
    s = Summary.read(summary)
    usd = s.cost.usd_per_million_output_tokens if s.cost else None
    old = "summary written before the capacity figures (loadgen report RUN_DIR recomputes it)"
    inter, cap = s.interactivity_tok_s, s.capacity
    return {"interactivity_tok_s": {"p50": inter.p50 if inter else None,
                                    "p10": inter.p10 if inter else None},
            "output_throughput_per_accelerator": s.output_throughput_per_accelerator,
            "joules_per_output_token": s.joules_per_output_token,
            "capacity_reasons": cap.reasons if cap and "reasons" in cap.model_fields_set else {
                "interactivity_tok_s": old, "output_throughput_per_accelerator": old},
            **({"cost": {"usd_per_million_output_tokens": usd}} if usd is not None else {})}


def dominates(a: tuple[float, float], b: tuple[float, float], y_higher: bool = True) -> bool:
    """Is ``a`` at least as good as ``b`` on both axes and strictly better on one?"""
    ya, yb = (a[1], b[1]) if y_higher else (-a[1], -b[1])
    return a[0] >= b[0] and ya >= yb and (a[0] > b[0] or ya > yb)


def on_frontier(xy: list[tuple[Optional[float], Optional[float]]],
                y_higher: bool = True) -> list[bool]:
    """For each (x, y): is it non-dominated among the points with both values? None → False."""
    ok = [x is not None and y is not None for x, y in xy]
    full = [p for p, k in zip(xy, ok) if k]
    return [k and not any(dominates(q, p, y_higher) for q in full) for p, k in zip(xy, ok)]


def _num(v) -> Optional[float]:
    """The figure as a finite float, else None (absent, not a number, NaN or ±Infinity)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        return None
    return float(v) if math.isfinite(v) else None


def _x(p: SweepPoint):
    return p.interactivity_tok_s.p50 if p.interactivity_tok_s else None


def _y_cost(p: SweepPoint):
    return p.cost.usd_per_million_output_tokens if p.cost else None


FIGURE = {X: _x, Y: lambda p: p.output_throughput_per_accelerator, Y_COST: _y_cost}


def _why_missing(p: SweepPoint, what: str) -> str:
    v = FIGURE[what](p)
    if isinstance(v, float) and not math.isfinite(v) or what in (
            p.non_finite.fields if p.non_finite else []):
        return f"{what} is not a finite number ({v}) in the point's summary: left out"
    why = p.capacity_reasons.get(what.split(".")[0])     # reasons by figure name: a mapping
    return why or f"{what} is null in the point's summary"


def frontier(points: list[dict | SweepPoint], param: str, y: str = Y) -> dict:
    """frontier.json of a sweep's point rows (loadgen/multirun/sweep.py point rows: ``value``,
    ``run_dir`` and the summary's figures under their summary names), each read as
    contract/sweep.py SweepPoint."""
    y_higher = y != Y_COST
    typed = [SweepPoint.read(p) for p in points]
    xy = [(_num(_x(p)), _num(FIGURE[y](p))) for p in typed]
    flags = on_frontier(xy, y_higher)
    rows, excluded = [], []
    for p, raw, (x, yv), f in zip(typed, points, xy, flags):
        run = p.run_dir if "run_dir" in p.model_fields_set else None
        rows.append({"run": run, "param": param, "value": p.value,
                     "x": x, "y": yv, "on_frontier": f, "valid": p.valid})
        if x is None or yv is None:
            what = X if x is None else y
            excluded.append({"run": run, "missing": what, "reason": _why_missing(p, what)})
    line = sorted((r["x"], r["y"]) for r in rows if r["on_frontier"])
    return {"x": X, "y": y, "y_better": "higher" if y_higher else "lower",
            "points": rows, "line": [list(t) for t in line], "excluded": excluded, "rule": RULE}


def at_interactivity(line: list, x: float) -> tuple[Optional[float], Optional[str]]:
    """(y at ``x`` linearly interpolated between the frontier's two neighbouring points, None),
    or (None, why) when ``x`` lies outside the frontier's measured x range (never
    extrapolated). ``line``: [[x, y], ...] (frontier()["line"])."""
    pts = sorted((float(a), float(b)) for a, b in line
                 if _num(a) is not None and _num(b) is not None)
    if not pts:
        return None, "the frontier has no point (no point had both figures)"
    lo, hi = pts[0][0], pts[-1][0]
    if x > hi:
        return None, (f"does not reach {x:g} tok/s per user: its fastest frontier point gives "
                      f"{hi:.4g}")
    if x < lo:
        return None, (f"starts above {x:g} tok/s per user (slowest frontier point {lo:.4g}): the "
                      "sweep did not load the server enough to measure there; extend it")
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x0 <= x <= x1:
            if x1 == x0:
                return max(y0, y1), None
            return y0 + (y1 - y0) * (x - x0) / (x1 - x0), None
    return pts[0][1], None                       # a single point exactly at x


def valid_line(fr: dict | Frontier) -> tuple[list, Optional[str]]:
    """The frontier of ``fr``'s points without the INVALID ones (verdict False; a point without a
    verdict, from an older file, stays): (line, None), or ([], why) when no VALID point has both
    figures. INVALID points do not make a frontier: their throughput broke the SLO."""
    f = Frontier.read(fr)
    if "points" not in f.model_fields_set:     # a bare frontier: its line as it is
        return list(f.line), None
    pts = f.points
    keep = [p for p in pts if p.valid is not False
            and _num(p.x) is not None and _num(p.y) is not None]
    if not keep:
        if pts and all(p.valid is False for p in pts):
            return [], (f"has no VALID point (all {len(pts)} INVALID): INVALID points do not "
                        "make a frontier")
        if any(p.valid is False for p in pts):
            return [], ("has no VALID point with both figures (INVALID points do not make a "
                        "frontier)")
        return [], "the frontier has no point (no point had both figures)"
    flags = on_frontier([(p.x, p.y) for p in keep], _higher(f))
    return [[p.x, p.y] for p, k in sorted(zip(keep, flags), key=lambda t: t[0].x) if k], None


def _higher(f: Frontier) -> bool:
    """Is a higher y better? ("higher" when the file does not say)"""
    return (f.y_better if "y_better" in f.model_fields_set else "higher") == "higher"


def ahead(named: list[tuple[str, dict | Frontier]], x: float) -> dict:
    """Each frontier's y at ``x`` and which is ahead: {"at_interactivity", "y", "values":
    [{name, y, reason}], "ahead", "by", "by_pct", "refused"}. Compared over those that reach x;
    ``refused`` says why when fewer than two do."""
    vals = []
    y_key, higher = Y, True
    for name, raw in named:
        fr = Frontier.read(raw)
        y_key, higher = fr.y if "y" in fr.model_fields_set else Y, _higher(fr)
        line, why = valid_line(fr)
        v, why = (None, why) if why else at_interactivity(line, x)
        left = [p.value for p in fr.points if p.valid is False]
        vals.append({"name": name, "y": v, "reason": why, "invalid_left_out": left})
    have = [v for v in vals if v["y"] is not None]
    out = {"at_interactivity": x, "y": y_key, "values": vals, "ahead": None, "by": None,
           "by_pct": None, "refused": None}
    if len(have) < 2:
        out["refused"] = ("fewer than two frontiers reach it: "
                          + "; ".join(f"{v['name']} {v['reason']}" for v in vals if v["reason"]))
        return out
    ranked = sorted(have, key=lambda v: v["y"], reverse=higher)
    best, nxt = ranked[0], ranked[1]
    gap = abs(best["y"] - nxt["y"])
    out.update(ahead=best["name"] if gap > 0 else None, by=gap,
               by_pct=gap / abs(nxt["y"]) * 100 if nxt["y"] else None, runner_up=nxt["name"])
    return out
