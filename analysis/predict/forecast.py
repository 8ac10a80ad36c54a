"""A forecast per load point, and its error against what a run measured.

    shape + device spec + workload lengths + load points (+ fitted overheads)
        ─► forecast() ─► {"grade", "fit", "points": [{param, value, ttft_ms_p50, tpot_ms_p50,
                          output_throughput, interactivity_tok_s_p50}], "device", "evidence", ...}
    a point's forecast + its summary.json ─► summary_block() ─► summary.json "forecast"
                                            {grade, the four figures, error: {figure: {...}}}

Grades: "spec-only" — zero overheads: the roofline floor of every step under the simulated
batching and queueing, a bound the measured figures should not beat (TTFT and TPOT no lower,
throughput and interactivity no higher); "calibrated" — the overheads fit.py found from probes
of this server. A forecast for a device other than the one measured is always spec-only and
labelled "calculated" (a what-if, never a measurement).
"""
from __future__ import annotations

from typing import Any, Optional

from analysis.predict import workload as wl
from analysis.predict.simulate import LoadPoint, simulate
from analysis.predict.step_model import Overheads, StepModel

FIGURES = ("ttft_ms_p50", "tpot_ms_p50", "output_throughput", "interactivity_tok_s_p50")
SPEC_ONLY, CALIBRATED = "spec-only", "calibrated"
# where the summary keeps each figure (analysis/metrics): (key, percentile or None)
MEASURED_AT = {"ttft_ms_p50": ("ttft_ms", "p50"), "tpot_ms_p50": ("tpot_ms", "p50"),
               "output_throughput": ("output_throughput", None),
               "interactivity_tok_s_p50": ("interactivity_tok_s", "p50")}
# figures whose bound is a floor (lower is better) vs a ceiling (higher is better)
LOWER_IS_BETTER = {"ttft_ms_p50": True, "tpot_ms_p50": True, "output_throughput": False,
                   "interactivity_tok_s_p50": False}
ASSUMPTIONS = ("one device; every weight and cached K/V byte read once per step and the FLOPs at "
               "peak (analysis.roofline.model_cost); prefill chunks share the decode step; "
               "network, tokenisation and sampling only in the fitted overheads (zero for "
               "spec-only); lengths counted in the workload's tokens")


def point_load(param: str, value: float, base: dict, closed: bool,
               all_at_once: bool = False) -> LoadPoint:
    """The LoadPoint of one sweep value; ``base``: the scenario's load block (a dict);
    ``closed``: users in flight (else arrivals at ``rate``); ``all_at_once``: without a
    concurrency every request is one user (the caller says which: the scenario's
    ``load.point_shape``)."""
    load = {**base, param.split(".")[-1]: value}
    # loadgen runs its warm-up requests as a phase of their own before the measured phase
    # starts (loadgen/run/runner.py), so the simulation starts cold with the measured requests
    if closed:                                   # offline without a cap: every request at once
        users = load.get("concurrency") or (load.get("num_requests") if all_at_once else 1)
        return LoadPoint("closed", concurrency=int(users or 1))
    kind = "constant" if load.get("arrival") == "constant" else "poisson"
    return LoadPoint(kind, concurrency=load.get("max_concurrency"), rate=float(load["rate"]))


def n_requests(load: dict, point: LoadPoint, cap: int = 2000) -> int:
    """How many requests the simulation sends: the run's measured requests (its num_requests,
    else duration × rate, else 64 per user) + the point's simulated warm-up, at most ``cap``."""
    n = load.get("num_requests")
    if n is None and load.get("duration_s") and point.rate:
        n = int(load["duration_s"] * point.rate)
    if n is None:
        n = 64 * max(1, point.concurrency or 1)
    return max(1, min(cap, int(n) + point.warmup))


def forecast(shape: dict, spec: Any, workload: dict, points: list[tuple[str, float, LoadPoint]],
             load: dict, *, overheads: Optional[Overheads] = None, fit: Optional[dict] = None,
             slots: Optional[int] = None, prefill_chunk: Optional[int] = None,
             device: Optional[dict] = None, seed: int = 0, engine: Any = None) -> dict:
    """The forecast of every point; ``overheads`` None → spec-only; ``engine``: a scheduler
    to mirror (engine_jax.JaxEngine), else the generic one (simulate.py)."""
    grade = CALIBRATED if overheads is not None else SPEC_ONLY
    model = StepModel(shape, spec, overheads or Overheads(), slots, prefill_chunk, engine)
    rows, detail = [], []
    for param, value, lp in points:
        pairs = wl.sample(workload, n_requests(load, lp), seed)
        sim = simulate(model, pairs, lp, seed=seed + 1)
        rows.append({"param": param, "value": value, **{k: sim[k] for k in FIGURES}})
        detail.append({"value": value, "requests": sim["requests"], "steps": sim["steps"],
                       "truncated": sim["truncated"]})
    dev = dict(device or {})
    evidence = "calculated" if grade == SPEC_ONLY else "calculated from measured overheads"
    if dev.get("what_if"):
        evidence = "calculated (spec-only what-if for another device; never a measurement)"
    return {"grade": grade, "fit": fit, "points": rows, "device": dev, "evidence": evidence,
            "model": {k: shape.get(k) for k in ("name", "n_params", "dtype", "slots")},
            "scheduler": "servers.jax (mirrored: analysis/predict/engine_jax.py)" if engine
            else "generic (analysis/predict/simulate.py)",
            "roofs_complete": model.complete, "assumptions": ASSUMPTIONS, "simulation": detail}


def measured(summary: dict, figure: str) -> Optional[float]:
    key, q = MEASURED_AT[figure]
    v = summary.get(key)
    if q is not None:
        v = v.get(q) if isinstance(v, dict) else None
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def error(point: dict, summary: dict) -> dict:
    """Per figure: forecast, measured, rel_error = forecast / measured − 1, and for a spec-only
    bound whether the measurement beat it (``beats_bound``); None with a reason when missing."""
    out = {}
    for k in FIGURES:
        f, m = point.get(k), measured(summary, k)
        row = {"forecast": f, "measured": m, "rel_error": None}
        if f is None or m is None or m == 0:
            row["reason"] = ("no forecast" if f is None else
                             f"the summary has no {MEASURED_AT[k][0]}" if m is None else
                             "measured 0")
        else:
            row["rel_error"] = f / m - 1.0
            row["beats_bound"] = (m < f) if LOWER_IS_BETTER[k] else (m > f)
        out[k] = row
    return out


def summary_block(grade: str, point: dict, summary: dict) -> dict:
    """summary.json "forecast" of one sweep point."""
    return {"grade": grade, **{k: point.get(k) for k in FIGURES}, "error": error(point, summary)}
