"""Sweeps compared by their throughput–interactivity frontiers (``loadgen compare SWEEP_A SWEEP_B``).

    SWEEP_DIR ... ─► frontier.json (loadgen sweep writes it; else computed from sweep.json's
                     points by analysis.metrics.frontier) ─► one frontier per sweep
               ─► refused when the workloads differ (first point's, compare.conditions): the
                  same speed then means other prompts and answers
               ─► at_interactivity X (tokens/s per user): each frontier's y there, linearly
                  interpolated between its two neighbouring frontier points; refused for a
                  frontier whose measured range does not contain X (never extrapolated)
               ─► blocks() (Markdown / HTML, the overlaid plot inline) ; result dict (--json)

A garbled sweep.json is refused with one line naming it and the fault (sweep_state.sweep_problem);
a frontier.json holding NaN / Infinity (older writers) is recomputed from sweep.json's rows, the
non-finite figures left out with their reason. INVALID points make no frontier (frontier.valid_line):
a sweep with no VALID point refuses the --at-interactivity headline.
Every other condition that differs (server, model, load kind, SLO, ...) is listed, not refused:
comparing two servers or two configurations is what this is for.
"""
from __future__ import annotations

import base64
import math
from pathlib import Path
from typing import Optional

from analysis.contract.summary import Summary
from analysis.contract.sweep import Frontier, SweepFile
from analysis.contract.rundir import read_json, read_sweep, records_path
from analysis.metrics import frontier as fr_mod
from analysis.report import compare as cmp
from analysis.report.plots_frontier import frontier_png, point_label
from analysis.report.render import Block, fmt
from analysis.report.sweep_state import sweep_problem


def is_sweep(d: Path) -> bool:
    return (Path(d) / "sweep.json").is_file()


def frontier_of(d: Path) -> dict:
    """The sweep's frontier.json, else (a sweep written before it) computed from its points'
    summaries (summary.json through the contract, else recomputed from the records)."""
    raw = read_json(d / "frontier.json")
    sw = SweepFile.read(read_sweep(d))
    param = sw.param if "param" in sw.model_fields_set and sw.param else "?"
    if raw and isinstance(raw.get("points"), list):       # frontier.json as written: a mapping
        fr = Frontier.read(raw)
        if _finite(fr):
            return raw
        if sw.points:                  # NaN / Infinity written by an older sweep: recomputed
            return {**fr_mod.frontier(sw.points, param, fr.y or fr_mod.Y), "slo": fr.slo}
    from analysis.metrics.summary import summary_of
    rows, slo = [], None
    for p in sw.points:
        rd = d / p.run_dir
        s = Summary.read(summary_of(rd) if records_path(rd).is_file() else {})
        slo = slo or (s.slo.model_dump(exclude_unset=True) if s.slo else None)
        rows.append({**p.model_dump(exclude_unset=True),
                     "valid": s.verdict.valid if s.verdict and "valid" in
                     s.verdict.model_fields_set else p.valid, **fr_mod.capacity_row(s)})
    return {**fr_mod.frontier(rows, param), "slo": slo}


def _finite(fr: Frontier) -> bool:
    nums = [v for p in fr.points for v in (p.x, p.y)] + [v for pair in fr.line for v in pair]
    return all(not isinstance(v, float) or math.isfinite(v) for v in nums)


def _first_point(d: Path) -> Optional[Path]:
    for p in sorted(SweepFile.read(read_sweep(d)).points, key=lambda p: p.value):
        rd = d / p.run_dir
        if records_path(rd).is_file():             # records.jsonl, or records.arrow
            return rd
    return None


def compare_frontiers(dirs: list[Path], at: Optional[float] = None) -> dict:
    """{"sweeps", "dirs", "comparable", "refusals", "differences", "frontiers", "at"}."""
    dirs = [Path(d) for d in dirs]
    names = cmp.names(dirs)
    garbled = [why for why in (sweep_problem(d) for d in dirs) if why]
    if garbled:                        # one line naming the file and what is wrong
        return {"sweeps": names, "dirs": [str(d) for d in dirs], "comparable": False,
                "refusals": garbled, "differences": [], "frontiers": [], "at": None}
    frontiers = [frontier_of(d) for d in dirs]
    firsts = [_first_point(d) for d in dirs]
    refusals, differences = [], []
    missing = [n for n, f in zip(names, firsts) if f is None]
    if missing:
        refusals.append(f"no point with records in {', '.join(missing)}: its workload cannot be "
                        "checked")
    else:
        conds = [cmp.conditions(f) for f in firsts]
        wl = [c["must"]["workload"] for c in conds]
        if any(w is None for w in wl):
            refusals.append("workload not recorded for " + ", ".join(
                n for n, w in zip(names, wl) if w is None) + ": cannot check it")
        else:
            refusals += [f"workload differs: {x}" for x in cmp._diff([cmp.flatten(w) for w in wl])]
        differences = [x for x in cmp._diff([{**c["other"], **cmp.flatten(
            {"slo": c["must"]["slo"], "scenario type": c["must"]["scenario type"]})}
            for c in conds]) if not x.startswith(("load.", "scenario sha256"))]
    out = {"sweeps": names, "dirs": [str(d) for d in dirs], "comparable": not refusals,
           "refusals": refusals, "differences": differences,
           "frontiers": [{"name": n, **f} for n, f in zip(names, frontiers)], "at": None}
    if at is not None and not refusals:
        out["at"] = fr_mod.ahead(list(zip(names, frontiers)), at)
    return out


def ahead_line(at: dict) -> str:
    """One console line: who is ahead at X and by how much, or why it cannot be said."""
    x = at["at_interactivity"]
    vals = "; ".join(f"{v['name']} {fmt(v['y'], 1)}" if v["y"] is not None
                     else f"{v['name']} n/a ({v['reason']})" for v in at["values"])
    if at["refused"]:                 # fr_mod.ahead always writes these keys
        return f"at {x:g} tok/s per user: refused: {at['refused']}"
    left = "; ".join(f"{v['name']} " + ", ".join(f"{w:g}" for w in v["invalid_left_out"])
                     for v in at["values"] if v["invalid_left_out"])
    vals += f" (INVALID points left out of the frontiers: {left})" if left else ""
    if at["ahead"] is None:
        return f"at {x:g} tok/s per user: tied ({vals} output tok/s per accelerator)"
    return (f"at {x:g} tok/s per user: {at['ahead']} is ahead by {at['by']:.1f} output tok/s "
            f"per accelerator ({fmt(at['by_pct'], 1)}% over {at['runner_up']}); {vals}")


def plot(res: dict) -> tuple[Optional[bytes], str]:
    slo = next((t.slo for t in map(Frontier.read, res["frontiers"]) if t.slo), None)
    return frontier_png([(f["name"], f) for f in res["frontiers"]], slo,
                        title="frontiers: " + " vs ".join(res["sweeps"]))


VERDICT = {True: "VALID", False: "INVALID", None: "n/a"}


def blocks(res: dict, png: Optional[bytes] = None, note: str = "") -> list[Block]:
    out: list[Block] = [("title", "loadgen compare (frontiers) — " + " vs ".join(res["sweeps"]))]
    if not res["comparable"]:
        return out + [("p", "INVALID comparison: conditions that must match differ.")] + [
            ("warn", r) for r in res["refusals"]]
    out.append(("p", "x: interactivity, tokens/s per user (p50 of 1000 / TPOT); y: output "
                     "tokens/s per accelerator; on the frontier: no other point of the same "
                     "sweep is at least as good on both (measured)."))
    if res["at"]:                      # compare_frontiers always writes it
        out += [("h", f"At {res['at']['at_interactivity']:g} tokens/s per user"),
                ("p", ahead_line(res["at"]))]
    for raw in res["frontiers"]:
        f = Frontier.read(raw)
        rows = [[point_label(p.param, p.value), fmt(p.x, 1), fmt(p.y, 1),
                 "yes" if p.on_frontier else "no", VERDICT[p.valid], p.run] for p in f.points]
        out += [("h", f"Frontier of {raw['name']}"),
                ("table", ["load", "tok/s per user (p50)", "out tok/s per accelerator",
                           "on frontier", "verdict", "run"], rows)]
        out += [("warn", f"{e.run}: {e.missing} is null: {e.reason}") for e in f.excluded]
    if png is not None:
        out.append(("img", base64.b64encode(png).decode("ascii"), note))
    elif note:
        out.append(("p", note))
    out.append(("h", "Conditions that differ"))
    out += [("table", ["condition: values in sweep order"], [[d] for d in res["differences"]])] \
        if res["differences"] else [("p", "No recorded condition differs.")]
    return out
