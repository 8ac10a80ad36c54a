"""The per-step overheads of a server, fitted to what its calibration probes measured.

    probes: [{"point": LoadPoint, "pairs": [(prompt, output)], "measured": {ttft_ms_p50,
              tpot_ms_p50, ...}}]  (2–3 short runs of this server; loadgen/commands/predict.py)
    + StepModel (the roofline floor of this model on this device)
        ─► fit_overheads() ─► {"overheads": {step_ms, per_seq_ms, prefill_ms, prefill_req_ms,
                                             turnaround_ms},
                               "floor": {scale, fitted, contradicted, note, ...},
                               "residuals": [...],
                               "rms_rel_error", "iterations", "observations"}

Unknowns θ = (step_ms, per_seq_ms, prefill_ms, prefill_req_ms, turnaround_ms), all ≥ 0, and
with ``scale_floor`` floor_scale in [0, 1] (step_model.py): the share of the roofline floor the
probes allow; below 1 the probes ran faster than the device spec's floor (a finding the output
labels), and the calibrated grade fits the overheads around what was measured instead of
stacking them on a floor the measurement beats. Observations: each probe's TPOT p50, TTFT p50 and output throughput (the
client's turnaround shows only in the last), as relative errors (simulated / measured − 1), so a 5 ms TPOT and a 200 ms TTFT weigh
alike. The forecast is the simulation (simulate.py), not a closed form, so the fit is
Gauss–Newton: the Jacobian of the simulated figures in θ by finite differences, each update a
bounded linear least-squares solve (scipy.optimize.lsq_linear), at most ``iterations`` rounds. With
the generic scheduler in a closed loop with fixed lengths the simulated TPOT, TTFT and 1 /
throughput are linear in θ (the batch in every step does not depend on the timings), so a few
rounds recover overheads that generated the data exactly; a mirrored server loop
(engine_jax.py) is only piecewise linear (when a request arrives decides the step it joins), so
the finite differences are 1 ms wide, and the residuals say how close the fit came.
"""
from __future__ import annotations

from typing import Optional

import numpy as np
from scipy.optimize import lsq_linear

from analysis.predict.simulate import simulate
from analysis.predict.step_model import NAMES, Overheads, StepModel

KEYS = ("tpot_ms_p50", "ttft_ms_p50", "output_throughput")
# finite-difference step of each overhead, ms (floor_scale: 0.01). Not smaller: a mirrored
# scheduler (engine_jax.py) is piecewise in the timings (a request that arrives just after a
# step starts waits for the next), so a tiny step can land on one jump and mislead the round
STEP_MS = 1.0
START_MS = 1.0          # where the Gauss-Newton rounds start, ms


def _observed(probes: list[dict]) -> list[tuple[int, str, float]]:
    out = []
    for i, pr in enumerate(probes):
        for k in KEYS:
            v = (pr.get("measured") or {}).get(k)
            if isinstance(v, (int, float)) and v > 0:
                out.append((i, k, float(v)))
    return out


def _simulated(model: StepModel, probes: list[dict], theta) -> list[dict]:
    m = model.with_overheads(Overheads.from_vector(theta))
    return [simulate(m, pr["pairs"], pr["point"], seed=pr.get("seed", 0)) for pr in probes]


def _vector(sims: list[dict], obs) -> np.ndarray:
    return np.array([(sims[i].get(k) or 0.0) / v - 1.0 for i, k, v in obs])


def floor_label(model: StepModel, scale: float, fitted: bool) -> dict:
    """What the fit did with the roofline floor, in words (the calibrated output shows it)."""
    b1 = model.floor_s(1, 0) * 1e3
    if not model.complete:
        note = "no device spec: no floor, the overheads carry all the time"
    elif not fitted:
        note = "the whole floor kept (not fitted)"
    elif scale > 0.999:
        note = "the probes agree with the floor: kept whole"
    else:
        note = (f"the probes ran faster than the device spec's floor allows (batch-1 decode floor "
                f"{b1:.3g} ms): the calibrated forecast keeps {scale * 100:.0f} % of it and fits "
                "the overheads around the measured times; the spec-only bound keeps it whole")
    return {"scale": float(scale), "fitted": fitted, "contradicted": fitted and scale <= 0.999,
            "batch1_decode_floor_ms": b1 if model.complete else None, "note": note}


def fit_overheads(model: StepModel, probes: list[dict], iterations: int = 8,
                  fixed: Optional[dict] = None, scale_floor: bool = False) -> dict:
    """Fit θ ≥ 0 to the probes' figures; ``fixed`` pins some overheads (name → ms).
    ``scale_floor``: also fit floor_scale in [0, 1] (a floor the probes beat is lowered, not
    forced on the calibrated forecast); else, and with no floor, it stays 1."""
    obs = _observed(probes)
    if not obs:
        raise ValueError("fit: no probe measured a TPOT or TTFT p50")
    fixed = dict(fixed or {})
    if not (scale_floor and model.complete):
        fixed.setdefault("floor_scale", 1.0)
    free = [j for j, name in enumerate(NAMES) if name not in fixed]
    upper = np.array([1.0 if NAMES[j] == "floor_scale" else np.inf for j in free])
    # start at 1 ms each, not 0: with no roofs a zero step takes no time and the simulation is
    # degenerate there (every figure 0)
    theta = np.array([float(fixed.get(name, 1.0 if name == "floor_scale" else START_MS))
                      for name in NAMES])
    rounds = 0
    for rounds in range(1, iterations + 1):
        r0 = _vector(_simulated(model, probes, theta), obs)
        jac = np.zeros((len(obs), len(free)))
        for c, j in enumerate(free):
            th = theta.copy()
            h = STEP_MS if NAMES[j] != "floor_scale" else STEP_MS / 100
            th[j] += h
            jac[:, c] = (_vector(_simulated(model, probes, th), obs) - r0) / h
        # minimise |r0 + J (x − θ_free)| over 0 ≤ x ≤ upper  ⇔  a bounded linear least squares
        x = (lsq_linear(jac, jac @ theta[free] - r0, bounds=(np.zeros(len(free)), upper),
                        method="bvls").x if free else np.array([]))
        step = np.abs(x - theta[free]).max() if free else 0.0
        theta[free] = x
        if step < 1e-6:
            break
    sims = _simulated(model, probes, theta)
    res = []
    for i, k, v in obs:
        s = sims[i].get(k)
        res.append({"probe": i, "figure": k, "measured": v, "fitted": s,
                    "rel_error": (s / v - 1.0) if s is not None else None})
    rel = [r["rel_error"] for r in res if r["rel_error"] is not None]
    scale = float(theta[NAMES.index("floor_scale")])
    return {"overheads": Overheads.from_vector(theta).as_dict(), "residuals": res,
            "floor": floor_label(model, scale, "floor_scale" not in fixed),
            "rms_rel_error": float(np.sqrt(np.mean(np.square(rel)))) if rel else None,
            "iterations": rounds, "observations": len(obs), "fixed": fixed,
            "method": "Gauss-Newton on the simulated TPOT p50, TTFT p50 and output throughput "
                      "(relative errors), a bounded linear least squares per round (overheads "
                      ">= 0, floor_scale in [0, 1])"}
