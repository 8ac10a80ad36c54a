"""What a sweep directory holds against what it planned, and whether its sweep.json is usable.

    SWEEP_DIR/sweep.json ─► sweep_problem(): None, or one line naming the file and what is wrong
                            (not JSON, not an object, points[i] without a number or a directory)
    sweep.json "plan" + "complete" (loadgen/multirun/sweep.py writes both before the first point)
    + the point directories on disk ─► sweep_state(): {complete, planned, done, missing,
        half_written, headline}
        done          the points listed in sweep.json (each finished: a summary was written)
        missing       planned values with no finished point (a values sweep; a search's probes
                      are not known in advance, its "complete" flag says whether it ended)
        half_written  <param>-<value>/ directories on disk that no finished point lists: the
                      run the sweep was in when it died
        complete      false when sweep.json says so, or a value is missing or half-written;
                      None for a sweep written before the plan was recorded and nothing amiss
Pure reads, no writes; the sweep report (analysis/report/sweep.py) puts the headline first.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Optional

from analysis.contract.rundir import records_path
from analysis.contract.sweep import SweepFile, SweepPlan, SweepPoint

POINT_DIR = re.compile(r"^(concurrency|rate)-[0-9][0-9.e+-]*$")


def sweep_problem(sweep_dir: str | Path) -> Optional[str]:
    """None when sweep.json is a usable sweep record, else one line naming it and the fault."""
    p = Path(sweep_dir) / "sweep.json"
    try:
        tree = json.loads(p.read_bytes())      # NaN / Infinity of older files: read, not fatal
    except OSError as e:
        return f"{p}: unreadable ({e.strerror or type(e).__name__})"
    except UnicodeDecodeError:
        return f"{p}: unreadable: not UTF-8 text"
    except json.JSONDecodeError as e:
        return f"{p}: unreadable: not valid JSON ({e.msg}, line {e.lineno} column {e.colno})"
    if not isinstance(tree, dict):
        return f"{p}: unreadable: not a JSON object (a {type(tree).__name__})"
    pts = tree.get("points")
    if pts is not None and not isinstance(pts, list):
        return f"{p}: points: not a list (a {type(pts).__name__})"
    for i, pt in enumerate(pts or []):
        if not isinstance(pt, dict):
            return f"{p}: points[{i}]: not an object"
        v = pt.get("value")
        if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
            return f"{p}: points[{i}].value: not a number ({v!r})"
        rd = pt.get("run_dir")
        if not isinstance(rd, str) or not rd or "/" in rd or "\\" in rd or rd in (".", ".."):
            return f"{p}: points[{i}].run_dir: not a directory name in the sweep ({rd!r})"
    return None


def _done(d: Path, p: SweepPoint) -> bool:
    return records_path(d / p.run_dir).is_file()     # records.jsonl, or records.arrow


def sweep_state(sweep_dir: str | Path, sw: dict | SweepFile) -> dict:
    """Planned / done / missing / half-written points of the sweep at ``sweep_dir`` (``sw``: a
    sweep.json that sweep_problem passed, read as SweepFile)."""
    d = Path(sweep_dir)
    sw = SweepFile.read(sw, "sweep.json")
    points = sw.points
    listed = {p.run_dir for p in points}
    done = sorted(p.value for p in points if _done(d, p))
    plan = sw.plan
    planned = sorted(set(plan.values)) if plan and plan.values is not None else None
    missing = [v for v in planned if v not in done] if planned is not None else []
    half = []
    for sub in sorted(d.iterdir()) if d.is_dir() else []:
        if sub.is_dir() and POINT_DIR.match(sub.name) and sub.name not in listed:
            why = ("records.jsonl without summary.json" if records_path(sub).is_file()
                   and not (sub / "summary.json").is_file() else "not listed in sweep.json")
            half.append({"run_dir": sub.name, "why": why})
    flag = sw.complete
    amiss = bool(missing or half or flag is False)
    complete = False if amiss else (True if flag is True else None)
    return {"complete": complete, "planned": planned, "done": done, "missing": missing,
            "half_written": half, "search": plan.search if plan else None,
            "headline": _headline(complete, planned, done, missing, half, plan)}


def _headline(complete, planned, done, missing, half, plan: Optional[SweepPlan]) -> str:
    of = f" of {len(planned)} planned" if planned is not None else ""
    head = f"{len(done)}{of} point(s) done"
    if complete is not False:
        return f"sweep complete: {head}" if complete else head
    parts = [head]
    if missing:
        parts.append("not run: " + ", ".join(f"{v:g}" for v in missing))
    if half:
        parts.append("half-written: " + ", ".join(f"{h['run_dir']} ({h['why']})" for h in half))
    if plan and plan.search and not missing:
        parts.append(f"the {plan.search} search did not finish")
    return ("INCOMPLETE sweep: " + "; ".join(parts) + " — the sweep was stopped before its end; "
            "rerun the same `loadgen sweep` to finish it (finished points are reused)")
