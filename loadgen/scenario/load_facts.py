"""The load mode's facts, named once: what other modules ask of a ``load`` block. Pure.

    model.Load(LoadFacts, Strict) ─► load.closed_loop / traced / unsent_counted / in_flight_cap
        (the engines: pacing, partition, the ledger), load.steady / knob / point_shape
        (loadgen/multirun/predict.py ─► analysis.predict.forecast.point_load), load.how / whole
        (loadgen/commands/validate.py: the plan's words)

The engines, validate and predict ask these instead of switching on ``mode`` themselves; the
pacing of each mode is loadgen.engine.core.pacing's (the one other place that branches on it).
Mixed into ``model.Load`` (a pydantic model): plain properties of its fields, no state.
"""
from __future__ import annotations

from typing import Optional


class LoadFacts:
    """The properties of ``model.Load`` that say what its mode means (module doc)."""

    mode: str

    @property
    def closed_loop(self) -> bool:
        """Mode concurrency: virtual users send as they become free (no schedule of times)."""
        return self.mode == "concurrency"

    @property
    def traced(self) -> bool:
        """Mode trace: the trace file's timestamps are the schedule."""
        return self.mode == "trace"

    @property
    def unsent_counted(self) -> bool:
        """A closed loop bounded by num_requests alone: what a stop left unstarted is one count
        (meta.json ``unsent_requests``), never records."""
        return self.closed_loop and bool(self.num_requests) and not self.duration_s

    @property
    def in_flight_cap(self) -> Optional[int]:
        """The limit on requests in flight: None means unbounded (open-loop server)."""
        if self.mode in ("server", "trace"):
            return self.max_concurrency or self.concurrency
        if self.mode == "concurrency" and self.stages:
            return max(s.concurrency for s in self.stages)
        return self.concurrency or (None if self.mode == "offline" else 1)

    # ------------------------------------------------------------ predict's questions
    @property
    def steady(self) -> bool:
        """One steady load (no trace, no stages): what a forecast point can be."""
        return self.mode != "trace" and not self.stages

    @property
    def knob(self) -> tuple[str, Optional[float]]:
        """The load's own setting a forecast varies and its value: ``load.rate`` for mode
        server (arrivals on a schedule), else ``load.concurrency`` (users in flight)."""
        if self.mode == "server":
            return "load.rate", self.rate
        return "load.concurrency", self.in_flight_cap or 1

    @property
    def point_shape(self) -> dict:
        """What a forecast point of this load is (analysis.predict.forecast.point_load's
        keywords): ``closed`` users (concurrency, offline) or open arrivals; ``all_at_once``:
        offline without a cap sends every request at t0."""
        return {"closed": self.mode in ("concurrency", "offline"),
                "all_at_once": self.mode == "offline"}

    # ------------------------------------------------------------ validate's words
    @property
    def how(self) -> str:
        """How the load sends, in words (``loadgen validate``'s plan)."""
        if self.mode == "server" and self.stages:
            return "stages " + ", ".join(
                f"{st.rate:g} requests/s" if st.rate else f"{st.concurrency} in flight"
                for st in self.stages) + f" ({sum(st.duration_s for st in self.stages):g} s)"
        if self.mode == "server":
            return f"{self.arrival} arrivals at {self.rate:g} requests/s" + (
                f", at most {self.max_concurrency} in flight" if self.max_concurrency else "")
        if self.mode == "concurrency":
            return f"{self.concurrency} in flight (closed loop)"
        if self.mode == "offline":
            return "every request queued at the start" + (
                f", at most {self.concurrency} in flight" if self.concurrency else "")
        return f"the trace's timestamps × {self.time_scale:g}"

    @property
    def whole(self) -> str:
        """What the run sends when neither num_requests nor duration_s says (in words)."""
        return "the whole trace" if self.traced else "the workload's requests"
