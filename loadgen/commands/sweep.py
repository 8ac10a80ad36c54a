"""``loadgen sweep SCENARIO``: a run per load point (or a max-rate-under-SLO search), resumable.

    SCENARIO with a ``sweep:`` block (+ --set) ─► loadgen.multirun.sweep.run_sweep
        ─► <output.dir>/<output.run_name or sweep-NAME>/{<param>-<value>/, sweep.json}
        ─► table of the points (rich) or one JSON line with --json
        ─► SWEEP_DIR/report.md + report.html (output.report text | full), or the command that
           writes them (`loadgen report SWEEP_DIR`, output.report none)
Exit: 0; 1 with --fail-on-invalid when a point is INVALID (a search: when no probe passed, its
failing probes being how it brackets); 2 for bad input or a sweep directory held by another.
Rerunning the same command skips every point that already has a summary.json.
``--metrics-port P``: one live exporter (loadgen/live) for the whole sweep, following each
point's run as it goes (counters go on from point to point; docs/live-metrics.md).
"""
from __future__ import annotations

import argparse
import json
import sys

from rich.table import Table

from loadgen.console.progress import stdout_console

from loadgen.commands.scenario_args import add_measure_args, add_scenario_args
from loadgen.scenario.model import ScenarioError
from loadgen.commands import subcommand


def register(subparsers) -> None:
    from loadgen.live.flags import add_flags as add_live_flags
    p = subcommand(subparsers, "sweep", main)
    add_scenario_args(p, scenario_help="scenario YAML file with a sweep: block",
                      set_help="override one scenario field (repeatable)",
                      json_help="print sweep.json as one JSON line")
    add_measure_args(p, fail_help="exit 1 when a point's verdict is INVALID (for CI; a search: "
                                  "when no probe passed); without it INVALID points exit 0, as "
                                  "on loadgen run",
                     repeat_help="run the whole sweep N times; repeat.json gives, per point, the "
                                 "mean and a 95%% confidence interval of every headline figure")
    add_live_flags(p, "the points run (one exporter for the sweep)")
    from loadgen.commands.predict import add_predict_flags
    p.add_argument("--predict", action="store_true",
                   help="forecast every point first (docs/predict.md): summary.json 'forecast' "
                        "and frontier.json/png show it beside the measured figures")
    add_predict_flags(p, prefix="predict-")


def _f(v, digits=1) -> str:
    if v is None:
        return "n/a"
    return f"{v:,.{digits}f}" if isinstance(v, float) else str(v)


def sweep_table(result: dict) -> Table:
    """One row per point; the run column (the point's directory, which names the value) comes
    first and is never truncated: a narrow terminal squeezes the figures instead."""
    t = Table(title=f"sweep {result['scenario']} over {result['param']}", header_style="bold")
    width = max((len(p["run_dir"]) for p in result["points"]), default=3)
    t.add_column("run", justify="left", no_wrap=True, min_width=width)
    for col in ("ok", "failed", "req/s", "out tok/s", "goodput", "TTFT p50", "TTFT p99",
                "TPOT p50", "TPOT p99", "verdict"):
        t.add_column(col, justify="left" if col == "verdict" else "right")
    for p in result["points"]:
        verdict = ("VALID" if p["valid"] else "INVALID") + (" (reused)" if p["reused"] else "")
        t.add_row(p["run_dir"], _f(p["requests_completed"]), _f(p["requests_failed"]),
                  _f(p["request_throughput"], 2), _f(p["output_throughput"]), _f(p["goodput"], 2),
                  _f(p["ttft_p50_ms"]), _f(p["ttft_p99_ms"]), _f(p["tpot_p50_ms"]),
                  _f(p["tpot_p99_ms"]), verdict)
    return t


def frontier_line(sweep_dir) -> str:
    """The frontier's points on one line (frontier.json), each as load: tok/s per user →
    output tok/s per accelerator."""
    from analysis.report.compare_frontier import frontier_of
    from analysis.report.plots_frontier import point_label
    from pathlib import Path
    fr = frontier_of(Path(sweep_dir))
    on = sorted((p for p in fr.get("points") or [] if p.get("on_frontier")), key=lambda p: p["x"])
    if not on:
        return "frontier: no point has both tok/s per user and tok/s per accelerator"
    return ("frontier (tok/s per user → output tok/s per accelerator): " + "; ".join(
        f"{point_label(p['param'], p['value'])} {p['x']:.1f} → {p['y']:.1f}" for p in on)
        + f" ({Path(sweep_dir) / 'frontier.json'})")


def main(args: argparse.Namespace) -> int:
    from loadgen.live.flags import open_live
    from loadgen.scenario.loader import load_scenario

    sc = load_scenario(args.scenario, args.overrides)
    if args.repeat < 1:
        raise ScenarioError(f"--repeat {args.repeat}: must be at least 1")
    exporter = open_live(args)      # --metrics-port: /metrics from its own process, or None
    try:
        return _main(sc, args, exporter)
    finally:
        if exporter is not None:
            exporter.close()


def _main(sc, args: argparse.Namespace, exporter) -> int:
    from loadgen.multirun.sweep import run_sweep
    if args.repeat > 1:
        return _repeat(sc, args, exporter)
    predictor = None
    if args.predict or args.calibrate:  # --predict: forecasts (loadgen.multirun.predict)
        from loadgen.multirun.predict import Predictor
        predictor = Predictor(sc, args.device, args.calibrate, model_config=args.model_config)
    d, result = run_sweep(sc, live=not args.json, exporter=exporter, predictor=predictor)
    if args.json:
        print(json.dumps({"sweep_dir": str(d), **result,
                          "report_command": f"loadgen report {d}"}, default=str))
        return _invalid_code(result, args.fail_on_invalid)
    c = stdout_console()                # not a terminal: wide enough that no cell is cut
    c.print(sweep_table(result))
    for p in result["points"]:          # prefix-cache hygiene (and probe) warnings, per point
        for w in p.get("warnings") or []:
            c.print(f"warning: {p['run_dir']}: {w}", highlight=False, markup=False)
    s = result.get("search")
    if s and s.get("kind") == "max_concurrency_under_slo":
        c.print(f"max concurrency under SLO: {_f(s['max_passing_concurrency'])} (first failing: "
                f"{_f(s['min_failing_concurrency'])}; goodput there "
                f"{_f(s.get('goodput_at_answer'), 3)} req/s; {len(s['probes'])} probes"
                + ("; converged" if s["converged"] else f"; {s['stopped']}") + ")")
    elif s:
        c.print(f"max rate under SLO: {_f(s['max_passing_rate'], 3)} req/s (first failing: "
                f"{_f(s['min_failing_rate'], 3)}; {len(s['probes'])} probes"
                + ("; converged" if s["converged"] else f"; {s['stopped']}")
                + (f"; goodput there {_f(s['goodput_at_answer'], 3)} req/s"
                   if s.get("goodput_at_answer") is not None else "") + ")")
    c.print(frontier_line(d), highlight=False, markup=False)
    c.print(f"sweep directory: {d}")
    if result.get("report"):
        c.print(f"sweep report: {result['report']}", highlight=False, markup=False)
    else:
        c.print(f"sweep report: not written (output.report {sc.output.report}"
                + (", see report.error.txt" if sc.output.report != "none" else "")
                + f"); write it with: loadgen report {d}", highlight=False, markup=False)
    return _invalid_code(result, args.fail_on_invalid)


def _invalid_code(result: dict, fail_on_invalid: bool) -> int:
    """--fail-on-invalid: 1 (one stderr line) when a point is INVALID; for a search, when no
    probe passed (its failing probes are how it finds the limit)."""
    if not fail_on_invalid:
        return 0
    s = result.get("search")
    if s:
        key = ("max_passing_concurrency" if s.get("kind") == "max_concurrency_under_slo"
               else "max_passing_rate")
        if s.get(key) is None:
            print(f"loadgen sweep: --fail-on-invalid: no probe passed ({s.get('stopped')})",
                  file=sys.stderr)
            return 1
        return 0
    bad = [p["run_dir"] for p in result.get("points") or [] if p.get("valid") is False]
    if bad:
        print(f"loadgen sweep: --fail-on-invalid: {len(bad)} of {len(result['points'])} points "
              f"INVALID ({', '.join(bad)})", file=sys.stderr)
        return 1
    return 0


def _repeat(sc, args: argparse.Namespace, exporter=None) -> int:
    """The whole sweep N times; per point, the mean and 95 % CI of each headline figure."""
    from loadgen.multirun.repeat import sweep_repeats
    from loadgen.multirun.sweep import run_sweep
    base, rep = sweep_repeats(sc, args.repeat, lambda one: run_sweep(one, live=not args.json,
                                                                     exporter=exporter))
    if args.json:
        print(json.dumps({"repeat_dir": str(base), "repeat": rep}, default=str))
        return 0
    c = stdout_console()
    for pt in rep["points"]:
        f = pt["figures"]
        c.print(f"{sc.sweep.param} = {pt['value']:g}: " + ", ".join(
            f"{k} {f[k]['mean']:.3f}" + (f" (95% CI {f[k]['ci95_low']:.3f}–{f[k]['ci95_high']:.3f})"
                                         if f[k]["ci95_low"] is not None else "")
            for k in ("output_throughput", "tpot_ms_p50", "ttft_ms_p99") if f[k]["mean"] is not None))
    c.print(f"repeat directory: {base}")
    return 0
