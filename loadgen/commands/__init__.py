"""commands: one module per ``loadgen`` sub-command (run, sweep, report, export, compare, serve,
kernel, calibrate, predict, validate), each parsing its flags and calling the package that does the
work; wired by loadgen/cli.py.

    loadgen/cli.py ─► commands/NAME.register(sub) ─► subcommand(sub, NAME, main): TEXTS[NAME]
        (the help line and the description) ─► the module's own flags ─► args.func = NAME.main
    python -m loadgen.commands.NAME (kernel, calibrate) ─► standalone(NAME, main, add_arguments)

May import: every loadgen package, analysis and servers (this is the top of the import graph);
nothing imports commands/ but loadgen.cli.
"""
from __future__ import annotations

import argparse
import sys

# name: (its line in `loadgen --help`, its description in `loadgen NAME --help`)
TEXTS: dict[str, tuple[str, str]] = {
    "run": (
        "run one scenario (YAML) and write a run directory",
        "Run one scenario: start or reach the server, send the load, write "
        "records.jsonl, meta.json, sut.json and summary.json."),
    "validate": (
        "check a scenario and print its plan, without sending anything",
        "Load and resolve a scenario (defaults and --set overrides applied), check "
        "every field and the workload's files, and print the plan: the target and "
        "whether loadgen would start a server, the load mode, the number of requests "
        "or the duration, the rate or concurrency, the prompt and output lengths, "
        "and the resolved scenario. Nothing is sent or written. Exit 0, or one line "
        "and exit 2 for a bad scenario. `loadgen run SCENARIO --dry-run` is the same."),
    "sweep": (
        "run a scenario at several load points, or search the max rate or "
        "concurrency under SLO",
        "One full run per point of the scenario's sweep block (load.concurrency "
        "or load.rate values), or the max_rate_under_slo / max_concurrency_under_slo "
        "search; writes sweep.json and frontier.json; resumable."),
    "report": (
        "regenerate summary.json and the report of a run",
        "Recompute RUN_DIR/summary.json from its records and "
        "meta, then write report.md and report.html."),
    "export": (
        "write a run's records.arrow as records.jsonl (for jq, pandas)",
        "Write RUN_DIR/records.arrow (a run with output.records: arrow) as JSON lines, one "
        "record a line, the lines the JSONL writer would have written: RUN_DIR/records.jsonl, "
        "or --out FILE. Streams a record batch at a time (any run length); keeps an existing "
        "file unless --force."),
    "compare": (
        "compare runs side by side (refused when workload, SLO or scenario "
        "type differ)",
        "Put two or more run directories side by side. Refuses, naming the "
        "fields, when their scenario type (load.mode), workload or SLO differ; "
        "lists every other condition that differs."),
    "serve": (
        "run a built-in server (jax: the JAX engine; calib: known timing)",
        "Run a built-in OpenAI-compatible server: jax (the built-in JAX inference "
        "engine) or calib (a calibration server whose TTFT and ITL you set, to check "
        "a load tester against known numbers)."),
    "kernel": (
        "time Y = ReLU(XW + b) across frameworks (seed protocol)",
        "Time the common kernel Y = ReLU(XW + b) (X: M x K, W: K x N) on every framework path "
        "found here and place each row under a roofline (the `loadgen calibrate` spec, "
        "else the catalogue device); or, with --model, time one decode step's GEMVs "
        "against the engine's measured TPOT. See docs/kernel.md."),
    "calibrate": (
        "measure local memory bandwidth and matmul rate",
        "Measure this machine's memory bandwidth (a large copy) and matmul rate (fp32, bf16), "
        "the medians of --repeats runs, and save them as a device spec (evidence: measured) "
        "that `loadgen kernel` and the roofline of later managed runs on this host use. "
        "See docs/kernel.md."),
    "predict": (
        "forecast a scenario's latency and throughput per load point",
        "Forecast TTFT, TPOT, output throughput and interactivity at each load point "
        "of a scenario (its sweep values, else its load) from the model's shape, the "
        "device's roofs and a simulation of continuous batching; --calibrate first "
        "probes the server for at most 60 s and fits its per-step overheads."),
}


def subcommand(subparsers, name: str, main) -> argparse.ArgumentParser:
    """The sub-parser every command's ``register`` starts from: its two texts (TEXTS) and
    ``main``, which loadgen/cli.py calls with the parsed flags; the module adds its flags."""
    help_line, description = TEXTS[name]
    p = subparsers.add_parser(name, help=help_line, description=description)
    p.set_defaults(func=main)
    return p


def standalone(name: str, main, add_arguments) -> None:
    """``python -m loadgen.commands.NAME``: the command's own flags, without the rest of the CLI."""
    p = argparse.ArgumentParser(prog=f"loadgen {name}", description=TEXTS[name][1])
    add_arguments(p)
    sys.exit(main(p.parse_args()))
