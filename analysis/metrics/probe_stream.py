"""load.probe's side stream: the same small request alone and beside the main load.

    probe_stream.jsonl (records, phase "probe_alone" | "probe") ─► probe_block(rows, meta)
        ─► alone:      the baseline (probes one after another before the main load)
           under_load: the probes sent during the measured phase
           each: requests, completed, failed, cancelled, TTFT (from send) p50/p99, TPOT p50/p99,
                 ITL p99, E2E p50
        ─► slowdown: under_load / alone for TTFT p50/p99, TPOT p50/p99, E2E p50
                     (None where either side is missing or the baseline is 0)

TTFT is from the send on both sides: the baseline probes are sent one after another (no
schedule), so a from-scheduled TTFT would not be comparable. Pure; None without probe rows.
"""
from __future__ import annotations

from typing import Optional

from analysis.contract.meta import ProbeAsked, RunMeta
from analysis.metrics import figures as m
from analysis.contract.records import Records, as_records


def _p(values, q: float) -> Optional[float]:
    return m.percentile(values, q)


def phase_figures(rows: Records) -> dict:
    done = m.completed(rows)
    return {"requests": len(rows), "completed": len(done), "failed": len(m.failed(rows)),
            "cancelled": len(m.cancelled(rows)),
            "ttft_ms": {"p50": _p((m.ttft_ms(r) for r in done), 50),
                        "p99": _p((m.ttft_ms(r) for r in done), 99)},
            "tpot_ms": {"p50": _p((m.tpot_ms(r) for r in done), 50),
                        "p99": _p((m.tpot_ms(r) for r in done), 99)},
            "itl_ms_p99": _p(m.pooled(done, m.itl_ms), 99),
            "e2el_ms_p50": _p((m.e2el_ms(r) for r in done), 50)}


def _ratio(a: Optional[float], b: Optional[float]) -> Optional[float]:
    return None if a is None or b is None or b <= 0 else a / b


def probe_block(rows: Records, meta: Optional[dict] = None) -> Optional[dict]:
    """summary.json's "probe_stream", or None when the run had no probe rows."""
    rows = as_records(rows)
    if not rows:
        return None
    alone = phase_figures([r for r in rows if r.phase == "probe_alone"])
    under = phase_figures([r for r in rows if r.phase == "probe"])
    slow = {"ttft_p50": _ratio(under["ttft_ms"]["p50"], alone["ttft_ms"]["p50"]),
            "ttft_p99": _ratio(under["ttft_ms"]["p99"], alone["ttft_ms"]["p99"]),
            "tpot_p50": _ratio(under["tpot_ms"]["p50"], alone["tpot_ms"]["p50"]),
            "tpot_p99": _ratio(under["tpot_ms"]["p99"], alone["tpot_ms"]["p99"]),
            "e2el_p50": _ratio(under["e2el_ms_p50"], alone["e2el_ms_p50"])}
    asked = RunMeta.read(meta).probe_stream or ProbeAsked()
    return {"rate": asked.rate, "prompt_tokens": asked.prompt_tokens,
            "output_tokens": asked.output_tokens, "alone": alone, "under_load": under,
            "slowdown": slow,
            "rule": "TTFT from send on both sides; slowdown = under load / alone (None where a "
                    "side has no value)"}
