"""The report of a repeat series: repeat.json ─► report.md / report.html.

    repeat.json {"runs", "rule", "figures": {name: {mean, std, ci95_low, ci95_high, n}}, ...}
        ─► blocks(): one row per headline figure (mean, 95 % CI, std, n) + each run's verdict
        ─► output.write_pages (render.render_md / render_html; whole or not at all)
"""
from __future__ import annotations

from pathlib import Path

from analysis.report.output import write_pages
from analysis.report.render import Block, fmt


def blocks(rep: dict) -> list[Block]:
    rows = []
    for name, f in rep["figures"].items():
        ci = ("—" if f["ci95_low"] is None
              else f"{fmt(f['ci95_low'])} – {fmt(f['ci95_high'])}")
        rows.append([name, fmt(f["mean"]), ci, fmt(f["std"]), str(f["n"])])
    verdicts = ", ".join({True: "VALID", False: "INVALID"}.get(v, "—") for v in rep["verdicts"])
    return [("title", f"Repeats: {rep.get('scenario', '')} × {rep['runs']}"),
            ("p", f"Interval: {rep['rule']}. Verdicts: {verdicts}."),
            ("table", ["figure", "mean", "95 % CI", "std", "n"], rows),
            ("p", "Runs: " + ", ".join(rep.get("run_dirs") or []))]


def write_repeat_report(parent: str | Path, rep: dict) -> None:
    write_pages(Path(parent), blocks(rep), title=f"loadgen repeats — {rep.get('scenario', '')}")
