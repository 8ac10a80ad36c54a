"""summary.json's blocks of the workload's shape: stages, sessions, reasoning, the probe stream,
images, and the p50 / p99 pair the per-group tables show.

    analysis.metrics.stages / turns / probe_stream / images ─► these blocks
        ─► analysis.contract.summary.Summary ─► analysis.report.workloads (read as attributes)

Open blocks: the keys readers use are named and typed (a misspelt one is an AttributeError, not a
silent None), the rest kept as computed. ``Num`` keeps a configured number as written (a rate of 2
prints as 2, not 2.00). A missing figure is None, never 0.
"""
from __future__ import annotations

from typing import Optional, Union

from pydantic import Field

from analysis.contract.base import Open
from analysis.contract.meta import ImagesShape, ProbeAsked, StageShape
from analysis.contract.stats import P50P99

Num = Union[int, float]


class RequestCounts(Open):
    """The requests of a group (a model, a probe side) and how they ended; its figures follow."""
    requests: int = 0
    completed: int = 0
    failed: int = 0
    cancelled: int = 0


class Stage(StageShape):
    """One stage of load.stages (meta.json's schedule) and its figures (analysis.metrics.stages),
    on its own window."""
    requests: int = 0
    completed: int = 0
    failed: int = 0
    achieved_send_rate: Optional[float] = Field(None, description="measured sends per second")
    ttft_from_scheduled_ms: Optional[P50P99] = None
    tpot_ms: Optional[P50P99] = None
    itl_ms_p99: Optional[float] = None
    output_throughput: Optional[float] = None


class Turn(Open):
    """One turn number of the sessions (analysis.metrics.turns.by_turn)."""
    turn: int
    requests: int = 0
    ttft_ms: Optional[P50P99] = None
    tpot_ms: Optional[P50P99] = None
    prompt_tokens_mean: Optional[float] = None


class Sessions(Open):
    sessions: int = 0
    turns: int = 0
    turns_per_session_mean: Optional[float] = None
    turns_per_session_max: Optional[int] = None
    by_turn: list[Turn] = Field(default_factory=list)


class Reasoning(Open):
    """analysis.metrics.turns.reasoning_block: the first answer token vs the first token."""
    ttft_answer_ms: Optional[P50P99] = Field(None, description="mean, p50, p90, p99, count")
    requests_with_reasoning: int = 0
    reasoning_tokens: Optional[int] = None
    answer_tokens: Optional[int] = None
    rule: Optional[str] = None


class ProbeSide(RequestCounts):
    """The probe stream alone, or beside the main load."""
    ttft_ms: P50P99 = Field(default_factory=P50P99)
    tpot_ms: P50P99 = Field(default_factory=P50P99)
    e2el_ms_p50: Optional[float] = None


class Slowdown(Open):
    """Under load / alone; None where a side has no figure."""
    ttft_p50: Optional[float] = None
    ttft_p99: Optional[float] = None
    tpot_p50: Optional[float] = None
    tpot_p99: Optional[float] = None
    e2el_p50: Optional[float] = None


class ProbeStream(ProbeAsked):
    """load.probe (analysis.metrics.probe_stream): the side stream alone vs under the load."""
    alone: ProbeSide = Field(default_factory=ProbeSide)
    under_load: ProbeSide = Field(default_factory=ProbeSide)
    slowdown: Slowdown = Field(default_factory=Slowdown)
    rule: Optional[str] = None


class Images(ImagesShape):
    """workload.images (analysis.metrics.images): requests with images, and the pool's shape
    (meta.json's workload.images)."""
    requests: int = 0
    images: int = 0
    per_request: Optional[float] = None
    usage_prompt_tokens_mean: Optional[float] = None
