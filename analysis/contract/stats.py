"""The distributions of summary.json: Stats, the whole distribution of a latency, and the blocks
that keep part of it, each made of Stats's own fields (base.part_of: one definition of a figure).

    analysis.metrics (numpy linear percentiles) ─► Stats (summary ttft_ms, tpot_ms, itl_ms, ...)
    Stats's fields ─► ChunkStats (tokens per chunk, ITL per token / chunk, server phases)
                  ─► Spread (per-request figures: RTFx)   ─► P50P99 (per-group table rows)
        ─► analysis.contract.summary / summary_server / summary_blocks / summary_workload

All None when nothing was measured (count 0), never 0.
"""
from __future__ import annotations

from typing import Optional

from analysis.contract.base import Model, Open, part_of


class Stats(Model):
    """One latency distribution (ms): numpy linear percentiles; all None when count is 0."""
    mean: Optional[float] = None
    std: Optional[float] = None
    min: Optional[float] = None
    p50: Optional[float] = None
    p90: Optional[float] = None
    p95: Optional[float] = None
    p99: Optional[float] = None
    p999: Optional[float] = None
    max: Optional[float] = None
    count: int = 0


ChunkStats = part_of(Stats, "mean p50 p90 p99 max count", Open, "ChunkStats",
                     "A short distribution (tokens per chunk, ITL per token / per chunk).", __name__)
Spread = part_of(Stats, "mean min p50 p90 p99 max", Open, "Spread",
                 "Per-request figures' spread (the slowest is the min of a speed).", __name__)
P50P99 = part_of(Stats, "p50 p99", Open, "P50P99",
                 "A latency's p50 and p99 (ms) in a per-group row; None: no completed request.",
                 __name__)
