"""Speculative decoding over the measured window: the server's counters and the client's bursts.

    server_metrics.jsonl ─► series.Series ─► window edges (series.window_edges, as server_metrics)
        Δ vllm:spec_decode_num_drafts_total           drafts (proposal rounds)
        Δ vllm:spec_decode_num_draft_tokens_total     draft tokens proposed
        Δ vllm:spec_decode_num_accepted_tokens_total  draft tokens accepted
        Δ vllm:spec_decode_num_accepted_tokens_per_pos_total{position=k}   (where exposed)
      acceptance_rate        = accepted / draft tokens
      mean_acceptance_length = 1 + accepted / drafts   (vLLM's convention: the bonus token counts;
                                                        tokens one verification step yields)
      per_position[k]        = accepted at position k / drafts
    records.jsonl ─► analysis.metrics.bursts.bursts_block ─► "client": tokens per content chunk
        (what a user sees as bursts) and ITL per token vs per chunk

Every figure is None with ``reason`` when the server has no such counters, nothing was scraped,
or no draft was made in the window; never 0 for "unknown". Counters are summed over label sets
(engines, model names); through sanity.py: a counter that went down anywhere in the window (a
restart), or a NaN, gives no delta; accepted > draft tokens gives no rate (the reason says so).
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path
from typing import Optional

from analysis.server import sanity
from analysis.server.series import FILE, Series, window_edges
from analysis.contract.rundir import has_records, records_path

DRAFTS = "vllm:spec_decode_num_drafts_total"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens_total"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens_total"
PER_POS = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
FIGURES = ("acceptance_rate", "mean_acceptance_length", "draft_tokens", "accepted_tokens")


def empty(reason: str, source: Optional[str] = None) -> dict:
    return {"status": "unmeasured", "reason": reason, "source": source,
            **{k: None for k in FIGURES}, "drafts": None, "per_position": None}


def per_position(s: Series, a: int, b: int, drafts: float) -> Optional[list[dict]]:
    """[{position, accepted_tokens, acceptance_rate}] from the per-position counter, or None."""
    pts = s.by_name.get(PER_POS)
    if not pts:
        return None
    by_pos: dict[int, float] = defaultdict(float)
    for key, series in pts.items():
        pos = dict(key).get("position")
        if pos is None or not str(pos).isdigit():
            continue
        one = Series([])
        one.by_name[PER_POS] = {key: series}
        if not series or series[0][0] > b:
            continue
        d = one.delta_checked(PER_POS, a, b)
        if not d.ok:
            return None                   # one position's counter refused: no per-position split
        by_pos[int(pos)] += d.value
    if not by_pos:
        return None
    return [{"position": k, "accepted_tokens": int(v),
             "acceptance_rate": v / drafts if drafts else None} for k, v in sorted(by_pos.items())]


def server_figures(rows: list[dict], window: Optional[tuple], scraper: Optional[dict] = None) -> dict:
    """The server side of summary.json's "spec_decode" from server_metrics.jsonl rows."""
    scraper = scraper or {}
    src = scraper.get("url")
    if scraper.get("status") == "unavailable" or not rows:
        why = scraper.get("reason") or scraper.get("first_error") or (
            "scraping was off" if scraper.get("status") == "off" else f"no {FILE}")
        return empty(f"no server metrics: {why}", src)
    s = Series(rows)
    if DRAFT_TOKENS not in s.by_name or ACCEPTED not in s.by_name:
        return empty("the server's /metrics has no vllm:spec_decode_* counters (no speculative "
                     "decoding, or not vLLM)", src)
    if window is None and "measure_start" in s.marks and "measure_end" in s.marks:
        window = (s.marks["measure_start"], s.marks["measure_end"])
    if window is None or None in window:
        return empty("no measured window (t0/end) in meta.json", src)
    a, b, notes = window_edges(s, window)
    if a is None:
        return empty("; ".join(notes), src)
    cd, cdt, cacc = (s.delta_checked(n, a, b) for n in (DRAFTS, DRAFT_TOKENS, ACCEPTED))
    for c in (cdt, cacc):
        if not c.ok:
            return empty(c.reason, src)
    drafts, dt, acc = cd.value, cdt.value, cacc.value
    rate = sanity.ratio(acc, dt, "accepted tokens", "draft tokens")
    out = {"status": "measured", "reason": None, "source": src,
           "draft_tokens": int(dt), "accepted_tokens": int(acc),
           "drafts": int(drafts) if drafts is not None else None,
           "acceptance_rate": rate.value,
           "mean_acceptance_length": 1 + acc / drafts if drafts and rate.ok else None,
           "per_position": per_position(s, a, b, drafts or 0.0) if rate.ok else None,
           "window": {"start_edge_ns": a, "end_edge_ns": b, "notes": notes}}
    if not dt:
        out["reason"] = "no draft tokens in the window: acceptance undefined"
    elif not rate.ok:
        out["reason"] = rate.reason
    elif not cd.ok and DRAFTS in s.by_name:
        out["reason"] = f"{cd.reason}: mean_acceptance_length undefined"
    elif not drafts:
        out["reason"] = f"no {DRAFTS} counter: mean_acceptance_length undefined"
    return out


def spec_decode_summary(run_dir: str | Path, records: Optional[list] = None) -> dict:
    """summary.json's "spec_decode" for a run directory: the server's counters over the measured
    window (meta.json t0/end, as server_metrics) and the client's bursts from the records."""
    from analysis.contract.records import read_records
    from analysis.metrics.bursts import bursts_block
    from analysis.server.metrics import scrape_inputs
    d = Path(run_dir)
    out = server_figures(*scrape_inputs(d))
    if records is None:
        records = read_records(records_path(d)) if has_records(d) else []
    out["client"] = bursts_block(records)
    return out
