"""The scenario's sweep block: the points of a sweep, or the search it runs.

    sweep: {param: load.concurrency | load.rate, values: [...]}        one run per value
    sweep: {param: load.rate, search: max_rate_under_slo, rate_low}    bracket + bisection
    sweep: {param: load.concurrency, search: max_concurrency_under_slo, concurrency_low}
                                                                       integer bisection
Run by loadgen.run.sweep (and sweep_search.py); every probe and the bracket go to sweep.json.
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, model_validator

from loadgen.scenario.strict import Strict


class Sweep(Strict):
    param: Literal["load.concurrency", "load.rate"] = "load.concurrency"
    values: list[float] = Field(default_factory=list)
    search: Optional[Literal["max_rate_under_slo", "max_concurrency_under_slo"]] = None
    rate_low: Optional[float] = Field(None, gt=0)
    rate_high: Optional[float] = Field(None, gt=0)
    tolerance: float = Field(0.05, gt=0)      # relative width of the final bracket
    max_probes: int = Field(12, gt=0)
    # before each point after the first: POST /reset_prefix_cache (vLLM's dev mode); recorded
    reset_prefix_cache: bool = False
    # search max_concurrency_under_slo: integer bisection from concurrency_low (doubling up to
    # concurrency_high, or halving down to 1) until the bracket is [n, n + 1] (loadgen/run/sweep_search.py)
    concurrency_low: Optional[int] = Field(None, gt=0)
    concurrency_high: Optional[int] = Field(None, gt=0)

    @model_validator(mode="after")
    def _shape(self) -> "Sweep":
        if self.search == "max_concurrency_under_slo":
            if self.param != "load.concurrency":
                raise ValueError("search max_concurrency_under_slo sweeps param load.concurrency")
            if self.concurrency_low is None:
                raise ValueError("search max_concurrency_under_slo needs 'concurrency_low'")
            if self.concurrency_high is not None and self.concurrency_high <= self.concurrency_low:
                raise ValueError("concurrency_high must be > concurrency_low")
        if self.search is None and not self.values:
            raise ValueError("give 'values' (the points to run) or 'search'")
        if self.search == "max_rate_under_slo":
            if self.param != "load.rate":
                raise ValueError("search max_rate_under_slo sweeps param load.rate")
            if self.rate_low is None:
                raise ValueError("search max_rate_under_slo needs 'rate_low'")
            if self.rate_high is not None and self.rate_high <= self.rate_low:
                raise ValueError("rate_high must be > rate_low")
        if self.param == "load.concurrency" and any(v != int(v) or v < 1 for v in self.values):
            raise ValueError("load.concurrency values must be whole numbers >= 1")
        return self
