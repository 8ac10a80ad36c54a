"""sweep.json: a sweep's points (one run directory each), its plan and its search result; and
frontier.json, its throughput-interactivity frontier.

    loadgen/multirun/sweep.py ─► sweep.json ─► analysis.report.sweep_state.sweep_problem (the one-line
        fault of a garbled file) ─► SweepFile.read ─► analysis.report.sweep (read as attributes)
    loadgen/multirun/sweep.py ─► frontier.json ─► Frontier.read ─► analysis.report.plots_frontier,
        compare_frontier, sweep (the frontier section)

Open: the keys the report reads are named and typed (a misspelt one is an AttributeError, not a
silent None), the rest kept as loadgen wrote them. ``Num`` keeps a number as written (a
concurrency of 4 prints as 4).
"""
from __future__ import annotations

from typing import Any, Optional, Union

from pydantic import Field

from analysis.contract.base import Open
from analysis.contract.summary import CostBlock, Interactivity

Num = Union[int, float]


class NonFinite(Open):
    """A point row's figures that were NaN / Infinity in its summary (written as null)."""
    fields: list[str] = Field(default_factory=list)
    reason: Optional[str] = None


class PointForecast(Open):
    """A point row's "forecast" (``sweep --predict``: loadgen.multirun.predict.attach_forecasts)."""
    grade: Optional[str] = None
    interactivity_tok_s_p50: Optional[float] = None
    output_throughput: Optional[float] = Field(None, description="output tokens/s, all "
                                               "accelerators together")


class SweepPoint(Open):
    """One finished point: the swept value, its run directory (a name inside the sweep) and the
    frontier figures of its summary (loadgen/multirun/sweep.py point rows; analysis.metrics.frontier
    reads them)."""
    value: Num
    run_dir: str = ""
    valid: Optional[bool] = None
    interactivity_tok_s: Optional[Interactivity] = None
    output_throughput_per_accelerator: Optional[float] = None
    output_throughput: Optional[float] = None
    cost: Optional[CostBlock] = None
    capacity_reasons: dict[str, Optional[str]] = Field(
        default_factory=dict, description="why a frontier figure is null, by figure name")
    non_finite: Optional[NonFinite] = None
    forecast: Optional[PointForecast] = None


class Search(Open):
    """sweep.search: the max rate (or concurrency) under the SLO, and how the search ended."""
    kind: Optional[str] = None
    converged: bool = False
    stopped: Optional[str] = None
    tolerance: Optional[Num] = None
    probes: list[Any] = Field(default_factory=list)
    max_passing_rate: Optional[Num] = None
    min_failing_rate: Optional[Num] = None
    max_passing_concurrency: Optional[Num] = None
    min_failing_concurrency: Optional[Num] = None
    goodput_at_answer: Optional[float] = None


class SweepPlan(Open):
    """sweep.json "plan", written before the first point (loadgen/multirun/sweep_plan.py)."""
    values: Optional[list[Num]] = Field(None, description="a values sweep: every value planned")
    search: Optional[str] = Field(None, description="a search: its kind (its probes unknown)")
    max_probes: Optional[int] = None


class SweepFile(Open):
    """sweep.json as the sweep report reads it."""
    scenario: Optional[str] = None
    param: str = "value"
    mode: Optional[str] = None
    rule: Optional[str] = None
    complete: Optional[bool] = None
    plan: Optional[SweepPlan] = None
    points: list[SweepPoint] = Field(default_factory=list)
    search: Optional[Search] = None


class FrontierPoint(Open):
    """One point of frontier.json (analysis.metrics.frontier): its load, x, y and verdict."""
    run: Optional[str] = None
    param: Optional[str] = None
    value: Optional[Num] = None
    x: Optional[Num] = Field(None, description="interactivity: tokens/s per user (p50)")
    y: Optional[Num] = Field(None, description="output tokens/s per accelerator (or the cost)")
    on_frontier: Optional[bool] = None
    valid: Optional[bool] = None


class Excluded(Open):
    """A point left off the frontier: the figure it lacks, and why."""
    run: Optional[str] = None
    missing: Optional[str] = None
    reason: Optional[str] = None


class Frontier(Open):
    """frontier.json (loadgen/multirun/sweep.py), or compare_frontier.frontier_of's recomputed one."""
    points: list[FrontierPoint] = Field(default_factory=list)
    excluded: list[Excluded] = Field(default_factory=list)
    line: list[list[Optional[float]]] = Field(default_factory=list)
    y: Optional[str] = None
    y_better: Optional[str] = None
    slo: Optional[dict[str, Any]] = None
