"""What a sweep may run, decided before its first point, and how its JSON is kept readable.

    Scenario + sweep block ─► point_scenario(sc, value): the scenario of one point (param = value,
                              output in the sweep dir), validated by the strict model
        ─► check_points(sc): every sweep.values[i] (or the search's start) applied and validated
           BEFORE anything runs: one line "sweep.values[1]: -1: load.rate: ...", exit 2
        ─► plan(sc): what sweep.json records up front (the values, or the search and its bounds)
        ─► concurrency_cap / rate_cap: the most a search may probe, and why (the scenario's
           limits, loadgen/scenario/limits.py; num_requests: no run has more in flight)
    sweep.json on a rerun ─► read_sweep_json: a dict, or one line naming the file and the fault
    any row ─► finite(): NaN / ±Infinity ─► null, and the dotted keys that were (allow_nan=False)
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Optional

from pydantic import ValidationError

from loadgen.scenario.limits import MAX_CONCURRENCY, MAX_RATE
from loadgen.scenario.model import Scenario, ScenarioError


def point_scenario(sc: Scenario, value: float, run_dir: Path, name: str) -> Scenario:
    """The scenario of the point ``param = value`` (raises pydantic's ValidationError)."""
    param = sc.sweep.param
    val = int(value) if param == "load.concurrency" else float(value)
    tree = sc.model_dump(mode="json")
    tree["sweep"] = None
    tree["load"][param.split(".")[1]] = val
    tree["output"].update(dir=str(run_dir), run_name=name)
    return Scenario.model_validate(tree)


def probe_scenario(sc: Scenario, value: float, run_dir: Path, name: str) -> Scenario:
    """point_scenario for a point decided while the sweep runs (a search's probe): a value the
    scenario cannot run is one line naming it (ScenarioError), never a traceback."""
    from loadgen.scenario.loader import format_validation_error
    try:
        return point_scenario(sc, value, run_dir, name)
    except ValidationError as e:
        raise ScenarioError(f"sweep: {sc.sweep.param} = {value:g} cannot run: "
                            f"{format_validation_error(e)}") from None


def check_points(sc: Scenario, run_dir: Path) -> None:
    """Every value the sweep will certainly run, validated now (ScenarioError, one line)."""
    from loadgen.scenario.loader import format_validation_error
    s = sc.sweep
    if s.search == "max_rate_under_slo":
        todo = [("sweep.rate_low", s.rate_low)] + ([("sweep.rate_high", s.rate_high)]
                                                   if s.rate_high else [])
    elif s.search == "max_concurrency_under_slo":
        todo = [("sweep.concurrency_low", s.concurrency_low)]
    else:
        todo = [(f"sweep.values[{i}]", v) for i, v in enumerate(s.values)]
    for where, v in todo:
        try:
            point_scenario(sc, v, run_dir, "check")
        except ValidationError as e:
            raise ScenarioError(f"{where}: {v:g}: {format_validation_error(e)} "
                                "(nothing was run)") from None


def plan(sc: Scenario) -> dict:
    """sweep.json's "plan": written before the first point, so a sweep that dies is known to."""
    s = sc.sweep
    if s.search is None:
        return {"values": sorted(s.values), "points": len(set(s.values))}
    cap, why = (concurrency_cap(sc) if s.search == "max_concurrency_under_slo" else rate_cap(sc))
    return {"search": s.search, "max_probes": s.max_probes, "cap": cap, "cap_reason": why}


def concurrency_cap(sc: Scenario) -> tuple[int, str]:
    """The highest concurrency a probe may have: the scenario's limit, or num_requests (a run
    never has more requests in flight than it sends)."""
    n = sc.load.num_requests
    if n is not None and n < MAX_CONCURRENCY:
        return n, "load.num_requests"
    return MAX_CONCURRENCY, "load.concurrency's limit (docs/limits.md)"


def rate_cap(sc: Scenario) -> tuple[float, str]:
    return MAX_RATE, "load.rate's limit (docs/limits.md)"


def capped_line(cap: float, why: str) -> str:
    shown = f"{cap:,}" if isinstance(cap, int) else f"{cap:g}"
    return f"capped at {shown}: {why}"


def read_sweep_json(path: Path) -> Optional[dict]:
    """An existing sweep.json as a dict (None when absent); anything else is one line."""
    if not path.is_file():
        return None
    try:
        tree = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as e:
        raise ScenarioError(f"output.run_name: {path}: unreadable ({e})") from None
    except json.JSONDecodeError as e:
        raise ScenarioError(f"output.run_name: {path}: not valid JSON ({e.msg}, line {e.lineno} "
                            f"column {e.colno}); remove it or choose another output.run_name") \
            from None
    if not isinstance(tree, dict):
        raise ScenarioError(f"output.run_name: {path}: not a JSON object (a "
                            f"{type(tree).__name__}); remove it or choose another output.run_name")
    return tree


def finite(obj: Any, at: str = "", bad: Optional[list] = None) -> tuple[Any, list[str]]:
    """``obj`` with every NaN / ±Infinity float replaced by None; the dotted keys replaced."""
    bad = [] if bad is None else bad
    if isinstance(obj, float) and not math.isfinite(obj):
        bad.append(at or "value")
        return None, bad
    if isinstance(obj, dict):
        return {k: finite(v, f"{at}.{k}" if at else str(k), bad)[0] for k, v in obj.items()}, bad
    if isinstance(obj, (list, tuple)):
        return [finite(v, f"{at}[{i}]", bad)[0] for i, v in enumerate(obj)], bad
    return obj, bad


def dumps(obj: Any) -> str:
    """JSON text with only finite numbers (a non-finite one is a bug upstream: made null here)."""
    clean, _ = finite(obj)
    return json.dumps(clean, indent=2, default=str, allow_nan=False) + "\n"
