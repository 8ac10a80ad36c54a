"""``loadgen run --repeat N`` / ``loadgen sweep --repeat N``: the same scenario (or sweep) N times,
then the spread of every headline figure (per sweep point for sweeps).

    Scenario ─► parent dir  output.dir/{YYYYmmdd-HHMMSS}-{name}-x{N}/ (or output.run_name + -xN)
             ─► run-1/, run-2/, ... (each a full run directory: records, summary, report)
             ─► analysis.metrics.repeats.repeat_summary(summaries) ─► repeat.json
             ─► analysis.report.repeats.write_repeat_report ─► report.md / report.html

The parent directory is held for the series (loadgen/run/multilock.py): a second series into it
exits 2 naming the holder's pid; a dead holder's lock is taken over.
A managed server is started once per run (each run is independent, cold or warm alike); an
interrupted run stops the series, and what finished is still summarised.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from analysis.contract.rundir import read_summary
from analysis.metrics.repeats import repeat_summary
from analysis.report.repeats import write_repeat_report
from loadgen.run.storage import atomic_write_text
from loadgen.run.multilock import held
from loadgen.scenario.model import Scenario, ScenarioError


def repeat_dir(sc: Scenario, n: int) -> Path:
    base = sc.output.run_name or f"{time.strftime('%Y%m%d-%H%M%S')}-{sc.name}"
    d = Path(sc.output.dir) / f"{base}-x{n}"
    if (d / "repeat.json").exists():
        raise ScenarioError(f"output.run_name: {d} already holds a repeat series (repeat.json)")
    return d


def run_repeats(sc: Scenario, n: int, run_one: Callable) -> tuple[Path, list, dict]:
    """Run ``sc`` ``n`` times through ``run_one(scenario) -> RunResult``; returns
    (parent dir, results, the repeat.json dict)."""
    parent = repeat_dir(sc, n)
    with held(parent, "repeat"):
        if (parent / "repeat.json").exists():     # a series that ended while this one checked
            raise ScenarioError(f"output.run_name: {parent} already holds a repeat series "
                                "(repeat.json)")
        return _run_repeats(sc, n, run_one, parent)


def _run_repeats(sc: Scenario, n: int, run_one: Callable, parent: Path) -> tuple[Path, list, dict]:
    results = []
    for i in range(1, n + 1):
        one = sc.model_copy(update={"output": sc.output.model_copy(
            update={"dir": str(parent), "run_name": f"run-{i}"})})
        res = run_one(one)
        results.append(res)
        if res.interrupted:
            break
    rep = repeat_summary([r.summary or {} for r in results])
    rep["run_dirs"] = [str(r.run_dir) for r in results]
    rep["scenario"] = sc.name
    rep["interrupted"] = any(r.interrupted for r in results)
    parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(parent / "repeat.json", json.dumps(rep, indent=2, default=str))
    write_repeat_report(parent, rep)
    return parent, results, rep


def sweep_repeats(sc: Scenario, n: int, run_sweep_fn: Callable) -> tuple[Path, dict]:
    """Run the sweep ``n`` times (fresh sweep dirs sweep-1..sweep-n under one parent); per point
    value, the repeat summary of that point's runs ─► parent/repeat.json."""
    base = Path(sc.output.dir) / f"{sc.output.run_name or 'sweep-' + sc.name}-x{n}"
    with held(base, "repeat"):
        if (base / "repeat.json").exists():
            raise ScenarioError(f"output.run_name: {base} already holds a repeat series "
                                "(repeat.json)")
        return _sweep_repeats(sc, n, run_sweep_fn, base)


def _sweep_repeats(sc: Scenario, n: int, run_sweep_fn: Callable, base: Path) -> tuple[Path, dict]:
    by_value: dict = {}
    dirs = []
    for i in range(1, n + 1):
        one = sc.model_copy(update={"output": sc.output.model_copy(
            update={"dir": str(base), "run_name": f"sweep-{i}"})})
        d, result = run_sweep_fn(one)
        dirs.append(str(d))
        for pt in result.get("points") or []:
            s = read_summary(Path(d) / pt["run_dir"]).as_dict()   # through the contract
            by_value.setdefault(pt["value"], []).append(s)
    rep = {"sweeps": n, "sweep_dirs": dirs, "scenario": sc.name,
           "points": [{"value": v, **repeat_summary(ss)} for v, ss in sorted(by_value.items())]}
    base.mkdir(parents=True, exist_ok=True)
    atomic_write_text(base / "repeat.json", json.dumps(rep, indent=2, default=str))
    return base, rep
