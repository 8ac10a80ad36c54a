"""``loadgen run SCENARIO``: one measured run into a new run directory.

    SCENARIO (+ --set k.path=v) ─► scenario.load_scenario ─► runner.run_scenario
        ─► run_dir/{scenario.yaml, records.jsonl, sut.json, meta.json, summary.json, ...}
        ─► summary table (rich) on stdout, or one JSON line with --json

``--engine locust`` hands the same scenario to loadgen/locust_engine (same run directory).
Exit: 0 after a run that finished (valid or not: the verdict says which), 130 if interrupted,
2 for a bad scenario, override or flag combination, 1 when the Locust engine failed (one line).
"""
from __future__ import annotations

import argparse
import json
import signal
import sys

from loadgen.scenario.model import ScenarioError


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
    p.add_argument("--engine", choices=["native", "locust"], default="native",
                   help="load engine: native (asyncio + aiohttp, the default) or locust "
                        "(Locust workers, for load beyond one client core or host)")
    g = p.add_argument_group("locust engine (--engine locust)")
    g.add_argument("--workers", type=int, default=None, metavar="N",
                   help="local Locust worker processes (with --master: how many will connect)")
    g.add_argument("--master", action="store_true",
                   help="run only the master here; workers join from other hosts")
    g.add_argument("--worker", action="store_true",
                   help="run one worker that joins --master-host")
    g.add_argument("--master-host", default=None, metavar="H", help="the --master's host")
    g.add_argument("--master-port", type=int, default=5557, metavar="P",
                   help="the master's port (default 5557)")
    p.set_defaults(func=main)


def _term_as_interrupt(signum, frame):  # only while no event loop owns the signals
    raise KeyboardInterrupt


def main(args: argparse.Namespace) -> int:
    from loadgen.run.progress import RunProgress, print_summary
    from loadgen.run.runner import run_scenario
    from loadgen.scenario.model import load_scenario

    from loadgen.locust_engine.cli import check_flags, run_from_cli

    bad = check_flags(args.engine, args.workers, args.master, args.worker, args.master_host)
    if bad:
        raise ScenarioError(bad)
    sc = load_scenario(args.scenario, args.overrides)
    progress = RunProgress(None, enabled=not args.json)
    old = signal.signal(signal.SIGTERM, _term_as_interrupt)
    try:
        if args.engine == "locust":
            result = run_from_cli(sc, args, progress)
            if isinstance(result, int):      # --worker, or locust missing: an exit code
                return result
        else:
            result = run_scenario(sc, progress)
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
    if result.interrupted:
        return 130
    return 1 if result.meta.get("crashed") else 0   # locust: the master reported an error
