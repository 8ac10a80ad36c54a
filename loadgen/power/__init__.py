"""Power and energy sampling during a run, on the records' clock (time.perf_counter_ns).

    scenario.power ─► start(cfg, run_dir) ─► open each source (nvml | amdsmi | rapl | dcgm | estimate)
                                              │  unavailable here → a description with the reason
                                              ▼
                 one sampler thread per source, ~sample_hz reads/s ─► run_dir/power.jsonl
    runner: session.idle_baseline()  (idle_start .. idle_end marks, when idle_baseline_s > 0)
            session.mark("measure_start") ... load ... session.mark("measure_end")
            session.stop() ─► {"sources": [...], "marks": {...}} also saved as power_sources.json
    analysis.energy.window.energy_summary(rows, records, window, sources) ─► summary["energy"]

power.jsonl rows (one JSON object a line; t_ns on time.perf_counter_ns, the records' clock):
    {"t_ns", "source", "device", "scope", "kind": "energy_j", "value": raw cumulative J,
     "wrap_j"?: counter range in J}                                   a counter reading
    {"t_ns", "source", "device", "scope", "kind": "power_w", "value": W}   an instant power sample
    {"t_ns", "source": "session", "device": null, "scope": null, "kind": "mark", "value": name}
scope is gpu | cpu_package | dram | cpu_core | cpu_uncore | platform | system. Each mark makes
every source read at once, so counters are read at both window edges ("edges" in stop()'s result).
Sources ["none"] (the default) sample nothing: energy is "unmeasured" with that reason.

May import: the standard library, nvidia-ml-py / amdsmi (lazily, where present),
loadgen.scenario (the power: section) and loadgen.record's clock; never run/, client/ or analysis/.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable

from loadgen.power.base import PowerSource, Reading, SourceUnavailable
from loadgen.power.session import PowerSession, open_sources
from loadgen.scenario.model import Power

__all__ = ["start", "PowerSession", "PowerSource", "Reading", "SourceUnavailable", "source_classes"]


def source_classes() -> dict[str, type[PowerSource]]:
    from loadgen.power.amdsmi import AmdSmiSource
    from loadgen.power.dcgm import DcgmSource
    from loadgen.power.estimate import EstimateSource
    from loadgen.power.nvml import NvmlSource
    from loadgen.power.rapl import RaplSource
    return {"nvml": NvmlSource, "amdsmi": AmdSmiSource, "rapl": RaplSource, "dcgm": DcgmSource,
            "estimate": EstimateSource}


def start(cfg: Power, run_dir: Path, clock: Callable[[], int] = time.perf_counter_ns) -> PowerSession:
    """Open the configured sources and start sampling into run_dir/power.jsonl."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    opened, unavailable = open_sources(cfg, source_classes())
    return PowerSession(cfg, run_dir, opened, unavailable, clock)
