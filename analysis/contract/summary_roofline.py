"""summary.json's "roofline" block: the floors of the spec frozen into the run vs the measured figures.

    analysis.roofline.run_roofline.roofline_block ─► Roofline (summary.json "roofline")
        ─► analysis.report.conditions.roofline_blocks, analysis.report.sweep (read as attributes)

Open blocks: the keys the report reads are named and typed (a misspelt one is an AttributeError,
not a silent None), the rest kept as computed. A figure the run could not give is None, never 0.
"""
from __future__ import annotations

from typing import Any, Optional, Union

from pydantic import Field

from analysis.contract.base import Open

Num = Union[int, float]          # kept as written: a count prints as 3, a mean as 3.5


class RooflineDevice(Open):
    """The device the floors used, and where its spec came from."""
    name: Optional[str] = None
    evidence: Optional[str] = None
    mem_bandwidth: Optional[float] = Field(None, description="bytes/s")
    peak_flops: Optional[float] = Field(None, description="FLOP/s at dtype")
    dtype: Optional[str] = None
    measured_at: Optional[Any] = None
    host: Optional[str] = None
    source: Optional[str] = Field(None, description="frozen | override | meta.device_spec")
    how: Optional[str] = None
    frozen: Optional[str] = Field(None, description="override: the spec frozen into the run")


class Decode(Open):
    """The decode step at the measured batch and context: bytes, FLOPs, floors, binding."""
    batch: Optional[Num] = None
    mean_in_flight: Optional[float] = None
    context_len: Optional[Num] = None
    prompt_tokens: Optional[int] = None
    step_bytes: Optional[float] = None
    step_flops: Optional[float] = None
    memory_floor_ms: Optional[float] = None
    compute_floor_ms: Optional[float] = None
    binding: Optional[str] = None
    achieved_bandwidth: Optional[float] = Field(None, description="bytes/s")
    floor_over_measured: Optional[float] = None


class Prefill(Open):
    """Each request's prefill floor for its own prompt; the request nearest its floor."""
    requests: int = 0
    floor_ms: Optional[float] = Field(None, description="the nearest request's prefill floor")
    ttft_ms: Optional[float] = Field(None, description="its measured TTFT")
    prompt_tokens: Optional[Num] = None
    floor_over_ttft: Optional[float] = None
    binding: Optional[str] = None
    below_floor: Optional[int] = None
    floor_ms_min: Optional[float] = None
    floor_ms_max: Optional[float] = None


class BrokenFloor(Open):
    """A measured figure below its calculated floor (the spec or the model shape is wrong)."""
    figure: Optional[str] = None
    floor_ms: Optional[float] = None
    measured_ms: Optional[float] = None
    text: str = ""


class InFlightLevel(Open):
    """One level of analysis.roofline.by_concurrency: the inter-token gaps with exactly
    ``in_flight`` requests in flight, their ITL p50 (measured) vs the decode floor (calculated)."""
    in_flight: int
    batch: Optional[int] = None
    gaps: int = 0
    itl_p50_ms: Optional[float] = None
    context_len: Optional[float] = None
    floor_ms: Optional[float] = None
    achieved_bandwidth: Optional[float] = Field(None, description="bytes/s")
    mbu: Optional[float] = None
    broken: bool = False
    reason: Optional[str] = None


class Batch1(Open):
    """Level 1 of by_in_flight: the batch-1 decode step through HTTP; reason set exactly when
    mbu is None."""
    mbu: Optional[float] = None
    itl_p50_ms: Optional[float] = None
    floor_ms: Optional[float] = None
    gaps: int = 0
    context_len: Optional[float] = None
    reason: Optional[str] = None


class Roofline(Open):
    """The roofline frozen into the run (analysis.roofline): MBU and the floors it used; the
    decode step by requests in flight (absent in summaries written before it)."""
    status: Optional[str] = Field(None, description="calculated | unavailable")
    reason: Optional[str] = None
    mbu: Optional[float] = None
    tpot_p50_ms: Optional[float] = None
    decode_floor_ms: Optional[float] = None
    prefill_floor_ms: Optional[float] = None
    device: Optional[RooflineDevice] = None
    decode: Optional[Decode] = None
    prefill: Optional[Prefill] = None
    broken_floors: list[BrokenFloor] = Field(default_factory=list)
    rule: Optional[str] = None
    assumptions: Optional[str] = None
    by_in_flight: Optional[list[InFlightLevel]] = None
    by_in_flight_rule: Optional[str] = None
    by_in_flight_dropped: Optional[int] = Field(
        None, description="inter-token gaps dropped: the in-flight count changed inside them")
    batch1: Optional[Batch1] = None
