"""Calibration probes for ``loadgen predict --calibrate``: short closed-loop runs of this server.

    Scenario + concurrencies [1, ~slots/2, slots] + budget (≤ 60 s in all)
        ─► per concurrency c: the scenario with load {mode concurrency, concurrency c, a warm-up
           request per user (at most 2), num_requests 8·c, duration_s and drain_timeout_s its
           share of the budget}, no sweep, output.report none
        ─► runner.run_scenario ─► <output.dir>/predict-<name>/<stamp>-probe-concurrency-<c>/
           (a normal run directory, kept; never a sweep point)
        ─► [{"point": LoadPoint, "run_dir", "requests", "request_throughput", "measured":
             {ttft_ms_p50, tpot_ms_p50, output_throughput}}]  ─► analysis.predict.fit
             (request_throughput: a rate sweep's measured max rate, analysis.predict.rounds)
A target.server is started once for all probes (as a sweep does) and stopped after them, unless
the caller hands in one already running (``managed``: the sweep's own, bench --one-server), which
is left running.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Callable, Optional

from analysis.predict.forecast import measured
from analysis.predict.simulate import LoadPoint
from loadgen.scenario.model import Scenario

Runner = Callable[[Scenario, object], object]     # (scenario, managed server) ─► RunResult


def probe_scenario(sc: Scenario, c: int, seconds: float, out_dir: Path, name: str) -> Scenario:
    tree = sc.model_dump(mode="json")
    tree["sweep"] = None
    warm = min(c, 2)
    tree["load"].update(mode="concurrency", concurrency=c, rate=None, stages=None,
                        max_concurrency=None, num_requests=8 * c, warmup_requests=warm,
                        duration_s=seconds, drain_timeout_s=seconds, min_duration_s=0.0,
                        min_queries=0, probe=None, cancel=None)
    tree["output"].update(dir=str(out_dir), run_name=name, report="none")
    return Scenario.model_validate(tree)


def _default_runner(sc: Scenario, server) -> object:
    from loadgen.console.progress import RunProgress
    from loadgen.run.runner import run_scenario
    return run_scenario(sc, RunProgress(None, enabled=False), server)


def run_probes(sc: Scenario, concurrencies: list[int], budget_s: float,
               runner: Optional[Runner] = None, managed=None) -> list[dict]:
    runner = runner or _default_runner
    out_dir = Path(sc.output.dir) / f"predict-{sc.name}"
    out_dir.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    share = budget_s / max(1, len(concurrencies))
    own = managed is None and sc.target.server is not None
    if own:
        from loadgen.targets.managed import ManagedServer
        managed = ManagedServer(sc.target.server, out_dir).start()
    probes = []
    try:
        for c in concurrencies:
            name = f"{stamp}-probe-concurrency-{c}"
            res = runner(probe_scenario(sc, c, share, out_dir, name), managed)
            if getattr(res, "interrupted", False):
                raise KeyboardInterrupt
            s = getattr(res, "summary", None) or {}
            m = {k: measured(s, k) for k in ("ttft_ms_p50", "tpot_ms_p50", "output_throughput")}
            probes.append({"point": LoadPoint("closed", concurrency=c),
                           "run_dir": str(getattr(res, "run_dir", out_dir / name)),
                           "requests": int(s.get("requests_completed") or 0),
                           "request_throughput": s.get("request_throughput"),   # max rate
                           "measured": m if any(v is not None for v in m.values()) else None})
    finally:
        if own:
            managed.stop()
    return probes
