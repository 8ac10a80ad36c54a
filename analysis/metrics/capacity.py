"""A run's capacity figures: per-user decode speed, throughput and energy per accelerator.

    completed measured records ─► TPOT per request (analysis.contract.timing) ─► 1000 / TPOT
        ─► interactivity_tok_s {p50, p10}          (tokens/s one user sees while decoding)
    output_throughput, sut.json accelerators ─► output_throughput_per_accelerator
    summary "energy" (analysis.energy, status measured) ─► joules_per_output_token
    ─► capacity_fields(summary, records, sut) ─► the summary's keys (summary.json; the sweep's
       points and frontier.json read them)

Definitions (docs/metrics.md, "Capacity"):
- interactivity of a request = 1000 / TPOT_ms = (output_tokens − 1) / (e2e − TTFT) in s⁻¹: the
  decode speed one user sees after the first token; only requests with TPOT defined (completed,
  measured, > 1 output token, TPOT > 0). ``p50`` is the median of those speeds; ``p10`` is the
  10th percentile of the SPEEDS (numpy linear), the slow tail: 90 % of users decode at least
  that fast. It is not 1000 / TPOT p10 (that would be the fast tail).
- output_throughput_per_accelerator = output_throughput / target.accelerators (sut.json).
- joules_per_output_token = the energy block's J/token (measured window energy of every measured
  scope in the total, GPU + CPU package + DRAM, over the output tokens produced in that window);
  only when the energy status is "measured" (an estimate is not a measurement). It needs no
  division by the accelerators: energy and tokens are both the deployment's totals.
A figure that cannot be computed is None, with its reason under ``capacity.reasons``.
Pure functions; imports analysis.contract and analysis.metrics only.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from analysis.contract.summary_blocks import Energy
from analysis.metrics import figures as m

INTERACTIVITY_RULE = ("per request 1000 / TPOT_ms (TPOT = (e2e − TTFT) / (output_tokens − 1)), "
                      "completed measured requests with > 1 output token; p50 = median speed, "
                      "p10 = 10th percentile of the speeds (the slow tail), numpy linear")
PER_ACCELERATOR_RULE = "output_throughput / target.accelerators (sut.json)"
JOULES_RULE = ("summary energy.j_per_output_token when energy.status is measured: window energy "
               "of the measured scopes in the total (GPU + CPU package + DRAM) / output tokens "
               "in that window; the deployment's totals, so no division by accelerators")


def interactivity(tpot_ms: Any) -> dict:
    """{p50, p10, count, rule, reason} of the per-request speeds 1000 / ``tpot_ms`` (an array or
    list, NaN / None / ≤ 0 dropped). None figures with a reason when no request has a TPOT."""
    if isinstance(tpot_ms, np.ndarray) and tpot_ms.dtype == np.float64:   # the summary's array
        a = tpot_ms.ravel()
    else:
        a = np.asarray([np.nan if v is None else v for v in np.ravel(tpot_ms)], dtype=float)
    a = a[np.isfinite(a) & (a > 0)]
    if a.size == 0:
        return {"p50": None, "p10": None, "count": 0, "rule": INTERACTIVITY_RULE,
                "reason": "no completed measured request with more than one output token "
                          "(TPOT undefined)"}
    speed = 1000.0 / a
    p50, p10 = np.percentile(speed, [50, 10])
    return {"p50": float(p50), "p10": float(p10), "count": int(a.size),
            "rule": INTERACTIVITY_RULE, "reason": None}


def accelerators_of(sut: Optional[dict]) -> tuple[Optional[int], Optional[str]]:
    """(N, None) from sut.json's ``accelerators``, else (None, why)."""
    n = (sut or {}).get("accelerators")
    if isinstance(n, int) and not isinstance(n, bool) and n >= 1:
        return n, None
    if not sut:
        return None, "no sut.json: how many accelerators served is not recorded"
    return None, ("sut.json does not say how many accelerators served (target.accelerators; "
                  "written before the key)")


def per_accelerator(value: Optional[float], n: Optional[int],
                    why_n: Optional[str], what: str) -> tuple[Optional[float], Optional[str]]:
    """(value / n, None), or (None, reason)."""
    if value is None:
        return None, f"{what} is unavailable"
    if n is None:
        return None, why_n
    return value / n, None


def joules_per_output_token(energy: Optional[dict | Energy]) -> tuple[Optional[float],
                                                                      Optional[str]]:
    """(J/token, None) from a measured energy block, else (None, reason)."""
    e = Energy.read(energy)
    status = e.status
    if status != "measured":
        why = e.reason or "energy not measured"
        return None, (f"energy {status or 'unmeasured'}: {why}" if status == "estimated"
                      else f"power not measured: {why}")
    j = e.j_per_output_token
    if j is None:
        return None, "energy measured but no output token in its window"
    return float(j), None


def capacity_fields(summary: dict, records, sut: Optional[dict]) -> dict:
    """The summary's capacity keys: interactivity_tok_s, output_throughput_per_accelerator,
    joules_per_output_token and ``capacity`` (accelerators, each figure's rule and, when None,
    its reason)."""
    inter = interactivity(m.latency_series(records)["tpot_ms"])
    n, why_n = accelerators_of(sut)
    tput, why_t = per_accelerator(summary.get("output_throughput"), n, why_n,
                                  "output_throughput")
    jpt, why_j = joules_per_output_token(summary.get("energy"))
    reasons = {k: v for k, v in (("interactivity_tok_s", inter["reason"]),
                                 ("output_throughput_per_accelerator", why_t),
                                 ("joules_per_output_token", why_j)) if v}
    return {"interactivity_tok_s": inter,
            "output_throughput_per_accelerator": tput,
            "joules_per_output_token": jpt,
            "capacity": {"accelerators": n,
                         "accelerators_from": "sut.json (target.accelerators)" if n else None,
                         "rules": {"interactivity_tok_s": INTERACTIVITY_RULE,
                                   "output_throughput_per_accelerator": PER_ACCELERATOR_RULE,
                                   "joules_per_output_token": JOULES_RULE},
                         "reasons": reasons}}
