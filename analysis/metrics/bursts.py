"""Tokens per content chunk (what a user sees as bursts) and ITL per token vs per chunk.

    completed measured records ─► their token chunks (analysis.contract.timing.token_chunks:
        chunks with n_tokens > 0) ─►
      tokens_per_chunk   stats of n over every token chunk (mean, p50, p90, p99, max, count)
                         and the histogram {n: chunks} ("16+" gathers larger ones)
      multi_token_chunk_share   chunks with n > 1 / token chunks
      tokens_in_bursts_share    tokens that came in chunks with n > 1 / tokens in token chunks
      itl_ms_per_token   the summary's itl_ms (gap_k / n_k, token-weighted): p50, p99, mean
      itl_ms_per_chunk   the raw gaps gap_k, one per token chunk after the first (the summary's
                         chunk_gap_ms): p50, p99, mean
A server that streams one token per chunk has both ITLs equal; speculative decoding (several
accepted tokens in one step), server-side batching of deltas or a proxy's buffering make chunks
of several tokens: per chunk the gap is longer, per token shorter. The same definitions as
analysis.contract.timing (itl_ms, chunk_gaps_ms); nothing here changes those figures.
None (with ``reason``) when no completed measured request streamed a token chunk.
"""
from __future__ import annotations

import numpy as np

from analysis.metrics import figures as m

HIST_CAP = 16


def _short(values: np.ndarray) -> dict:
    s = m.stats(values)
    return {"mean": s["mean"], "p50": s["p50"], "p99": s["p99"], "count": s["count"]}


def _count_stats(sizes: np.ndarray) -> dict:
    """figures.stats' mean, p50, p90, p99, max and count of whole token counts, on the narrow
    integers themselves (no float copy): every partial sum is a whole number (exact in float),
    and numpy's percentile interpolates integers as it does their floats: the same figures."""
    out = {"count": int(sizes.size), "mean": float(sizes.sum()) / sizes.size,
           "max": float(sizes.max())}
    qs = np.percentile(sizes, [50, 90, 99], method="linear", overwrite_input=True)
    out.update(p50=float(qs[0]), p90=float(qs[1]), p99=float(qs[2]))
    return out


def bursts_block(records: list) -> dict:
    """summary.json's spec_decode "client" block (see the module doc): on the records' table
    (analysis.contract.records), the ITLs being the summary's own arrays (figures.latency_series)."""
    t, _, done, _ = m.selections(records)
    keep = t.n > 0
    keep &= done[t.record_of_chunk()]
    sizes = t.n[keep]                               # (narrow ints: sums go to int64)
    if not sizes.size:
        return {"status": "unmeasured", "reason": "no completed measured request streamed a "
                "token chunk (api.stream: false, or none completed)", "tokens_per_chunk": None,
                "histogram": None, "multi_token_chunk_share": None, "tokens_in_bursts_share": None,
                "itl_ms_per_token": None, "itl_ms_per_chunk": None}
    series = m.latency_series(records)
    s = _count_stats(sizes)
    counts = np.bincount(np.minimum(sizes, HIST_CAP))      # (every size is at least 1)
    vals = np.flatnonzero(counts)
    hist = {(f"{HIST_CAP}+" if v >= HIST_CAP else str(int(v))): int(counts[v]) for v in vals}
    multi = sizes[sizes > 1]
    per_token, per_chunk = series["itl_ms"], series["chunk_gap_ms"]
    return {"status": "measured", "reason": None,
            "tokens_per_chunk": {k: s[k] for k in ("mean", "p50", "p90", "p99", "max", "count")},
            "histogram": hist,
            "multi_token_chunk_share": multi.size / sizes.size,
            "tokens_in_bursts_share": int(multi.sum()) / int(sizes.sum()),
            "itl_ms_per_token": _short(per_token) if per_token.size else None,
            "itl_ms_per_chunk": _short(per_chunk) if per_chunk.size else None}
