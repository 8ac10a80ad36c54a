"""``loadgen report RUN_OR_SWEEP_DIR``: recompute summary.json and write report.md / report.html.

    RUN_DIR/{records.jsonl, meta.json, power.jsonl} ─► analysis.metrics.summary.write_summary
                                                    ─► analysis.report.run_report.write_report
Useful after changing the analysis code or the SLO in meta.json; the records are never touched.
The roofline uses the device spec frozen into the run (device.json); ``--device NAME|PATH|calibrate``
recomputes it against another spec (analysis.roofline.run_device.override), and the report says so.
That recomputation never replaces the run's own files: it is written beside them, as
``summary-device-<NAME>.json`` and ``report-device-<NAME>.md/.html`` (summary.json and report.md
keep the spec frozen into the run). The verdict is printed on stderr (the reasons when INVALID).
A run file that does not read (a garbled records.jsonl line other than a torn last one, a
meta.json / sut.json / summary.json that is not JSON or does not fit its model): one line
``loadgen: error: RUN_DIR/FILE[:LINE]: problem``, exit 2. Records that read but say something
impossible (analysis.contract.sanity) are left out of the figures and make the verdict INVALID.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from analysis.contract.rundir import records_path
from loadgen.scenario.model import ScenarioError
from loadgen.commands import subcommand


def register(subparsers) -> None:
    p = subcommand(subparsers, "report", main)
    p.add_argument("run_dir", help="a run directory (loadgen run) or a sweep directory (loadgen sweep)")
    p.add_argument("--no-plots", action="store_true", help="skip the HTML plots (faster)")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON line")
    p.add_argument("--device", default=None, metavar="NAME|PATH|calibrate",
                   help="recompute the roofline against this device spec instead of the one "
                        "frozen into the run: a catalogue key (e.g. h100-sxm), a spec JSON, or "
                        "'calibrate' (this host's `loadgen calibrate` file); the report says so")


def main(args: argparse.Namespace) -> int:
    from analysis.contract.base import ContractError, one_line
    try:
        return _device_or_main(args)
    except ContractError as e:     # a run file that does not read: one line, exit 2
        raise ScenarioError(one_line(e, args.run_dir)) from None


def _device_or_main(args: argparse.Namespace) -> int:
    if getattr(args, "device", None) is None:
        return _main(args)
    from analysis.roofline import run_device
    try:
        device = run_device.parse_override(args.device)
    except ValueError as e:
        raise ScenarioError(str(e)) from None
    print(f"roofline: recomputed against {device['how']}, not the spec frozen into the run "
          "(written beside the run's summary.json, which stays as it was)", file=sys.stderr)
    with run_device.override(device):
        return _beside(args, device_slug(args.device))


def device_slug(value: str) -> str:
    """The file-name part for ``--device VALUE``: a catalogue key as given, a spec file's stem."""
    name = Path(value).stem if Path(value).expanduser().is_file() else value
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "device"


def _beside(args: argparse.Namespace, slug: str) -> int:
    """``--device``: the summary and report against that spec, beside the run's own."""
    d = Path(args.run_dir)
    if (d / "sweep.json").is_file():          # the sweep report against that spec, beside
        return _sweep(d, args, stem=f"report-device-{slug}")
    if not records_path(d).is_file():
        raise ScenarioError(f"--device: {d}: not a run or sweep directory (no records.jsonl, "
                            "no sweep.json)")
    from analysis.metrics.summary import store_summary
    from analysis.report.run_report import write_report
    path = d / f"summary-device-{slug}.json"
    out = store_summary(d, name=path.name)
    outputs = [str(path)] + [str(p) for p in write_report(
        d, with_plots=not args.no_plots, summary=out, stem=f"report-device-{slug}")]
    _say_verdict(out)
    return _say_written(args, out, outputs)


def _sweep(d: Path, args: argparse.Namespace, stem: str = "report") -> int:
    """The sweep report; a garbled sweep.json is one line (exit 2); stderr: INCOMPLETE or done."""
    from analysis.report.sweep import status_line, sweep_problem, write_sweep_report
    problem = sweep_problem(d)
    if problem:
        raise ScenarioError(problem)
    for p in write_sweep_report(d, with_plots=not args.no_plots, stem=stem):
        print(f"wrote {p}")
    print(status_line(d), file=sys.stderr)
    return 0


def _say_written(args: argparse.Namespace, summary: dict, outputs: list[str]) -> int:
    """stdout: the summary as one JSON line with --json, else a ``wrote PATH`` line per file."""
    if args.json:
        print(json.dumps(summary))
    else:
        for o in outputs:
            print(f"wrote {o}")
    return 0


def _say_verdict(summary: dict) -> None:
    """One stderr line: VALID, or INVALID with every reason."""
    v = summary.get("verdict") or {}
    if v.get("valid", True):
        print("verdict: VALID", file=sys.stderr)
    else:
        from analysis.text import one_line       # a reason quoting a server's text stays one line
        print("verdict: INVALID: " + one_line("; ".join(v.get("reasons") or [])), file=sys.stderr)


def _main(args: argparse.Namespace) -> int:
    d = Path(args.run_dir)
    if (d / "sweep.json").is_file():
        return _sweep(d, args)
    if (d / "repeat.json").is_file() and not records_path(d).is_file():
        from analysis.report.run_report import write_any   # a repeat series: recomputed from its runs
        for p in write_any(d, with_plots=not args.no_plots):
            print(f"wrote {p}")
        return 0
    if not records_path(d).is_file():
        raise ScenarioError(f"RUN_DIR: {d}: not a run or sweep directory (no records.jsonl, "
                            "no sweep.json)")
    from analysis.metrics.summary import write_summary
    path = write_summary(d)
    outputs = [str(path)]
    from analysis.contract.rundir import read_json   # summary.json through the contract
    written = read_json(path) or {}
    _say_verdict(written)
    from analysis.report.run_report import write_report
    outputs += [str(p) for p in write_report(d, with_plots=not args.no_plots)]
    return _say_written(args, written, outputs)
