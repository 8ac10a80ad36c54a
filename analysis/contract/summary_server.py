"""summary.json's blocks of what the server said (speculative decoding), typed for the readers.

    analysis.server.spec_decode.spec_decode_summary (+ analysis.metrics.bursts.bursts_block)
        ─► SpecDecode (summary.json "spec_decode") ─► analysis.report.served (report, console)

Open blocks: the keys readers use are named and typed (a misspelt one is an AttributeError, not a
silent None), the rest kept as computed. A figure the server did not give is None, never 0.
"""
from __future__ import annotations

from typing import Optional

from pydantic import Field

from analysis.contract.base import Open


class SpecPosition(Open):
    """One draft position: the tokens accepted there, and their share of the drafts."""
    position: int
    accepted_tokens: Optional[int] = None
    acceptance_rate: Optional[float] = None


class ChunkStats(Open):
    """A short distribution (tokens per chunk, ITL per token / per chunk)."""
    mean: Optional[float] = None
    p50: Optional[float] = None
    p90: Optional[float] = None
    p99: Optional[float] = None
    max: Optional[float] = None
    count: int = 0


class SpecClient(Open):
    """analysis.metrics.bursts.bursts_block: the client's tokens per content chunk."""
    status: Optional[str] = None
    reason: Optional[str] = None
    tokens_per_chunk: Optional[ChunkStats] = None
    histogram: Optional[dict[str, int]] = Field(None, description="tokens per chunk: chunks")
    multi_token_chunk_share: Optional[float] = None
    tokens_in_bursts_share: Optional[float] = None
    itl_ms_per_token: Optional[ChunkStats] = None
    itl_ms_per_chunk: Optional[ChunkStats] = None


class SpecDecode(Open):
    """Speculative decoding: the server's draft/accept counters over the window (measured, or
    unmeasured with the reason) and the client's tokens per chunk."""
    status: Optional[str] = None
    reason: Optional[str] = None
    source: Optional[str] = None
    draft_tokens: Optional[int] = None
    accepted_tokens: Optional[int] = None
    drafts: Optional[int] = None
    acceptance_rate: Optional[float] = None
    mean_acceptance_length: Optional[float] = None
    per_position: Optional[list[SpecPosition]] = None
    client: Optional[SpecClient] = None
