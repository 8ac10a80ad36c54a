"""Per-stage figures of a staged run: each stage is summarised on its own window.

    meta.json schedule.stages [{"index", "rate" | "concurrency", "start_s", "duration_s"}] + t0_ns
    records ─► stage k = the measured requests SCHEDULED in [t0 + start_k, t0 + start_k + duration_k)
           ─► requests, failures, achieved send rate, TTFT from scheduled and TPOT (p50, p99),
              ITL p99, goodput-free throughput: output tokens that ARRIVED inside the stage's
              window / its duration (a stage's tail tokens count toward the next stage)

Pure; None when the run had no stages. Latencies of a request belong to the stage it was
scheduled in, whenever it finished.
"""
from __future__ import annotations

from typing import Optional

from analysis.metrics import figures as m
from analysis.contract.meta import RunMeta
from analysis.contract.records import RecordIn, Records

NS = 1_000_000_000


def _in_window(rec: RecordIn, lo: int, hi: int) -> bool:
    t = rec.scheduled_at_ns
    return t is not None and lo <= t < hi


def stage_summary(records: Records, lo: int, hi: int) -> dict:
    """Figures of the measured records scheduled in [lo, hi) (ns, the records' clock)."""
    recs = [r for r in m.measured(records) if _in_window(r, lo, hi)]
    done = m.completed(recs)
    dur = (hi - lo) / NS
    tokens = sum(n for r in m.measured(records) for t, n in m.token_chunks(r) if lo <= t < hi)
    ttft = m.stats(m.ttft_from_scheduled_ms(r) for r in done)
    tpot = m.stats(m.tpot_ms(r) for r in done)
    return {"requests": len(recs), "completed": len(done), "failed": len(m.failed(recs)),
            "achieved_send_rate": m.rate_of(r.sent_at_ns for r in recs),
            "ttft_from_scheduled_ms": {"p50": ttft["p50"], "p99": ttft["p99"]},
            "tpot_ms": {"p50": tpot["p50"], "p99": tpot["p99"]},
            "itl_ms_p99": m.percentile(m.pooled(done, m.itl_ms), 99),
            "output_throughput": tokens / dur if dur > 0 and done else None}


def stage_summaries(records: Records, meta: Optional[dict | RunMeta]) -> Optional[list[dict]]:
    """summary.json's "stages": one object per stage of meta's schedule, or None without stages."""
    meta = RunMeta.read(meta)
    stages = meta.schedule.stages if meta.schedule else None
    t0 = meta.t0_ns
    if not stages or t0 is None:
        return None
    out = []
    for s in stages:
        lo = t0 + int(round(s.start_s * NS))
        hi = lo + int(round(s.duration_s * NS))
        out.append({"index": s.index, "rate": s.rate, "concurrency": s.concurrency,
                    "start_s": s.start_s, "duration_s": s.duration_s,
                    **stage_summary(records, lo, hi)})
    return out
