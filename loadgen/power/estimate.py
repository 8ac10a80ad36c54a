"""Opt-in power estimates, labelled "estimated" with their method; never added to measured totals.

Two methods, chosen by which field is set:
  - ``power.estimate_watts``: a power figure given by hand, held constant (scope "system");
  - ``power.estimate_tdp_w``: TDP x CPU load (psutil's system-wide CPU utilisation), scope
    "cpu_package". TDP is a thermal design figure, not a measured power: this is a rough bound.
"""
from __future__ import annotations

from loadgen.power.base import PowerSource, Reading, SourceUnavailable


class EstimateSource(PowerSource):
    name = "estimate"
    method = "estimate"
    evidence = "estimated"

    def open(self) -> None:
        if self.cfg.estimate_watts is not None:
            self.scope = "system"
            self.method = f"estimate: {self.cfg.estimate_watts:g} W given by hand (power.estimate_watts)"
            self.devices.append({"device": "manual", "method": self.method})
            return
        if self.cfg.estimate_tdp_w is not None:
            try:
                import psutil
            except ImportError:
                raise SourceUnavailable("estimate_tdp_w needs psutil") from None
            self._psutil = psutil
            psutil.cpu_percent(None)                  # prime: the next call measures since now
            self.scope = "cpu_package"
            self.method = (f"estimate: TDP {self.cfg.estimate_tdp_w:g} W x CPU load "
                           "(psutil.cpu_percent); TDP is not power")
            self.devices.append({"device": "cpu-tdp", "method": self.method})
            return
        raise SourceUnavailable("source 'estimate' needs power.estimate_watts or power.estimate_tdp_w")

    def read(self) -> list[Reading]:
        if self.cfg.estimate_watts is not None:
            return [Reading("manual", "system", "power_w", float(self.cfg.estimate_watts))]
        load = self._psutil.cpu_percent(None) / 100.0
        return [Reading("cpu-tdp", "cpu_package", "power_w", float(self.cfg.estimate_tdp_w) * load)]
