"""The scenario's ``cost`` block: prices for summary.json ``cost`` (analysis.metrics.cost).

    cost: {usd_per_hour: X, usd_per_kwh: Y}     either or both; each > 0 (0 or less: one line,
                                                exit 2). usd_per_hour is the price of ONE
                                                accelerator when target.accelerators is set
                                                (the run's time is priced × accelerators)
        ─► meta.json ``cost`` (cost_meta: the prices and the accelerator count, as given)
        ─► analysis.metrics.cost: $/Mtok from the measured window, tokens and joules

No default price anywhere: a figure whose price is not given is null with the reason.
"""
from __future__ import annotations

from typing import Optional

from pydantic import Field, model_validator

from loadgen.scenario.strict import Strict

MAX_PRICE = 1e9            # dollars: a bound a typo meets (1e12 for 1e2), no price does


class Cost(Strict):
    usd_per_hour: Optional[float] = Field(None, gt=0, le=MAX_PRICE)   # per accelerator (target.accelerators)
    usd_per_kwh: Optional[float] = Field(None, gt=0, le=MAX_PRICE)    # energy price, for the measured joules

    @model_validator(mode="after")
    def _some(self) -> "Cost":
        if self.usd_per_hour is None and self.usd_per_kwh is None:
            raise ValueError("give usd_per_hour (per accelerator) and/or usd_per_kwh")
        return self


def cost_meta(sc) -> Optional[dict]:
    """meta.json ``cost``: the prices as given and the accelerators they are multiplied by."""
    c = getattr(sc, "cost", None)
    if c is None:
        return None
    return {"usd_per_hour": c.usd_per_hour, "usd_per_kwh": c.usd_per_kwh,
            "accelerators": int(getattr(sc.target, "accelerators", 1) or 1),
            "accelerators_source": ("target.accelerators" if "accelerators"
                                    in sc.target.model_fields_set else "default (1)")}
