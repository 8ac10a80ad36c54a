"""power_sources.json (and meta.json ``power_sources``): the power sources a run sampled.

    loadgen's power sampler ─► power.jsonl rows ─► PowerRow.read ─► analysis.energy.window
    loadgen's power sampler ─► power_sources.json {"sources": [...]} / meta.json power_sources
        ─► PowerSource.read ─► analysis.energy.window.energy_summary, analysis.metrics.summary
           (whether any source was configured), the report's estimated-source names

Open: the keys readers use are named and typed (a misspelt one is an AttributeError, not a
silent None), the rest kept as the sampler described them. A source given only by name (a
string) reads as ``PowerSource(name=...)``.
"""
from __future__ import annotations

from typing import Any, Optional, Union

from pydantic import Field

from analysis.contract.base import Open


class PowerSource(Open):
    """One power source: what it measures, whether it worked, how (measured or estimated)."""
    name: Optional[str] = None
    kind: Optional[str] = None
    source: Optional[str] = None
    status: Optional[str] = Field(None, description="ok, or why the source gave nothing")
    reason: Optional[str] = None
    evidence: Optional[str] = Field(None, description="measured | estimated")
    method: Optional[str] = None
    warnings: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, s: Any) -> "PowerSource":
        """A source as meta.json or power_sources.json lists it: a dict, or only its name."""
        return cls(name=s) if isinstance(s, str) else cls.read(s)


class PowerRow(Open):
    """One power.jsonl row (loadgen/power/__init__.py): a counter reading (``energy_j``), an
    instant sample (``power_w``) or a session mark (``mark``, its name as ``value``)."""
    t_ns: Optional[Union[int, float]] = None
    source: Optional[str] = None
    device: Optional[Any] = None
    scope: Optional[str] = None
    kind: Optional[str] = None
    value: Optional[Union[float, str]] = Field(None, description="J, W, or a mark's name")
    wrap_j: Optional[float] = Field(None, description="a counter's range in J")
