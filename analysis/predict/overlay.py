"""The forecast beside the measured frontier: frontier.json "forecast" of a ``sweep --predict``.

    sweep.json point rows (contract/sweep.py SweepPoint), each with "forecast"
    (loadgen.multirun.predict.attach_forecasts) and the measured frontier figures
        ─► overlay(points) ─► {"grade", "points": [{run, value, x, y, x_measured, y_measured,
           error: {x, y}}], "line", "rule"}

x = interactivity p50 (tokens/s per user), y = output tokens/s per accelerator, as in
analysis.metrics.frontier; the forecast's y divides its output throughput by the point's
accelerators (measured output_throughput / output_throughput_per_accelerator, else 1).
error = forecast / measured − 1 (None when either is missing). line: the forecast's
non-dominated points. Pure, no I/O.
"""
from __future__ import annotations

from typing import Optional

from analysis.contract.sweep import SweepPoint
from analysis.metrics.frontier import on_frontier

RULE = ("forecast x = interactivity_tok_s_p50, y = output_throughput / accelerators; "
        "error = forecast / measured - 1; line = the forecast's non-dominated points")


def _num(v) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _rel(f: Optional[float], m: Optional[float]) -> Optional[float]:
    return f / m - 1.0 if f is not None and m else None


def overlay(points: list[dict | SweepPoint]) -> Optional[dict]:
    rows = [p for p in map(SweepPoint.read, points) if p.forecast is not None]
    if not rows:
        return None
    out = []
    for p in rows:
        f = p.forecast
        xm = _num(p.interactivity_tok_s.p50 if p.interactivity_tok_s else None)
        ym = _num(p.output_throughput_per_accelerator)
        tput = _num(p.output_throughput)
        acc = tput / ym if tput and ym else 1.0
        x = _num(f.interactivity_tok_s_p50)
        y = _num(f.output_throughput)
        y = y / acc if y is not None else None
        out.append({"run": p.run_dir if "run_dir" in p.model_fields_set else None,
                    "value": p.value, "x": x, "y": y, "x_measured": xm, "y_measured": ym,
                    "error": {"x": _rel(x, xm), "y": _rel(y, ym)}})
    flags = on_frontier([(r["x"], r["y"]) for r in out])
    line = sorted((r["x"], r["y"]) for r, k in zip(out, flags) if k)
    return {"grade": rows[0].forecast.grade, "points": out,
            "line": [list(t) for t in line], "rule": RULE}
