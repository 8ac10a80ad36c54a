"""``loadgen compare A B ...``: runs side by side, refused when they must not be compared.

    RUN_DIR ... (a SWEEP_DIR stands for its points; a --repeat parent, run-1/ … run-N/, is one
    entry) ─► analysis.report.compare.compare
        ─► refused: one line naming every must-match condition that differs, exit 2
        ─► a run file that does not read (records.jsonl line, meta.json, sut.json, summary.json):
           one line naming RUN/FILE[:LINE], exit 2
        ─► figures recomputed from each run's records (summary.json not trusted: where it
           says otherwise, a warning line names the figure)
        ─► else a Markdown table on stdout (figures, change vs the first run; per headline
           figure the change, its 95 % interval and "significant" / "within noise"; conditions
           that differ); --out FILE.md|FILE.html writes it too; --json prints the result as JSON
        ─► --fail-on-regression PCT: exit 1 when a figure's whole 95 % interval lies beyond
           PCT % worse than the first run's (each regression named on stderr, with the method
           of its interval); gating single runs prints a note: --repeat series are the way
    SWEEP_DIR SWEEP_DIR ... (two or more, every one a sweep) ─► their throughput–interactivity
        frontiers overlaid (analysis.report.compare_frontier); --at-interactivity X: which is
        ahead at X tokens/s per user and by how much; --out FILE also writes FILE.json, FILE.png
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from loadgen.scenario.model import ScenarioError
from loadgen.commands import subcommand


def register(subparsers) -> None:
    p = subcommand(subparsers, "compare", main)
    p.add_argument("runs", nargs="+", metavar="RUN_DIR",
                   help="run directories (a sweep directory stands for all its points; a "
                        "--repeat parent holding run-1/ … run-N/ is one entry)")
    p.add_argument("--out", metavar="FILE", help="also write the comparison to FILE "
                                                 "(.html: self-contained page; else Markdown)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON line "
                   '(per figure: {"a", "b", "change_pct", "ci_pct": [lo, hi], "significant"})')
    p.add_argument("--fail-on-regression", metavar="PCT", type=float, default=None,
                   help="exit 1 when the whole 95 %% interval of some headline figure's "
                        "change lies beyond PCT %% worse than the first run's (higher latency, "
                        "lower throughput/goodput); figures without an interval (e.g. p99 of "
                        "fewer than 1,000 values) never fail it. Gate on --repeat N series: "
                        "single runs' intervals do not see run-to-run drift")
    p.add_argument("--at-interactivity", metavar="X", type=float, default=None,
                   help="sweep directories only: at X tokens/s per user, which frontier gives "
                        "more output tokens/s per accelerator, and by how much (linear "
                        "interpolation on each frontier; refused where one does not reach X)")


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
    from analysis.contract.rundir import records_path
    from analysis.report.compare import repeat_runs
    for d in out:
        if not records_path(d).is_file() and not repeat_runs(d):   # .jsonl, or records.arrow
            raise ScenarioError(f"RUN_DIR: {d}: not a run directory (no records.jsonl) nor a "
                                "repeat series (no run-N/)")
    if len(out) < 2:
        raise ScenarioError("RUN_DIR: give at least two runs to compare")
    return out


def main(args: argparse.Namespace) -> int:
    from analysis.report import compare as cmp
    from analysis.report.render import render_html, render_md

    pct = args.fail_on_regression
    if pct is not None and not pct >= 0:
        raise ScenarioError(f"--fail-on-regression: {pct:g} is not a percentage ≥ 0")
    from analysis.report.compare_frontier import is_sweep
    sweeps = len(args.runs) >= 2 and all(is_sweep(Path(r)) for r in args.runs)
    x = args.at_interactivity
    if x is not None and not (sweeps and 0 < x < float("inf")):
        raise ScenarioError(f"--at-interactivity: {x:g} must be a speed > 0 (tokens/s per user)"
                            if sweeps else "--at-interactivity: give two or more sweep "
                            "directories (each with sweep.json)")
    if sweeps:
        if pct is not None:
            raise ScenarioError("--fail-on-regression: applies to runs, not to sweep frontiers")
        return _frontiers(args)
    from analysis.contract import ContractError
    try:
        res = cmp.compare(expand(args.runs))
    except ContractError as e:          # a run file that does not read: one line naming it
        raise ScenarioError(" ".join(str(e).split("\n"))) from None
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
    if pct is not None:
        if cmp.single_runs(res):
            print(f"loadgen: note: {cmp.GATE_NOTE}", file=sys.stderr)
        worse = cmp.regressions(res, pct)
        for line in worse:
            print(f"loadgen: regression beyond {pct:g}% and significant: {line}", file=sys.stderr)
        return 1 if worse else 0
    return 0


def _frontiers(args: argparse.Namespace) -> int:
    """Two or more sweeps: their frontiers overlaid, and who is ahead at --at-interactivity."""
    from analysis.report import compare_frontier as cf
    from analysis.report.render import render_html, render_md
    res = cf.compare_frontiers([Path(r) for r in args.runs], args.at_interactivity)
    if args.json:
        print(json.dumps(res, default=str))
    if not res["comparable"]:
        raise ScenarioError("compare: refusing to compare: " + "; ".join(res["refusals"]))
    png, note = cf.plot(res) if args.out else (None, "")
    if args.out:
        out = Path(args.out)
        html = out.suffix.lower() in (".html", ".htm")
        out.write_text(render_html(cf.blocks(res, png, note)) if html
                       else render_md(cf.blocks(res, None, note)), encoding="utf-8")
        out.with_suffix(".json").write_text(json.dumps(res, indent=2, default=str) + "\n",
                                            encoding="utf-8")
        written = [out, out.with_suffix(".json")]
        if png is not None:
            out.with_suffix(".png").write_bytes(png)
            written.append(out.with_suffix(".png"))
    if not args.json:
        print(render_md(cf.blocks(res)), end="")
        for w in written if args.out else []:
            print(f"wrote {w}")
        if not args.out:
            print("(the overlaid plot: give --out FILE.html)")
    at = res.get("at")
    if at and at.get("refused"):            # the tables above stand; the answer is refused
        raise ScenarioError(f"--at-interactivity: {at['refused']}")
    return 0
