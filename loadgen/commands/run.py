"""``loadgen run SCENARIO``: one measured run into a new run directory.

    SCENARIO (+ --set k.path=v) ─► scenario.load_scenario ─► runner.run_scenario
        ─► run_dir/{scenario.yaml, records.jsonl, sut.json, meta.json, summary.json, ...}
        ─► summary table (rich) on stdout, or one JSON line with --json

Exit: 0 after a run that finished (valid or not: the verdict says which), 130 if interrupted,
2 for a bad scenario or override.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run", help="run one scenario (YAML) and write a run directory",
        description="Run one scenario: start or reach the server, send the load, write "
                    "records.jsonl, meta.json, sut.json and summary.json.")
    p.add_argument("scenario", help="scenario YAML file (see scenarios/)")
    p.add_argument("--set", dest="overrides", action="append", default=[],
                   metavar="KEY.PATH=VALUE",
                   help="override one scenario field, e.g. --set load.rate=4 (repeatable)")
    p.add_argument("--json", action="store_true",
                   help="no live display; print the summary as one JSON line on stdout")
    p.add_argument("--engine", choices=["native"], default="native",
                   help="load engine: native (asyncio + aiohttp, the default and only one)")
    p.set_defaults(func=main)


def _term_as_interrupt(signum, frame):  # only while no event loop owns the signals
    raise KeyboardInterrupt


def main(args: argparse.Namespace) -> int:
    from loadgen.progress import RunProgress, print_summary
    from loadgen.runner import run_scenario
    from loadgen.scenario import load_scenario

    sc = load_scenario(args.scenario, args.overrides)
    old = signal.signal(signal.SIGTERM, _term_as_interrupt)
    try:
        result = run_scenario(sc, RunProgress(None, enabled=not args.json))
    finally:
        signal.signal(signal.SIGTERM, old)
    if args.json:
        print(json.dumps({"run_dir": str(result.run_dir), "interrupted": result.interrupted,
                          "summary": result.summary}, default=str))
    else:
        if result.summary is not None:
            print_summary(result.summary, str(result.run_dir))
        print(f"run directory: {result.run_dir}")
        if result.interrupted:
            print("loadgen: run interrupted; finished records kept, the rest marked cancelled",
                  file=sys.stderr)
    return 130 if result.interrupted else 0
