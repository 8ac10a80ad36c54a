"""``loadgen export RUN_DIR --jsonl [--out FILE] [--force]``: a run's records.arrow as records.jsonl
(for jq, pandas.read_json(lines=True) or any tool that wants JSON lines).

    RUN_DIR/records.arrow (or the .arrow file itself) ─► analysis.contract.columnar_io.export_jsonl
        (one record batch at a time: bounded memory whatever the run's length) ─► FILE.partial
        ─► renamed to FILE (default RUN_DIR/records.jsonl) once whole
The lines are those the JSONL writer would have written for the same records (the secrets were
redacted on the way into records.arrow). An existing FILE is kept unless --force; a missing run
directory, records.arrow or format flag: one line, exit 2. A records.arrow whose writer was killed
(no end mark) exports the batches it flushed, and says so on stderr.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from analysis.contract.rundir import has_records
from loadgen.commands import subcommand
from loadgen.scenario.model import ScenarioError


def register(subparsers) -> None:
    p = subcommand(subparsers, "export", main)
    p.add_argument("run_dir", help="a run directory with records.arrow (output.records: arrow), "
                                   "or a records.arrow file")
    p.add_argument("--jsonl", action="store_true",
                   help="write the records as JSON lines, one record a line (the only format "
                        "for now; required)")
    p.add_argument("--out", default=None, metavar="FILE",
                   help="where to write (default: RUN_DIR/records.jsonl)")
    p.add_argument("--force", action="store_true", help="overwrite FILE if it exists")


def source(run_dir: str) -> Path:
    """The records.arrow to export: RUN_DIR's, or RUN_DIR itself when it is a .arrow file."""
    p = Path(run_dir)
    if p.is_file() and p.suffix == ".arrow":
        return p
    if not p.is_dir():
        raise ScenarioError(f"{run_dir}: no such run directory")
    if not (p / "records.arrow").is_file():
        what = " (its records are records.jsonl already)" if has_records(p) else ""
        raise ScenarioError(f"{p / 'records.arrow'}: not found{what}")
    return p / "records.arrow"


def main(args: argparse.Namespace) -> int:
    from analysis.contract.columnar import problems
    from analysis.contract.columnar_io import export_jsonl
    if not args.jsonl:
        raise ScenarioError("loadgen export: name the format: --jsonl")
    src = source(args.run_dir)
    out = Path(args.out) if args.out else src.parent / "records.jsonl"
    if out.resolve() == src.resolve():
        raise ScenarioError(f"--out {out}: that is the records.arrow being exported")
    if out.exists() and not args.force:
        raise ScenarioError(f"{out}: exists (--force to overwrite it, or --out FILE)")
    if not out.parent.is_dir():
        raise ScenarioError(f"--out {out}: no such directory {out.parent}")
    bad = problems(src)
    if bad and "no end mark" not in bad[0]:
        raise ScenarioError(f"{src.parent / bad[0]}")
    tmp = out.with_name(out.name + ".partial")
    try:
        n = export_jsonl(src, tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    for line in bad:
        print(f"loadgen export: {line}", file=sys.stderr)
    print(f"{out}: {n} records", file=sys.stderr)
    return 0
