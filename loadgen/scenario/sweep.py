"""The scenario's sweep block: the points of a sweep, or the search it runs.

    sweep: {param: load.concurrency | load.rate, values: [...]}        one run per value
    sweep: {param: load.rate, search: max_rate_under_slo, rate_low}    bracket + bisection
    sweep: {param: load.concurrency, search: max_concurrency_under_slo, concurrency_low}
                                                                       integer bisection
Run by loadgen.multirun.sweep (and sweep_search.py); every probe and the bracket go to sweep.json.
"""
from __future__ import annotations

from typing import Literal, Optional

from pydantic import Field, model_validator

from loadgen.scenario.strict import Strict

# search ─► (the param it sweeps, the prefix of its bounds: <prefix>_low, <prefix>_high)
_SEARCH_BOUNDS = {"max_rate_under_slo": ("load.rate", "rate"),
                  "max_concurrency_under_slo": ("load.concurrency", "concurrency")}


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
    # concurrency_high, or halving down to 1) until the bracket is [n, n + 1] (loadgen/multirun/sweep_search.py)
    concurrency_low: Optional[int] = Field(None, gt=0)
    concurrency_high: Optional[int] = Field(None, gt=0)

    @model_validator(mode="after")
    def _shape(self) -> "Sweep":
        if self.search is None and not self.values:
            raise ValueError("give 'values' (the points to run) or 'search'")
        if self.search is not None:
            param, bound = _SEARCH_BOUNDS[self.search]
            low, high = getattr(self, f"{bound}_low"), getattr(self, f"{bound}_high")
            if self.param != param:
                raise ValueError(f"search {self.search} sweeps param {param}")
            if low is None:
                raise ValueError(f"search {self.search} needs '{bound}_low'")
            if high is not None and high <= low:
                raise ValueError(f"{bound}_high must be > {bound}_low")
        if self.param == "load.concurrency" and any(v != int(v) or v < 1 for v in self.values):
            raise ValueError("load.concurrency values must be whole numbers >= 1")
        return self
