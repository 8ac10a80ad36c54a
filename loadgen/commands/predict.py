"""``loadgen predict SCENARIO``: forecast TTFT, TPOT, throughput and interactivity per load point.

    SCENARIO (+ --set) ─► loadgen.multirun.predict.Predictor
        spec only (default): roofline floors under simulated continuous batching (a bound)
        --calibrate: ≤ 60 s of probes of this server first; overheads fitted (grade calibrated)
        --device NAME|PATH|calibrate: the device (a catalogue name is a what-if: spec only)
    ─► a table, or with --json ONE line {grade, fit, points: [{param, value, ttft_ms_p50,
       tpot_ms_p50, output_throughput, interactivity_tok_s_p50}], device, evidence, ...}
docs/predict.md gives the model.
"""
from __future__ import annotations

import argparse
import json

from loadgen.commands.scenario_args import add_scenario_args
from loadgen.scenario.model import ScenarioError
from loadgen.commands import subcommand


def register(subparsers) -> None:
    p = subcommand(subparsers, "predict", main)
    add_scenario_args(p, scenario_help="scenario YAML file (a sweep: block gives the points)",
                      set_help="override one scenario field (repeatable)",
                      json_help="print the forecast as one JSON line")
    add_predict_flags(p)


def add_predict_flags(p: argparse.ArgumentParser, prefix: str = "") -> None:
    p.add_argument("--device", default=None, metavar="NAME|PATH|calibrate",
                   help="device spec: a catalogue name (a spec-only what-if), a spec JSON file, "
                        "or 'calibrate' (this host's `loadgen calibrate`); default: this host's "
                        "calibration when there is one")
    p.add_argument("--model-config", default=None, metavar="PATH",
                   help="the served model's config.json (default: target.server's preset or "
                        "model directory, else the server's GET /info)")
    p.add_argument(f"--{prefix}calibrate", action="store_true", dest="calibrate",
                   help="probe the server (2-3 short runs, at most 60 s, kept as run "
                        "directories) and fit the per-step overheads: the calibrated grade")


def _f(v, d=1) -> str:
    return "n/a" if v is None else f"{v:,.{d}f}"


def main(args: argparse.Namespace) -> int:
    from loadgen.multirun.predict import Predictor
    from loadgen.scenario.loader import load_scenario
    sc = load_scenario(args.scenario, args.overrides)
    if args.calibrate and args.device and not args.device.endswith(".json") \
            and args.device != "calibrate":
        raise ScenarioError(f"--device {args.device} with --calibrate: the probes measure this "
                            "server, not a catalogue device; a what-if is spec-only (drop "
                            "--calibrate)")
    res = Predictor(sc, args.device, args.calibrate, model_config=args.model_config).result()
    if args.json:
        print(json.dumps(res, default=str))
        return 0
    from rich.table import Table
    from loadgen.console.progress import stdout_console
    label = res["grade"] + (" what-if " + str(res["device"].get("name"))
                            if res["device"].get("what_if") else "")
    t = Table(title=f"forecast {sc.name} ({label}; {res['evidence']})", header_style="bold")
    for col in ("point", "TTFT p50 ms", "TPOT p50 ms", "out tok/s", "tok/s per user p50"):
        t.add_column(col, justify="right")
    for p in res["points"]:
        t.add_row(f"{p['param'].split('.')[-1]}={p['value']:g}", _f(p["ttft_ms_p50"], 2),
                  _f(p["tpot_ms_p50"], 2), _f(p["output_throughput"]),
                  _f(p["interactivity_tok_s_p50"]))
    c = stdout_console()
    c.print(t)
    c.print(f"device: {res['device'].get('how')}", highlight=False, markup=False)
    if res["fit"]:
        o = res["fit"]["overheads"]
        c.print(f"fit: step {o['step_ms']:.3f} ms + {o['per_seq_ms']:.3f} ms per sequence + "
                f"{o['prefill_ms']:.3f} ms per prefill pass + {o['prefill_req_ms']:.3f} ms per "
                f"prompt, client turnaround {o['turnaround_ms']:.3f} ms; rms relative residual "
                f"{_f(res['fit']['rms_rel_error'] and res['fit']['rms_rel_error'] * 100)} %",
                highlight=False, markup=False)
        floor = res["fit"].get("floor") or {}
        if floor.get("contradicted"):
            c.print(f"floor: {floor['note']}", highlight=False, markup=False)
    return 0
