"""Per-model figures of a run that sends to several models or LoRA adapters (``api.models``).

    records with "model" ─► models_block(records, slo, from_scheduled)
        ─► {name: {share, requests, completed, failed, cancelled, ttft_ms p50/p99 (the run's
           headline TTFT: summary.json "headline_ttft"), tpot_ms p50/p99, itl_ms_p99, e2el_ms_p50,
           request/output throughput, goodput}}  (names in the order first seen)

The figures are the replicas' (analysis.metrics.replicas.replica_figures): rates over the RUN's
window, the same for every model, so the models' rates add up to the run's; share = the model's
measured requests / all measured requests. Pure; None when no measured record names a model
(one model: api.model).
"""
from __future__ import annotations

from typing import Optional

from analysis.metrics import figures as m
from analysis.metrics.replicas import replica_figures


def models_block(records: list, slo: Optional[dict], from_scheduled: bool) -> Optional[dict]:
    """summary.json's "models", or None."""
    meas = m.measured(records)
    vals = m.field(meas, "model")
    if not any(vals):
        return None
    total = len(meas)
    by: dict[str, list] = {}
    for r, v in zip(meas, vals):
        if v:
            by.setdefault(v, []).append(r)
    win = m.window(records)
    return {name: replica_figures(recs, win, slo, from_scheduled, total)
            for name, recs in by.items()}
