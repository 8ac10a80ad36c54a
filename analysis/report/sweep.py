"""The report of a sweep: one point per run directory, curves across the points.

    SWEEP_DIR/sweep.json {"param", "mode", "points": [{"value", "run_dir"}], "search"}
    SWEEP_DIR/<run_dir>/ (summary.json, records.jsonl, meta.json, sut.json)   ─► load_sweep
        ─► table of points; plots_sweep (latency vs load with SLO lines, throughput vs latency,
           J/token, measured TPOT vs the decode-step roofline); search result
        ─► the throughput–interactivity frontier (frontier.json; plots_frontier)
        ─► conditions (first point) + what differs between points; manifest
        ─► SWEEP_DIR/report.md, report.html (render.py)

The layout is loadgen/multirun/sweep.py's. A point's files are read through analysis.contract (meta.json,
sut.json by summary.load_run; summary.json by summary.summary_of). A point without summary.json (or
with one of an older contract) is summarised from its records;
one whose directory is gone is listed as missing, never dropped silently. A sweep that did not
finish (sweep_state: its plan against the points on disk) is headlined INCOMPLETE, with the
points not run and the half-written one; a garbled sweep.json is one line naming the fault.
"""
from __future__ import annotations

from pathlib import Path
from typing import Optional

from analysis.contract import RunMeta, Summary
from analysis.contract.rundir import read_sweep, records_path
from analysis.contract.summary import Stats
from analysis.contract.summary_blocks import Energy
from analysis.contract.sweep import Frontier, SweepFile
from analysis.report import compare
from analysis.report import conditions
from analysis.report import manifest
from analysis.report import plots_sweep
from analysis.metrics import summary as summary_mod
from analysis.report.render import Block, fmt, render_html, render_md
from analysis.report.sweep_state import sweep_problem, sweep_state
from analysis.roofline import run_roofline

MAX_CURVE_POINTS = 64


def load_sweep(sweep_dir: str | Path) -> dict:
    """{"sweep": sweep.json, "points": [{"value", "dir", "summary", "meta", "sut", "records",
    "roofline"}], "missing": [why, ...]} sorted by value."""
    d = Path(sweep_dir)
    problem = sweep_problem(d)              # one line: the file and what is wrong with it
    if problem:
        raise ValueError(problem)
    raw = read_sweep(d)                     # through analysis.contract
    if raw is None:
        raise ValueError(f"{d / 'sweep.json'}: unreadable (absent or not a JSON object)")
    sw = SweepFile.read(raw, "sweep.json")
    points, missing = [], []
    for p in sorted(sw.points, key=lambda p: p.value):
        rd = d / p.run_dir
        if not records_path(rd).is_file():          # records.jsonl, or records.arrow
            missing.append(f"{p.value}: {rd} holds no records.jsonl")
            continue
        records, meta, sut = summary_mod.load_run(rd)
        s = Summary.read(summary_mod.summary_of(rd))   # summary.json through the contract
        points.append({"value": p.value, "dir": rd, "summary": s, "meta": meta, "sut": sut,
                       "records": records,
                       "roofline": run_roofline.sweep_point(rd, records)})   # frozen device.json
    return {"sweep": sw, "points": points, "missing": missing, "state": sweep_state(d, raw)}


def status_line(sweep_dir: str | Path) -> str:
    """One line for the console: INCOMPLETE and why, or how many points are done."""
    d = Path(sweep_dir)
    problem = sweep_problem(d)
    return problem or sweep_state(d, read_sweep(d) or {})["headline"]


def roofline_curve(points: list[dict]) -> Optional[list[dict]]:
    """serving_bounds for decode batches 1..max(slots, largest measured batch), at the first
    calculated point's context and prompt length (the sweep keeps the workload fixed)."""
    ok = [p for p in points if p["roofline"]["status"] == "calculated"]
    if not ok:
        return None
    from analysis.roofline import bounds
    from analysis.report import sut as sut_mod
    p = ok[0]
    shape = sut_mod.model_shape(p["sut"])
    spec = p["roofline"]["spec"]                     # the spec the point froze
    b0 = p["roofline"]["bounds"]
    slots = sut_mod.server_info(p["sut"]).get("slots") or shape.get("slots") or 1
    top = max([int(slots)] + [q["roofline"]["bounds"]["batch"] for q in ok])
    batches = sorted({max(1, round(x)) for x in
                      (range(1, top + 1) if top <= MAX_CURVE_POINTS else
                       [top ** (i / (MAX_CURVE_POINTS - 1)) for i in range(MAX_CURVE_POINTS)])})
    return [bounds.serving_bounds(shape, spec, b, b0["context_len"], b0["prompt_tokens"])
            for b in batches]


def headline_ttft(s: Summary) -> Optional[Stats]:
    """The TTFT distribution the summary's headline uses (from send, or from scheduled)."""
    return s.ttft_from_scheduled_ms if s.headline_ttft == "ttft_from_scheduled_ms" else s.ttft_ms


def _points_table(points: list[dict], param: str) -> Block:
    rows = []
    for p in points:
        s: Summary = p["summary"]
        e = s.energy or Energy()
        ttft, tpot = headline_ttft(s) or Stats(), s.tpot_ms or Stats()
        st = s.steady_state.output_throughput if s.steady_state else None
        status = e.status if "status" in e.model_fields_set else "unmeasured"
        rows.append([f"{p['value']:g}", s.requests_completed, s.requests_failed,
                     fmt(s.request_throughput, 3), fmt(s.output_throughput, 1), fmt(st, 1),
                     fmt(s.goodput, 3), fmt(ttft.p50), fmt(ttft.p99), fmt(tpot.p50),
                     fmt(tpot.p99), f"{fmt(e.j_per_output_token, 4)} ({status})",
                     "VALID" if s.verdict and s.verdict.valid else "INVALID", p["dir"].name])
    return ("table", [param.split(".")[-1], "ok", "failed", "req/s", "out tok/s",
                      "steady out tok/s", "goodput",
                      "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99", "J/token", "verdict",
                      "run"], rows)


def _steady_note(points: list[dict]) -> str:
    """The steady-state rule under the points table; n/a cells say why in each run's report."""
    st = next((p["summary"].steady_state for p in points if p["summary"].steady_state), None)
    if not st:
        return "steady out tok/s: n/a (summaries written before the steady-state window existed)"
    bad = [f"{p['value']:g}: {p['summary'].steady_state.reason or 'no reason recorded'}"
           for p in points if p["summary"].steady_state
           and p["summary"].steady_state.status not in (None, "ok")]
    return (f"steady out tok/s: output tokens/s over the steady-state window ({st.rule})"
            + (f"; unavailable at {'; '.join(bad)}" if bad else "") + ".")


def _roofline_table(points: list[dict]) -> list[Block]:
    rows = []
    for p in points:
        r = p["roofline"]
        if r["status"] != "calculated":
            rows.append([f"{p['value']:g}", "n/a", "n/a", "n/a", "n/a", "n/a",
                         r["reason"] or "no reason recorded"])
            continue
        st = r["bounds"]["decode_step"]
        ms = lambda x: None if x is None else x * 1e3  # noqa: E731
        rows.append([f"{p['value']:g}", r["bounds"]["batch"], fmt(ms(st["memory_s"]), 4),
                     fmt(ms(st["compute_s"]), 4), fmt(r["tpot_p50_ms"], 4),
                     fmt(r["mbu"], 3), r["bounds"]["tpot_binding"]])
    first = next((p["roofline"] for p in points if p["roofline"]["status"] == "calculated"),
                 None)
    note = (f"Device {first['device']['name']} ({first['device']['how']}"
            + (", recomputed, not the spec frozen into the run" if first['device']['source']
               == "override" else "") + f"). {first['rule']}." if first
            else "No point has a roofline.")
    return [("table", ["value", "batch", "bandwidth floor (ms)", "compute floor (ms)",
                       "measured TPOT p50 (ms)", "MBU", "binding"], rows), ("p", note)]


def _frontier(d: Path, with_plots: bool) -> list[Block]:
    """The frontier section: the plot (plots_frontier) and, per point, its two figures."""
    from analysis.report import compare_frontier, plots_frontier
    fr = compare_frontier.frontier_of(d)
    out: list[Block] = [("h", "Throughput–interactivity frontier")]
    f = Frontier.read(fr)
    rows = [[plots_frontier.point_label(p.param, p.value), fmt(p.x, 1), fmt(p.y, 1),
             "yes" if p.on_frontier else "no", p.run] for p in f.points]
    out.append(("table", ["load", "tok/s per user (p50)", "out tok/s per accelerator",
                          "on frontier", "run"], rows))
    out += [("p", f"{e.run}: {e.missing} n/a: {e.reason}") for e in f.excluded]
    if with_plots:
        import base64
        png, note = plots_frontier.frontier_png([(d.name, fr)], f.slo)
        out.append(("img", base64.b64encode(png).decode("ascii"), note) if png else ("p", note))
    return out


def _search(sw: SweepFile) -> list[Block]:
    s = sw.search
    if not s:
        return []
    state = "converged" if s.converged else f"stopped: {s.stopped}"
    if s.kind == "max_concurrency_under_slo":
        return [("h", "Max concurrency under the SLO (search)"),
                ("p", f"max passing concurrency {fmt(s.max_passing_concurrency)}, first "
                      f"failing {fmt(s.min_failing_concurrency)}, goodput there "
                      f"{fmt(s.goodput_at_answer, 3)} req/s, {len(s.probes)} "
                      f"probes, {state} ({sw.rule})")]
    return [("h", "Max rate under the SLO (search)"),
            ("p", f"max passing rate {fmt(s.max_passing_rate, 3)} req/s, first failing "
                  f"{fmt(s.min_failing_rate, 3)} req/s, {len(s.probes)} "
                  f"probes, {state} (tolerance {s.tolerance}; {sw.rule})"
                  + (f"; goodput at the answer {fmt(s.goodput_at_answer, 3)} req/s"
                     if s.goodput_at_answer is not None else ""))]


def build_sweep_sections(sweep_dir: str | Path, with_plots: bool = True) -> list[Block]:
    d = Path(sweep_dir)
    data = load_sweep(d)
    sw, pts = data["sweep"], data["points"]
    param = sw.param
    state = data["state"]
    out: list[Block] = [("title", f"loadgen sweep report — {d.name}")]
    if state["complete"] is False:          # first: the sweep did not finish
        out.append(("warn", state["headline"]))
    planned = f" of {len(state['planned'])} planned" if state["planned"] is not None else ""
    out.append(("p", f"scenario {sw.scenario}; mode {sw.mode}; swept "
                     f"{param}; {len(pts)}{planned} point(s) with runs"))
    out += [("warn", f"point {m}") for m in data["missing"]]
    if not pts:
        return out + [("p", "No point has a run directory with records: nothing to report.")]
    slo = pts[0]["summary"].slo or {}
    from analysis.roofline import run_device # `loadgen report SWEEP --device`: labelled
    dev = run_device.for_run(pts[0]["dir"])
    if dev["source"] == "override":
        out.append(("warn", f"Roofline recomputed against {dev['how']}, not the specs "
                            "frozen into the points (this report is written beside the sweep's "
                            "own)."))
    out += [("h", "Points (measured)"), _points_table(pts, param), ("p", _steady_note(pts))]
    hygiene = [(p, RunMeta.read(p["meta"]).cache_hygiene) for p in pts]     # prefix cache
    out += [("warn", f"{p['value']:g} ({p['dir'].name}): {h.warning}")
            for p, h in hygiene if h and h.warning]
    out += _search(sw)
    out += _frontier(d, with_plots)
    out.append(("h", "Curves"))
    if with_plots:
        curve = roofline_curve(pts)
        for img, note in (plots_sweep.latency_vs_load_png(pts, param, slo),
                          plots_sweep.throughput_latency_png(pts, param),
                          plots_sweep.energy_png(pts, param),
                          plots_sweep.roofline_png(pts, curve)):
            out.append(("img", img, note) if img else ("p", note))
    else:
        out.append(("p", "plots not requested"))
    out += [("h", "Decode roofline per point (calculated floors vs measured)")]
    out += _roofline_table(pts)
    first = pts[0]
    rows = [[c["item"], c["value"], c["evidence"]] for c in conditions.conditions_table(
        first["summary"], first["meta"], first["sut"], first["records"])]
    out += [("h", f"Comparison conditions (first point, {param.split('.')[-1]} "
                  f"{first['value']:g})"), ("table", ["condition", "value", "evidence"], rows)]
    res = compare.compare([p["dir"] for p in pts]) if len(pts) > 1 else None
    if res is not None:
        diffs = [x for x in res["refusals"] + res["differences"]
                 if not x.startswith(("load.", "scenario sha256"))]
        out += [("h", "Conditions that differ between points (besides the swept load)")]
        out += [("p", "none")] if not diffs else [("warn", x) for x in diffs]
    out += [("h", "Reproducibility manifest (first point)"),
            ("table", ["item", "value", "evidence"],
             manifest.manifest_rows(manifest.manifest(first["dir"])))]
    return out


def write_sweep_report(sweep_dir: str | Path, with_plots: bool = True,
                       stem: str = "report") -> tuple[Path, Path]:
    """Write SWEEP_DIR/report.md and SWEEP_DIR/report.html (``stem``.md/.html: `loadgen report
    --device` writes beside them); returns their paths."""
    d = Path(sweep_dir)
    blocks = build_sweep_sections(d, with_plots)
    from analysis.report.output import write_pages      # whole or not at all
    return write_pages(d, blocks, stem)
