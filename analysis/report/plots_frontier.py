"""The throughput–interactivity frontier drawn: one sweep (its report, frontier.png) or several
overlaid (``loadgen compare SWEEP_A SWEEP_B``).

    frontier.json (analysis.metrics.frontier) [+ the SLO] ─► frontier_png ─► PNG bytes, note
        x: interactivity p50 (tokens/s per user), y: output tokens/s per accelerator (or $/Mtok)
        every point labelled with its concurrency / rate (hollow: verdict INVALID), the frontier
        as a line through its non-dominated points, the TPOT SLO as a shaded region: a TPOT limit
        of L ms is the interactivity lower bound 1000 / L tokens/s (left of it even the median
        user decodes slower than the SLO allows; a point right of it can still fail at p99)
    SWEEP_DIR ─► write_frontier_png ─► SWEEP_DIR/frontier.png

Returns ``(png_bytes or None, note)``; None with the reason when matplotlib is missing or no
point has both figures. A non-finite figure (NaN, Infinity: an older frontier.json) is not drawn.
"""
from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Optional

from analysis.contract.rundir import read_json
from analysis.contract.sweep import Frontier
from analysis.report.plots import COLORS, NO_MPL, pyplot

Y_LABELS = {"output_throughput_per_accelerator": "output tokens/s per accelerator",
            "cost.usd_per_million_output_tokens": "$ per million output tokens"}


def point_label(param: Optional[str], value) -> str:
    if value is None:
        return "?"
    short = {"load.concurrency": "c", "load.rate": "r"}.get(param or "", "")
    return f"{short}={value:g}" if short else f"{value:g}"


def _finite(*vals) -> bool:
    return all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
               for v in vals)


def slo_interactivity_min(slo: Optional[dict]) -> Optional[float]:
    """The interactivity (tokens/s per user) a TPOT SLO asks for: 1000 / tpot_ms; None without."""
    t = (slo or {}).get("tpot_ms")
    return 1000.0 / float(t) if isinstance(t, (int, float)) and t > 0 else None


def frontier_png(named: list[tuple[str, dict]], slo: Optional[dict] = None,
                 title: str = "throughput vs interactivity") -> tuple[Optional[bytes], str]:
    """``named``: [(label, frontier dict)]; one sweep or several overlaid in one plot."""
    plt = pyplot()
    if plt is None:
        return None, NO_MPL
    typed = [(n, fr, Frontier.read(fr)) for n, fr in named]
    drawn = [(n, fr, [p for p in t.points if _finite(p.x, p.y)]) for n, fr, t in typed]
    if not any(pts for _, _, pts in drawn):
        why = "; ".join(f"{e.run}: {e.reason}" for _, _, t in typed for e in t.excluded[:3])
        return None, "frontier not drawn: no point has both interactivity and throughput" + (
            f" ({why})" if why else "")
    from analysis.report import plots_forecast      # sweep --predict: the forecast beside
    fig, ax = plt.subplots(figsize=(7.5, 4.6))
    xs_all = [p.x for _, _, pts in drawn for p in pts]
    ys_all = [p.y for _, _, pts in drawn for p in pts]
    for _, fr, _ in drawn:
        xs_all, ys_all = (xs_all + plots_forecast.extent(fr)[0], ys_all + plots_forecast.extent(fr)[1])
    ax.set_xlim(0, max(xs_all + [slo_interactivity_min(slo) or 0]) * 1.12)  # from 0: ratios read
    ax.set_ylim(0, max(ys_all) * 1.15 or 1)                                  # true
    placed: list = []                       # label anchors on screen: nearby ones stack upward
    for i, ((name, fr, pts), (_, _, t)) in enumerate(zip(drawn, typed)):
        c = COLORS[i % len(COLORS)]
        line = [pt for pt in t.line if len(pt) == 2 and _finite(*pt)]
        if line:
            ax.plot([a for a, _ in line], [b for _, b in line], "-", color=c, lw=2,
                    label=f"{name} frontier" if len(drawn) > 1 else "frontier")
        for p in pts:
            ok = p.valid is not False
            ax.plot(p.x, p.y, "o", ms=7 if p.on_frontier else 5,
                    markerfacecolor=c if ok else "white", markeredgecolor=c)
            at = ax.transData.transform((p.x, p.y))
            up = sum(1 for q in placed if abs(q[0] - at[0]) < 30 and abs(q[1] - at[1]) < 12)
            placed.append(at)
            ax.annotate(point_label(p.param, p.value), (p.x, p.y),
                        fontsize=8, textcoords="offset points", xytext=(4, 4 + 10 * up),
                        color=c)
        forecast = plots_forecast.draw(ax, fr, c) or False
    bound = slo_interactivity_min(slo)
    if bound is not None:
        ax.axvspan(0, bound, color="#c0392b", alpha=0.12,
                   label=f"below TPOT SLO {slo['tpot_ms']:g} ms (< {bound:.3g} tok/s per user)")
        ax.axvline(bound, color="#c0392b", lw=1)
    first = typed[0][2]
    y_key = first.y if "y" in first.model_fields_set else "output_throughput_per_accelerator"
    ax.set_xlabel("interactivity: tokens/s per user (p50 of 1000 / TPOT)")
    ax.set_ylabel(Y_LABELS.get(y_key, y_key))
    ax.set_title(f"{title} [measured" + ("; dashed: forecast]" if drawn and forecast else "]"))
    ax.grid(alpha=0.3)
    ax.plot([], [], "o", markerfacecolor="white", markeredgecolor="grey", label="verdict INVALID")
    ax.legend(fontsize=8, loc="best")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    plt.close(fig)
    other = sorted(k for k in ("ttft_ms", "e2el_ms", "itl_ms") if (slo or {}).get(k) is not None)
    note = ("output tokens/s per accelerator against tokens/s per user (p50), each point "
            "labelled with its load; the line joins the non-dominated points"
            + ("; shaded: below the TPOT SLO's speed" if bound is not None else "")
            + (f"; the SLO's {', '.join(other)} limits are not on these axes (see each "
               "point's verdict; hollow: INVALID)" if other else ""))
    return buf.getvalue(), note


def write_frontier_png(sweep_dir: str | Path) -> Optional[Path]:
    """SWEEP_DIR/frontier.png from its frontier.json; None when nothing could be drawn."""
    d = Path(sweep_dir)
    fr = read_json(d / "frontier.json")
    if not fr:
        return None
    png, _ = frontier_png([(d.name, fr)], fr.get("slo"),
                          title=f"{d.name}: throughput vs interactivity")
    if png is None:
        return None
    from analysis.report.output import write_file       # whole or not at all
    return write_file(d, "frontier.png", png)
