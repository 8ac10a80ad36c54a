"""Per-replica figures of a run balanced over several URLs (``target.urls``).

    records with "target_url" ─► replicas_block(records, slo, from_scheduled)
        ─► one object per URL (in the order first seen): requests, completed, failed, cancelled,
           share of the measured requests, TTFT (headline form) p50/p99, TPOT p50/p99, ITL p99,
           E2E p50, request/output throughput and goodput over the RUN's window (the same window
           for every replica, so the replicas' rates add up to the run's)

Pure; None when no measured record names a replica (one target URL). A request that failed
before it was sent still names the replica it was meant for.
"""
from __future__ import annotations

from typing import Optional

from analysis.metrics import figures as m
from analysis.contract.records import Records


def _p(values, q: float) -> Optional[float]:
    return m.percentile(values, q)


def replica_figures(recs: Records, win, slo: Optional[dict], from_scheduled: bool,
                    total: int) -> dict:
    """Figures of one replica's measured records ``recs`` over the run's window ``win``."""
    done = m.completed(recs)
    ttft = m.ttft_from_scheduled_ms if from_scheduled else m.ttft_ms
    return {"requests": len(recs), "completed": len(done), "failed": len(m.failed(recs)),
            "cancelled": len(m.cancelled(recs)),
            "share": len(recs) / total if total else None,
            "ttft_ms": {"p50": _p((ttft(r) for r in done), 50), "p99": _p((ttft(r) for r in done), 99)},
            "tpot_ms": {"p50": _p((m.tpot_ms(r) for r in done), 50),
                        "p99": _p((m.tpot_ms(r) for r in done), 99)},
            "itl_ms_p99": _p(m.pooled(done, m.itl_ms), 99),
            "e2el_ms_p50": _p((m.e2el_ms(r) for r in done), 50),
            "request_throughput": m.request_throughput(recs, win),
            "output_throughput": m.output_throughput(recs, win),
            "goodput": m.goodput(recs, slo, win, from_scheduled) if slo else None}


def replicas_block(records: Records, slo: Optional[dict], from_scheduled: bool) -> Optional[dict]:
    """summary.json's "replicas": {"ttft": which TTFT, "urls": [{"url", ...figures}]}, or None."""
    meas = m.measured(records)
    vals = m.field(meas, "target_url")
    if not any(vals):                               # one target (at C speed)
        return None
    recs = [r for r, v in zip(meas, vals) if v]
    urls: list[str] = []
    for r in recs:
        if r.target_url not in urls:
            urls.append(r.target_url)
    win = m.window(records)
    total = len(m.measured(records))
    out = [{"url": u, **replica_figures([r for r in recs if r.target_url == u], win, slo,
                                        from_scheduled, total)} for u in urls]
    return {"ttft": "ttft_from_scheduled_ms" if from_scheduled else "ttft_ms",
            "window_rule": m.WINDOW_RULE, "urls": out}
