"""Figures of a sweep (one point per run), rendered like plots.py to base64 PNG.

    sweep points (value, summary, roofline) ─► latency_vs_load_png  (TTFT/TPOT p50, p99 + SLO lines)
                                            ─► throughput_latency_png (latency vs tokens/s)
                                            ─► energy_png (J/token vs the swept parameter)
                                            ─► roofline_png (measured TPOT vs the bandwidth and
                                               compute floors of a decode step, by batch)

A point is {"value", "summary", "roofline"} (report_sweep.load_sweep). Each function returns
``(base64_png or None, note)``; a figure with nothing to draw says why.
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from analysis.contract.summary import Stats, Summary
from analysis.contract.summary_blocks import Energy, Slo
from analysis.report.plots import COLORS, NO_MPL, encode, pyplot

LABELS = {"load.concurrency": "concurrency (requests in flight, client cap)",
          "load.rate": "request rate (req/s, scheduled)"}


def _xscale(ax, xs: list[float]) -> None:
    """Log-2 x axis when the swept values span 8x or more (1, 2, 4, 8, ...); whole-number
    ticks for whole-number values (concurrency, batch)."""
    from matplotlib.ticker import MaxNLocator, ScalarFormatter
    pos = [x for x in xs if x and x > 0]
    if pos and max(pos) / min(pos) >= 8:
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ScalarFormatter())
    elif pos and all(float(x).is_integer() for x in pos):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _slo_hline(ax, limit: Optional[float], data_max: float, pct: float) -> None:
    """A red horizontal at the SLO limit, or a note when it lies far above the data."""
    if limit is None:
        return
    if data_max <= 0 or limit <= 1.5 * data_max:
        ax.axhline(limit, color="#c0392b", lw=1.5, label=f"SLO {limit:g} ms (p{pct:g})")
    else:
        ax.text(0.02, 0.96, f"SLO {limit:g} ms (p{pct:g}) ↑ above the plot", color="#c0392b",
                transform=ax.transAxes, fontsize=8, va="top")


def _q(stats: Optional[Stats], q: str) -> float:
    """``q`` ("p50" | "p99") of a summary's distribution, NaN when it has none."""
    v = None if stats is None else (stats.p50 if q == "p50" else stats.p99)
    return float("nan") if v is None else float(v)


def _dists(s: Summary) -> tuple[Optional[Stats], Optional[Stats]]:
    """(the headline TTFT, TPOT) of one point's summary."""
    ttft = s.ttft_from_scheduled_ms if s.headline_ttft == "ttft_from_scheduled_ms" else s.ttft_ms
    return ttft, s.tpot_ms


def latency_vs_load_png(points: list[dict], param: str,
                        slo: Optional[dict | Slo]) -> tuple[Optional[str], str]:
    """TTFT (the headline kind) and TPOT p50 / p99 against the swept value, SLO limits drawn."""
    plt = pyplot()
    if plt is None:
        return None, NO_MPL
    if not points:
        return None, "no sweep point has a summary"
    x = [p["value"] for p in points]
    sched = points[0]["summary"].headline_ttft == "ttft_from_scheduled_ms"
    slo = Slo.read(slo)
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
    for ax, i, name, lim in ((axes[0], 0, "TTFT" + (" from scheduled" if sched else ""),
                              slo.ttft_ms), (axes[1], 1, "TPOT", slo.tpot_ms)):
        top = 0.0
        for q, ls, c in (("p50", "-", COLORS[0]), ("p99", "--", COLORS[1])):
            ys = [_q(_dists(p["summary"])[i], q) for p in points]
            ax.plot(x, ys, ls, marker="o", color=c, label=f"{name} {q}")
            top = max([top] + [y for y in ys if y == y])
        _slo_hline(ax, lim, top, slo.percentile or 99)
        ax.set_xlabel(LABELS.get(param, param))
        _xscale(ax, x)
        ax.set_ylabel("ms")
        ax.set_title(f"{name} vs load [measured]")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return encode(fig, plt), "TTFT and TPOT p50 / p99 vs load, with the SLO limits (measured)"


def throughput_latency_png(points: list[dict], param: str) -> tuple[Optional[str], str]:
    """The throughput-latency curve: p50 / p99 TTFT and TPOT against output tokens/s."""
    plt = pyplot()
    if plt is None:
        return None, NO_MPL
    pts = [p for p in points if p["summary"].output_throughput is not None]
    if not pts:
        return None, "no sweep point has an output throughput"
    x = [p["summary"].output_throughput for p in pts]
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.6))
    for ax, i, name in ((axes[0], 0, "TTFT"), (axes[1], 1, "TPOT")):
        for q, ls, c in (("p50", "-", COLORS[0]), ("p99", "--", COLORS[1])):
            ax.plot(x, [_q(_dists(p["summary"])[i], q) for p in pts], ls, marker="o", color=c,
                    label=f"{name} {q}")
        for p, xi in zip(pts, x):
            ax.annotate(f"{p['value']:g}", (xi, _q(_dists(p["summary"])[i], "p99")), fontsize=8,
                        textcoords="offset points", xytext=(3, 3))
        ax.set_xlabel("output throughput (tokens/s)")
        ax.set_ylabel("ms")
        ax.set_title(f"{name} vs throughput [measured]")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return encode(fig, plt), (f"throughput vs latency; each point labelled with its "
                              f"{param.split('.')[-1]} (measured)")


def energy_png(points: list[dict], param: str) -> tuple[Optional[str], str]:
    """J per output token against the swept value (measured or estimated, labelled)."""
    plt = pyplot()
    if plt is None:
        return None, NO_MPL
    rows = [(p["value"], p["summary"].energy or Energy()) for p in points]
    have = [(v, e.j_per_output_token, e.status) for v, e in rows
            if e.j_per_output_token is not None]
    if not have:
        why = {e.reason or e.status for _, e in rows} - {None}
        return None, ("J/token not plotted: energy unmeasured at every point ("
                      + "; ".join(sorted(map(str, why))) + ")")
    fig, ax = plt.subplots(figsize=(6.5, 3.6))
    for status, c in (("measured", COLORS[2]), ("estimated", COLORS[3])):
        xs = [(v, j) for v, j, s in have if s == status]
        if xs:
            ax.plot(*zip(*xs), marker="o", color=c, label=status)
    ax.set_xlabel(LABELS.get(param, param))
    _xscale(ax, [v for v, _, _ in have])
    ax.set_ylabel("J / output token")
    ax.set_title("energy per output token vs load")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return encode(fig, plt), "J per output token vs load (evidence per point in the legend)"


def roofline_png(points: list[dict], curve: Optional[list[dict]]) -> tuple[Optional[str], str]:
    """Measured TPOT p50 at each point's decode batch against the decode-step floors: weights and
    K/V over bandwidth (memory) and FLOPs over peak (compute), from ``curve`` (one
    roofline.serving_bounds per batch); right: decode tokens/s against its upper bound."""
    plt = pyplot()
    if plt is None:
        return None, NO_MPL
    pts = [p for p in points if p["roofline"]["status"] == "calculated"
           and p["roofline"]["tpot_p50_ms"] is not None]
    if not pts or not curve:
        why = next((p["roofline"]["reason"] for p in points
                    if p["roofline"]["status"] != "calculated"), "no point has a TPOT")
        return None, f"roofline plot not shown: {why}"
    b = np.array([c["batch"] for c in curve])
    mem = np.array([np.nan if c["decode_step"]["memory_s"] is None
                    else c["decode_step"]["memory_s"] * 1e3 for c in curve])
    comp = np.array([np.nan if c["decode_step"]["compute_s"] is None
                     else c["decode_step"]["compute_s"] * 1e3 for c in curve])
    floor = np.fmax(mem, comp)
    xb = [p["roofline"]["bounds"]["batch"] for p in pts]
    tp = [p["roofline"]["tpot_p50_ms"] for p in pts]
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, 3.8))
    a1.plot(b, mem, color=COLORS[0], label="bandwidth floor: bytes / BW [calculated]")
    a1.plot(b, comp, color=COLORS[1], label="compute floor: FLOPs / peak [calculated]")
    a1.fill_between(b, 0, floor, color="#d0d7de", alpha=0.5, label="below the roofline floor")
    a1.plot(xb, tp, "o", color=COLORS[4], label="measured TPOT p50 [measured]")
    for p, x, y in zip(pts, xb, tp):
        a1.annotate(f"{p['value']:g}", (x, y), fontsize=8, textcoords="offset points",
                    xytext=(3, 3))
    a1.set_yscale("log")
    from matplotlib.ticker import LogFormatter
    a1.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
    a1.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
    a1.set_xlabel("decode batch (mean requests in flight, capped at the server's slots)")
    a1.set_ylabel("ms per decode step")
    a1.set_title("TPOT vs the roofline of a decode step")
    a1.grid(alpha=0.3, which="both")
    a1.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
    a2.plot(b, b / floor * 1e3, color=COLORS[0], label="upper bound: batch / floor [calculated]")
    a2.plot(xb, [x / y * 1e3 for x, y in zip(xb, tp)], "o-", color=COLORS[4],
            label="batch / measured TPOT p50 [measured]")
    a2.set_xlabel("decode batch")
    a2.set_ylabel("decode tokens/s")
    a2.set_title("decode throughput vs its bound")
    a2.grid(alpha=0.3)
    a2.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=1)
    for ax in (a1, a2):
        _xscale(ax, list(b))
    return encode(fig, plt), ("measured TPOT against the decode-step floors: flat bandwidth "
                              "floor (every weight read once per step, so batch-1 decode is a "
                              "bandwidth-bound GEMV), compute floor rising with the batch")
