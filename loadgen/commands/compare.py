"""``loadgen compare A B ...``: runs side by side, refused when they must not be compared.

    RUN_DIR ... (a SWEEP_DIR stands for its points) ─► analysis.report.compare.compare
        ─► refused: one line naming every must-match condition that differs, exit 2
        ─► else a Markdown table on stdout (figures, change vs the first run, conditions that
           differ); --out FILE.md|FILE.html writes it too; --json prints the result as JSON
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from loadgen.scenario.model import ScenarioError


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "compare", help="compare runs side by side (refused when workload, SLO or scenario "
                        "type differ)",
        description="Put two or more run directories side by side. Refuses, naming the "
                    "fields, when their scenario type (load.mode), workload or SLO differ; "
                    "lists every other condition that differs.")
    p.add_argument("runs", nargs="+", metavar="RUN_DIR",
                   help="run directories (a sweep directory stands for all its points)")
    p.add_argument("--out", metavar="FILE", help="also write the comparison to FILE "
                                                 "(.html: self-contained page; else Markdown)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line")
    p.set_defaults(func=main)


def expand(paths: list[str]) -> list[Path]:
    """Run directories; a sweep directory (sweep.json) expands to its points in value order."""
    out: list[Path] = []
    for raw in paths:
        d = Path(raw)
        sweep = d / "sweep.json"
        if sweep.is_file():
            try:
                pts = json.loads(sweep.read_text()).get("points") or []
            except json.JSONDecodeError as e:
                raise ScenarioError(f"RUN_DIR: {sweep}: not valid JSON ({e.msg})") from None
            out += [d / str(p.get("run_dir")) for p in sorted(pts, key=lambda p: p["value"])]
        else:
            out.append(d)
    for d in out:
        if not (d / "records.jsonl").is_file():
            raise ScenarioError(f"RUN_DIR: {d}: not a run directory (no records.jsonl)")
    if len(out) < 2:
        raise ScenarioError("RUN_DIR: give at least two runs to compare")
    return out


def main(args: argparse.Namespace) -> int:
    from analysis.report import compare as cmp
    from analysis.report.render import render_html, render_md

    res = cmp.compare(expand(args.runs))
    if args.json:
        print(json.dumps({k: v for k, v in res.items() if k != "summaries"}, default=str))
    if not res["comparable"]:
        raise ScenarioError("compare: refusing to compare: " + "; ".join(res["refusals"]))
    blocks = cmp.blocks(res)
    if args.out:
        out = Path(args.out)
        out.write_text(render_html(blocks) if out.suffix.lower() in (".html", ".htm")
                       else render_md(blocks), encoding="utf-8")
    if not args.json:
        print(render_md(blocks), end="")
        if args.out:
            print(f"wrote {args.out}")
    return 0
