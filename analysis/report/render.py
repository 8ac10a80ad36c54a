"""Report blocks ─► Markdown and self-contained HTML (inline CSS, inline PNG figures).

    [("title", text) | ("h", text) | ("p", text) | ("warn", text) | ("table", headers, rows)
     | ("img", base64_png, caption) | ("raw", markdown, html)]  ─► render_md / render_html

The cells and tables the section modules share: pair, fmt, num, missing, group_blocks.
Shared by the run report (report.py), the sweep report (report_sweep.py) and compare.py. No
external resource is referenced: the HTML opens offline, from a file or a mail attachment.
"""
from __future__ import annotations

import html
import math
from typing import Any, Optional

from analysis.contract.summary import Stats
from analysis.contract.summary_blocks import ModelFigures
from analysis.contract.summary_workload import P50P99

Block = tuple
CSS = """body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1100px;
margin:0 auto;padding:1em 2em 3em;color:#1f2328;line-height:1.45}
h1{border-bottom:3px solid #3b6ea5;padding-bottom:.3em}h2{margin-top:1.8em;color:#24476b;
border-bottom:1px solid #d0d7de;padding-bottom:.2em}
table{border-collapse:collapse;margin:.6em 0}td,th{border:1px solid #d0d7de;padding:3px 8px;
text-align:left;vertical-align:top;font-size:14px}th{background:#eef2f7}
tr:nth-child(even) td{background:#fafbfc}
.valid{color:#1e7e34;font-weight:bold}.invalid{color:#b02a37;font-weight:bold}
.warn{background:#fff3cd;padding:.5em;border-left:4px solid #e0a800}
figure{margin:1em 0}img{max-width:100%;border:1px solid #e1e4e8}
figcaption{font-size:13px;color:#57606a}"""


def pair(v: Optional[P50P99 | Stats]) -> str:
    """A latency's p50 / p99 for a table cell ("n/a" for a missing one)."""
    v = v or P50P99()
    return f"{fmt(v.p50)} / {fmt(v.p99)}"


def group_blocks(title: str, text: str, key: str, groups: list[tuple[str, ModelFigures]],
                 sched: bool) -> list[Block]:
    """One table of per-group figures (analysis.metrics.replicas' shape): replicas
    (workloads.py), models (served.py)."""
    rows = [[name, str(u.requests), fmt(100 * u.share) + " %" if u.share is not None
             else "n/a", str(u.failed), pair(u.ttft_ms), pair(u.tpot_ms), fmt(u.itl_ms_p99),
             fmt(u.request_throughput), fmt(u.output_throughput), fmt(u.goodput)]
            for name, u in groups]
    return [("h", title), ("p", text),
            ("table", [key, "requests", "share", "failed",
                       f"TTFT{' sched.' if sched else ''} p50 / p99 ms", "TPOT p50 / p99 ms",
                       "ITL p99 ms", "req/s", "output tok/s", "goodput req/s"], rows)]


def fmt(x: Any, digits: int = 2) -> str:
    """A figure for a table: floats rounded to ``digits`` decimals, None as 'n/a'. A float that
    rounding would show as 0 (1e-05 with 2 digits) or that is huge (>= 1e15) is written with
    significant digits instead ("1.0e-05"): never a misleading 0."""
    if x is None:
        return "n/a"
    if isinstance(x, bool):
        return str(x)
    if isinstance(x, float):
        if math.isfinite(x) and x != 0 and (abs(x) < 0.5 * 10.0 ** -digits or abs(x) >= 1e15):
            return f"{x:.{max(digits - 1, 1)}e}"
        return f"{x:.{digits}f}"
    return str(x)


def num(x: Any, sig: int = 4) -> str:
    """A number with ``sig`` significant digits, for a figure whose scale is unknown (money,
    ratios): 0.01234, 12.35, 12,346; below 1e-3 or from 1e15 up in scientific notation
    (1.000e-320); exactly 0 as "0"; None as "n/a". Never a misleading 0."""
    if x is None:
        return "n/a"
    if isinstance(x, bool) or isinstance(x, int):
        return f"{x:,}" if not isinstance(x, bool) else str(x)
    x = float(x)
    if not math.isfinite(x):
        return str(x)
    if x == 0:
        return "0"
    mag = math.floor(math.log10(abs(x)))
    if mag < -3 or mag >= 15:
        return f"{x:.{sig - 1}e}"
    s = f"{x:,.{max(sig - 1 - mag, 0)}f}"
    if mag >= 0 and len(s.replace(",", "").lstrip("-").split(".")[0]) > mag + 1:
        s = f"{x:,.{max(sig - 2 - mag, 0)}f}"   # 9.9996 rounded up to 10.000: one decimal fewer
    return s


def missing(reason: Any, what: str = "not measured") -> str:
    """A figure that is absent, said with its reason: "n/a: REASON", or "n/a (WHAT)" when no
    reason was recorded (never "n/a: None")."""
    text = str(reason).strip() if reason is not None else ""
    return f"n/a: {text}" if text and text != "None" else f"n/a ({what})"


def _md_cell(x: Any) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def render_md(blocks: list[Block]) -> str:
    out = []
    for b in blocks:
        if b[0] == "title":
            out.append(f"# {b[1]}\n")
        elif b[0] == "h":
            out.append(f"## {b[1]}\n")
        elif b[0] in ("p", "warn"):
            out.append(("**Warning:** " if b[0] == "warn" else "") + f"{b[1]}\n")
        elif b[0] == "img":
            out.append(f"_{b[2]}: see report.html (figures are inline there)._\n")
        elif b[0] == "raw":
            out.append(b[1].rstrip("\n") + "\n")
        elif b[0] == "table":
            out.append("| " + " | ".join(map(_md_cell, b[1])) + " |")
            out.append("|" + "---|" * len(b[1]))
            out += ["| " + " | ".join(map(_md_cell, r)) + " |" for r in b[2]]
            out.append("")
    return "\n".join(out) + "\n"


def render_html(blocks: list[Block], title: Optional[str] = None) -> str:
    e = html.escape
    body = []
    for b in blocks:
        if b[0] == "title":
            body.append(f"<h1>{e(b[1])}</h1>")
            title = title or b[1]
        elif b[0] == "h":
            body.append(f"<h2>{e(b[1])}</h2>")
        elif b[0] == "p":
            cls = {"VALID": "valid", "INVALID": "invalid"}.get(str(b[1]).split(" ")[0])
            body.append(f"<p class='{cls}'>{e(b[1])}</p>" if cls else f"<p>{e(str(b[1]))}</p>")
        elif b[0] == "warn":
            body.append(f"<p class='warn'>Warning: {e(b[1])}</p>")
        elif b[0] == "raw":
            body.append(b[2])
        elif b[0] == "img":
            body.append(f"<figure><img alt='{e(b[2])}' src='data:image/png;base64,{b[1]}'>"
                        f"<figcaption>{e(b[2])}</figcaption></figure>")
        elif b[0] == "table":
            head = "".join(f"<th>{e(str(h))}</th>" for h in b[1])
            rows = "".join("<tr>" + "".join(f"<td>{e(str(c))}</td>" for c in r) + "</tr>"
                           for r in b[2])
            body.append(f"<table><tr>{head}</tr>{rows}</table>")
    return (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>"
            f"{e(title or 'report')}</title><style>{CSS}</style></head><body>{''.join(body)}"
            "</body></html>\n")
