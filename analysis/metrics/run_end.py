"""Did the run end cleanly? A run directory's own evidence of how its load phase ended.

    run_dir/{meta.json, scenario.yaml} + its records ─► run_end ─► {"ended_cleanly", "reason",
        "planned", "accounted", "without_record", "rule"} ─► slo.with_run_end ─► the verdict

The marker of a clean end is meta.json: both engines (loadgen.run.runner, loadgen.engine.locust)
write it once, after the load phase ended and every planned request has its record (a crash or a
signal still writes it, with ``interrupted`` / ``crashed`` set; a second signal writes it too,
``interrupted``). So:

* no meta.json: the run never reached its end (killed with SIGKILL, out of memory, a full disk
  that refused meta.json): INVALID;
* meta.json with ``interrupted`` / ``crashed``: INVALID (the verdict's ``not_interrupted``);
* fewer measured records (+ a closed loop's ``unsent_requests``, a count) than planned, or fewer
  lines in records.jsonl than meta.json's ``records_written``: INVALID, records are missing.

``without_record`` counts the planned measured requests that have neither a record nor a place
in ``unsent_requests``. The plan comes from meta.json (schedule.scheduled_count, else
load.num_requests when no duration bounded the run); without meta.json from scenario.yaml
(written before the run starts: load.num_requests, when no duration_s bounds the run and the
mode is not trace). None where the plan has no fixed count.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from analysis.contract.meta import RunMeta
from analysis.metrics.figures import field
from analysis.contract.records import Records
from analysis.contract.rundir import read_scenario

RULE = ("a clean end: meta.json written (the runner's last word, after every planned request "
        "has its record), not interrupted, and every planned measured request has a record "
        "(or is a closed loop's unsent count)")


def _planned_from_meta(meta: RunMeta) -> Optional[int]:
    count = meta.schedule.scheduled_count if meta.schedule else None
    if meta.duration_s is not None and not count:
        return None
    if meta.workload and meta.workload.sessions:   # schedule counts sessions, not turns
        return meta.num_requests if meta.duration_s is None else None
    if count is not None:
        return int(count)
    return meta.num_requests if meta.duration_s is None else None


def _planned_from_scenario(run_dir: Path) -> Optional[int]:
    try:
        load = read_scenario(run_dir).get("load") or {}
    except Exception:       # unreadable: the count stays unknown, the verdict still INVALID
        return None
    n = load.get("num_requests")
    if load.get("duration_s") is not None or load.get("mode") == "trace" or not isinstance(n, int):
        return None
    return n


def run_end(run_dir: str | Path, records: Records,
            meta: Optional[dict | RunMeta] = None) -> dict:
    """How the run in ``run_dir`` ended (see the module docstring). ``meta``: meta.json's content
    when the caller has it (default: read); whether meta.json exists is read from the directory."""
    d = Path(run_dir)
    present = (d / "meta.json").is_file()
    meta = RunMeta.read(meta)
    measured = len(records) - field(records, "phase").count("warmup")
    unsent = int(meta.unsent_requests or 0) if present else 0
    planned = _planned_from_meta(meta) if present else _planned_from_scenario(d)
    accounted = measured + unsent
    without = max(0, planned - accounted) if planned is not None else None
    reasons = []
    if not present:
        count = (f"{without} of {planned} planned measured requests have no record"
                 if without is not None else
                 f"{measured} measured records; the planned count is unknown (the run had no "
                 "fixed count, or scenario.yaml is missing)")
        reasons.append("no meta.json (the run was killed, or ran out of memory or disk, before "
                       f"its end); {count}")
    else:
        if without:
            reasons.append(f"{without} of {planned} planned measured requests have no record "
                           f"(records.jsonl holds {measured}"
                           + (f", {unsent} unsent counted" if unsent else "") + ")")
        written = meta.records_written
        if isinstance(written, int) and written > len(records):
            reasons.append(f"records.jsonl holds {len(records)} records of the {written} "
                           "meta.json says were written")
    return {"ended_cleanly": not reasons, "meta_json": present,
            "reason": "; ".join(reasons) or None, "planned": planned, "accounted": accounted,
            "without_record": without, "rule": RULE}
