"""``loadgen run SCENARIO``: one measured run into a new run directory.

    SCENARIO (+ --set k.path=v) ─► scenario.load_scenario ─► runner.run_scenario
        ─► run_dir/{scenario.yaml, records.jsonl, sut.json, meta.json, summary.json, ...}
        ─► summary table (rich) on stdout, or one JSON line with --json

``--engine locust`` hands the same scenario to loadgen/engine/locust (same run directory).
``--procs N|auto`` sets client.processes: N sender processes (loadgen/engine/procs), one run.
``--otlp-endpoint URL`` exports loadgen's own span of every request after the run
(loadgen/run/client_spans.py; docs/server-traces.md).
``--metrics-port P`` serves live Prometheus metrics on 127.0.0.1:P/metrics from its own process
while the run goes (loadgen/live; docs/live-metrics.md).

Exit codes (fit for CI):
    0    the run finished; its verdict is VALID, or INVALID without --fail-on-invalid
    1    --fail-on-invalid and the verdict is INVALID; or the Locust engine / a managed server failed
    2    a bad scenario, override or flag combination, or a target that cannot serve the run
         (unreachable, HTTP 401/403, api.model not listed, a field it rejects with
         api.drop_rejected_fields: false): one line ``loadgen: error: ...``, nothing measured
    3    no measured request completed: every one failed or was cancelled, or none was measured
         at all (0 measured records); the most common causes are printed
    130  interrupted (Ctrl-C, SIGTERM); finished records kept, the rest marked cancelled
"""
from __future__ import annotations

import argparse
import json
import signal
import sys

from loadgen.commands.scenario_args import add_measure_args, add_scenario_args
from loadgen.scenario.model import ScenarioError
from loadgen.commands import subcommand


def register(subparsers) -> None:
    from loadgen.live.flags import add_flags as add_live_flags
    p = subcommand(subparsers, "run", main)
    add_scenario_args(p, scenario_help="scenario YAML file (see scenarios/)",
                      set_help="override one scenario field, e.g. --set load.rate=4 (repeatable)",
                      json_help="no live display; print the summary as one JSON line on stdout")
    p.add_argument("--dry-run", action="store_true",
                   help="check the scenario and print its plan without sending anything "
                        "(= loadgen validate)")
    add_measure_args(p, fail_help="exit 1 when the verdict is INVALID (for CI); without it an "
                                  "INVALID run exits 0",
                     repeat_help="run the scenario N times into one parent directory; repeat.json "
                                 "and its report give the mean and a 95%% confidence interval of "
                                 "every headline figure")
    p.add_argument("--engine", choices=["native", "locust"], default="native",
                   help="load engine: native (the default: kernel-stamped reads over one epoll "
                        "mux for http://, aiohttp for https://) or locust "
                        "(Locust workers, for load beyond one client core or host)")
    p.add_argument("--procs", default=None, metavar="N|auto",
                   help="sender processes of the native engine (scenario client.processes; "
                        "default 1): each its own event loop and connections, one share of "
                        "the schedule each, one records.jsonl; auto: the usable CPUs - 1")
    p.add_argument("--otlp-endpoint", default=None, metavar="URL", type=otlp_url,
                   help="after the run, export loadgen's own span of every request (OTLP/JSON) "
                        "to URL, e.g. http://127.0.0.1:4318/v1/traces: the server's span is its "
                        "child (docs/server-traces.md)")
    add_live_flags(p)
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


def _procs_override(args: argparse.Namespace) -> list[str]:
    """``--procs N|auto`` as ``--set client.processes=...`` (checked here, named as the flag)."""
    v = args.procs
    if v is None:
        return []
    if args.engine != "native":
        raise ScenarioError("--procs: native engine only (the Locust engine has --workers)")
    if v != "auto" and not (v.isdigit() and 1 <= int(v) <= 1024):
        raise ScenarioError(f"--procs {v}: a whole number from 1 to 1024, or auto")
    return [f"client.processes={v}"]


def _term_as_interrupt(signum, frame):  # only while no event loop owns the signals
    raise KeyboardInterrupt


def main(args: argparse.Namespace) -> int:
    from loadgen.console.progress import RunProgress, print_summary
    from loadgen.live.flags import open_live, run_live
    from loadgen.scenario.loader import load_scenario

    from loadgen.engine.locust.cli import run_from_cli
    from loadgen.run.engines import check_flags

    if args.dry_run:                     # = loadgen validate (commands/validate.py)
        from loadgen.commands.validate import show
        return show(args)
    bad = check_flags(args.engine, args.workers, args.master, args.worker, args.master_host)
    if bad:
        raise ScenarioError(bad)
    sc = load_scenario(args.scenario, args.overrides + _procs_override(args))
    from loadgen.run.engines import refusal
    bad = refusal(args.engine, sc, args.repeat, args.master, args.worker)   # run/engines.py
    if bad:
        raise ScenarioError(bad)
    if args.repeat > 1:
        return _repeat(sc, args, open_live(args))
    live = open_live(args)        # --metrics-port: /metrics from its own process (loadgen/live)
    progress = RunProgress(None, enabled=not args.json)
    old = signal.signal(signal.SIGTERM, _term_as_interrupt)
    try:
        if args.engine == "locust":
            result = run_from_cli(sc, args, progress, live)
            if isinstance(result, int):      # --worker, or locust missing: an exit code
                return result
        else:
            result = run_live(live, sc, progress)
    finally:
        signal.signal(signal.SIGTERM, old)
        if live is not None:
            live.close()
    summary = result.summary or {}
    _export_spans(result.run_dir, args)
    if args.json:
        print(json.dumps({"run_dir": str(result.run_dir), "interrupted": result.interrupted,
                          "summary": result.summary}, default=str))
        for w in summary.get("warnings") or []:
            print(f"loadgen: warning: {w}", file=sys.stderr)
    else:
        if result.summary is not None:
            print_summary(result.summary, str(result.run_dir))
        print(f"run directory: {result.run_dir}")
        if result.interrupted:
            print("loadgen: run interrupted; finished records kept, the rest marked cancelled"
                  + (f" ({result.meta['unsent_requests']:,} never started: unsent_requests)"
                     if (result.meta or {}).get("unsent_requests") else ""), file=sys.stderr)
    if result.interrupted:
        return 130
    code = 1 if result.meta.get("crashed") else exit_code(summary, args.fail_on_invalid)
    if result.meta.get("crashed"):     # a sender process died, the Locust master's error, ...
        print(f"loadgen: error: {result.meta['crashed']}", file=sys.stderr)
    if summary.get("requests_failed") or code == 3:
        _print_failures(result.run_dir, summary)
    if code == 3 and not _measured(summary):
        print("loadgen: no measured request was recorded (nothing was sent in the measured phase)",
              file=sys.stderr)
    return code


def otlp_url(v: str) -> str:
    """--otlp-endpoint's value: an http(s) URL (argparse: one line, exit 2)."""
    if not v.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(f"an http:// or https:// URL, got {v!r}")
    return v


def _export_spans(run_dir, args: argparse.Namespace) -> None:
    """--otlp-endpoint: loadgen's spans after the run (run/client_spans.py); a failure warns."""
    if args.otlp_endpoint is None:
        return
    from loadgen.run.client_spans import export
    out = export(run_dir, args.otlp_endpoint)
    if out["error"]:
        print(f"loadgen: warning: spans not exported: {out['error']}", file=sys.stderr)
    elif not args.json:
        print(f"spans: {out['spans']} exported to {args.otlp_endpoint}")


def exit_code(summary: dict, fail_on_invalid: bool) -> int:
    """0, 1 (INVALID with --fail-on-invalid) or 3 (no measured request completed: every one
    failed or was cancelled, or there was none) for a run that was neither interrupted nor
    crashed."""
    if not summary.get("requests_completed"):
        return 3
    if fail_on_invalid and (summary.get("verdict") or {}).get("valid") is False:
        return 1
    return 0


def _measured(summary: dict) -> int:
    return sum(summary.get(k) or 0 for k in ("requests_completed", "requests_failed",
                                              "requests_cancelled"))


def _print_failures(run_dir, summary: dict) -> None:
    """The most common causes of the failed measured requests, one line each, on stderr."""
    from analysis.contract.records import read_table
    from analysis.contract.rundir import records_path
    from loadgen.record import read_records
    from loadgen.console.progress import failure_causes, failure_lines
    p = records_path(run_dir)
    try:
        causes = failure_causes(read_records(p) if p.suffix == ".jsonl" else read_table(p).records,
                                statuses=("error",) if summary.get("requests_failed")
                                else ("cancelled",))
    except OSError:
        causes = []
    for line in failure_lines(summary, causes):
        print(f"loadgen: {line}", file=sys.stderr)


def _repeat(sc, args: argparse.Namespace, live=None) -> int:
    """N runs of ``sc``; each prints as a single run would, then the mean ± 95 % CI table."""
    from loadgen.console.progress import RunProgress, print_summary
    from loadgen.multirun.repeat import run_repeats
    from loadgen.live.flags import run_live

    codes: list[int] = []

    def one(scenario):
        progress = RunProgress(None, enabled=not args.json)
        if args.engine == "locust":
            from loadgen.engine.locust.cli import run_from_cli
            res = run_from_cli(scenario, args, progress, live)
            if isinstance(res, int):             # locust not installed: its line was printed
                raise SystemExit(res)
        else:
            res = run_live(live, scenario, progress)
        _export_spans(res.run_dir, args)
        if res.summary is not None and not args.json:
            print_summary(res.summary, str(res.run_dir))
        codes.append(130 if res.interrupted else exit_code(res.summary or {}, args.fail_on_invalid))
        return res

    old = signal.signal(signal.SIGTERM, _term_as_interrupt)
    try:
        parent, results, rep = run_repeats(sc, args.repeat, one)
    finally:
        signal.signal(signal.SIGTERM, old)
        if live is not None:
            live.close()
    if args.json:
        print(json.dumps({"repeat_dir": str(parent), "repeat": rep}, default=str))
    else:
        print(f"repeats: {rep['runs']} runs of {sc.name} ({rep['rule']})")
        for name, f in rep["figures"].items():
            if f["mean"] is not None:
                ci = ("" if f["ci95_low"] is None
                      else f"  95% CI {f['ci95_low']:.3f} – {f['ci95_high']:.3f}")
                print(f"  {name:28s} mean {f['mean']:.3f}{ci}  (n={f['n']})")
        print(f"repeat directory: {parent}")
    return max(codes) if codes else 0
