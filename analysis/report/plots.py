"""Figures of one run, rendered with matplotlib (Agg) to base64 PNG for a self-contained HTML.

    records ─► cdf_png        (TTFT, TPOT, ITL cumulative distributions, SLO limits drawn;
                               each curve through at most CDF_POINTS evenly spaced ranks)
            ─► timeline_png   (TTFT / E2E of each request vs its send time; above
                               TIMELINE_POINTS requests: the slowest 1 % of each and a seeded
                               sample of the rest, ``drawn``; the caption says so)
    series.run_series ─► timeseries_png (output tokens/s, requests in flight, power per bin)

Each function returns ``(base64_png or None, note)``: ``None`` with the reason when matplotlib is
not installed or there is nothing to draw. Every panel title carries its evidence status.
"""
from __future__ import annotations

import base64
import io
from typing import Optional

import numpy as np

from analysis.contract.summary_blocks import Slo
from analysis.contract import timing
from analysis.metrics import figures as m
from analysis.contract.records import Records

NO_MPL = "plots omitted: matplotlib is not installed (pip install 'loadgen[plots]')"
COLORS = ("#3b6ea5", "#e67e22", "#27ae60", "#8e44ad", "#c0392b", "#16a085")


def pyplot():
    """matplotlib.pyplot with the non-interactive Agg backend, or None if unavailable."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    return plt


def available() -> bool:
    return pyplot() is not None


def encode(fig, plt) -> str:
    """The figure as base64 PNG (and closed). zlib level 3: the same pixels as the default 6,
    ~5 % more bytes, a fifth less time."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight", pil_kwargs={"compress_level": 3})
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def legend(ax, **kw) -> None:
    """The axes' legend, only when something on them has a label (an empty one is no legend,
    and matplotlib warns "No artists with labels found to put in legend")."""
    if ax.get_legend_handles_labels()[0]:
        ax.legend(**kw)


CDF_POINTS = 4000   # a CDF drawn through at most this many of its points (every one below)


def _cdf(ax, vals: np.ndarray, color: str, label: str) -> None:
    """``vals`` (no NaN) as a step CDF with its p50 and p99; ``vals`` is left as it was."""
    x = np.sort(vals)
    n = x.size
    if n > CDF_POINTS:           # the same curve at screen resolution: evenly spaced ranks,
        keep = np.unique(np.linspace(0, n - 1, CDF_POINTS).astype(np.int64))    # both ends
        xs, y = x[keep], (keep + 1) / n       # the full curve's points (rank / n) at those ranks
    else:
        xs, y = x, np.arange(1, n + 1) / n
    ax.step(xs, y, where="post", color=color, label=label)
    for q, ls in ((50, ":"), (99, "--")):  # figures.percentile's value (x reordered: not drawn)
        v = float(np.percentile(x, q, method="linear", overwrite_input=xs is not x))
        ax.axvline(v, color=color, ls=ls, lw=0.8, alpha=0.8)


def _finite(v: np.ndarray) -> np.ndarray:
    nan = np.isnan(v)
    return v[~nan] if nan.any() else v


def _slo_line(ax, limit: Optional[float], data_max: float) -> None:
    """A red vertical at the SLO limit, or (when it lies far right of the data) a note, so a
    generous limit does not squash the distribution into one pixel."""
    if limit is None:
        return
    if limit <= 1.5 * data_max or data_max <= 0:
        ax.axvline(limit, color="#c0392b", lw=1.5, label=f"SLO {limit:g} ms")
    else:
        ax.text(0.98, 0.5, f"SLO {limit:g} ms →", color="#c0392b", ha="right",
                transform=ax.transAxes, fontsize=8)


def cdf_png(records: Records, from_scheduled: bool,
            slo: Optional[dict | Slo] = None) -> tuple[Optional[str], str]:
    """CDFs of TTFT (from scheduled too in server mode), TPOT and token-weighted ITL; dotted and
    dashed verticals at p50 and p99, a red line at each configured SLO limit."""
    plt = pyplot()
    if plt is None:
        return None, NO_MPL
    s = m.latency_series(records)                     # arrays (NaN: undefined), not copied
    ttft, ttft_s, tpot, itl = (_finite(s[k]) for k in ("ttft_ms", "ttft_from_scheduled_ms",
                                                        "tpot_ms", "itl_ms"))
    del s
    if not ttft.size and not itl.size:
        return None, "no completed requests with timings to plot"
    slo = Slo.read(slo)
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.4))
    panels = ((axes[0], [("TTFT from send", ttft)] + ([("TTFT from scheduled", ttft_s)]
                                                        if from_scheduled else []), "ttft_ms",
               slo.ttft_ms),
              (axes[1], [("TPOT", tpot)], "tpot_ms", slo.tpot_ms),
              (axes[2], [("ITL (token-weighted)", itl)], "itl_ms", slo.itl_ms))
    for ax, curves, key, limit in panels:
        drawn = False
        for i, (label, vals) in enumerate(curves):
            if vals.size:
                _cdf(ax, vals, COLORS[i], label)
                drawn = True
        _slo_line(ax, limit, max((float(v.max()) for _, v in curves if v.size),
                                        default=0.0))
        if not drawn:
            ax.text(0.5, 0.5, "no data", ha="center", transform=ax.transAxes)
        ax.set_title(f"{key.removesuffix('_ms').upper()} CDF [measured]")
        ax.set_xlabel("ms")
        ax.set_ylim(0, 1.02)
        ax.grid(alpha=0.3)
        legend(ax, fontsize=8, loc="lower right")      # none on a "no data" panel
    axes[0].set_ylabel("fraction of requests (ITL: of tokens)")
    return encode(fig, plt), ("TTFT, TPOT and ITL distributions (CDF; dotted p50, dashed p99; "
                              "measured, client-side)")


TIMELINE_POINTS = 5000   # a timeline drawn through at most this many requests (every one below)
TAIL = 0.01              # ... always with the slowest 1 % of each series among them


def drawn(values: list[np.ndarray], limit: int = TIMELINE_POINTS, tail: float = TAIL,
          seed: int = 0) -> np.ndarray:
    """Indices of the points to draw of ``values`` (series of one length, NaN allowed): all of
    them up to ``limit``; else the slowest ``tail`` of each series (the outliers a reader looks
    for) and a seeded random sample of the rest, ``limit`` in all, in their order. A 10^5-point
    scatter costs seconds to render; this keeps its picture (the band and its outliers)."""
    n = values[0].size if values else 0
    if n <= limit:
        return np.arange(n)
    k = max(1, min(int(n * tail), limit // (2 * len(values))))
    keep = np.zeros(n, bool)
    for v in values:
        v = np.where(np.isnan(v), -np.inf, v)
        keep[np.argpartition(v, n - k)[n - k:]] = True
    rest = np.flatnonzero(~keep)
    more = limit - int(keep.sum())
    if more > 0:
        keep[np.random.default_rng(seed).choice(rest, size=min(more, rest.size),
                                                replace=False)] = True
    return np.flatnonzero(keep)


def timeline_png(records: Records, from_scheduled: bool) -> tuple[Optional[str], str]:
    """Latency of each completed request against its send time; failures marked. Above
    TIMELINE_POINTS requests: those ``drawn`` picks (the caption says how many of how many)."""
    plt = pyplot()
    if plt is None:
        return None, NO_MPL
    win = m.window(records)
    if win is None:
        return None, "no measured window to plot"
    tab, meas, done, _ = m.selections(records)       # arrays (analysis.contract.records)
    sent, sent_ok = tab.stamp("sent_at_ns")
    figs = timing.per_record(tab)
    done = done & sent_ok
    xs = (sent[done] - win[0]) / 1e9
    ttft = figs["ttft_from_scheduled_ms" if from_scheduled else "ttft_ms"][done]
    e2el = figs["e2el_ms"][done]
    pick = drawn([ttft, e2el])
    fig, ax = plt.subplots(figsize=(12, 2.8))
    dots = dict(ls="none", marker="o", ms=2.2, mew=0)   # a Line2D: fast for 10^5 points
    ax.plot(xs[pick], ttft[pick], color=COLORS[0], label="TTFT" + (
        " from scheduled" if from_scheduled else ""), **dots)
    ax.plot(xs[pick], e2el[pick], color=COLORS[1], label="E2E", **dots)
    bad = np.flatnonzero(meas & sent_ok & (tab.column("status") == "error"))
    bad_pick = bad[drawn([sent[bad].astype(float)], seed=1)] if bad.size else bad
    if bad.size:
        ax.scatter((sent[bad_pick] - win[0]) / 1e9, np.zeros(bad_pick.size), marker="x",
                   color="#c0392b", label="failed")
    ax.set_ylabel("ms")
    ax.set_xlabel("s since first send")
    ax.set_title("latency of each request vs its send time [measured]")
    ax.grid(alpha=0.3)
    legend(ax, loc="upper left", fontsize=8)
    note = "per-request latency vs send time (measured, client-side)"
    if pick.size < xs.size or bad_pick.size < bad.size:
        note += (f"; {pick.size:,} of {xs.size:,} completed requests drawn (the slowest "
                 f"{TAIL:.0%} of TTFT and of E2E, and a seeded random sample of the rest)"
                 + (f", {bad_pick.size:,} of {bad.size:,} failures" if bad_pick.size < bad.size
                    else ""))
    return encode(fig, plt), note


def _rate_panels(a1, a2, t, series: dict) -> None:
    """The throughput and in-flight panels (both figures' first two)."""
    a1.plot(t, series["output_tokens_per_s"], color=COLORS[0], marker=".")
    a1.set_ylabel("output tokens/s")
    a1.set_title(f"throughput per {series['bin_s']:.3g} s [measured]")
    a2.plot(t, series["in_flight"], color=COLORS[2], marker=".")
    a2.set_ylabel("in flight")
    a2.set_title("requests in flight, time-weighted mean per bin [measured]")
    for ax in (a1, a2):
        ax.grid(alpha=0.3)
        ax.ticklabel_format(axis="y", useOffset=False)
        hi = ax.get_ylim()[1]
        ax.set_ylim(0, hi * 1.1 if hi > 0 else 1)


def timeseries_png(series: dict, power_asked: bool = True) -> tuple[Optional[str], str]:
    """Output tokens/s, mean requests in flight and mean power per bin (analysis.metrics.series);
    ``power_asked`` False (the run named no power source): no power panel at all."""
    plt = pyplot()
    if plt is None:
        return None, NO_MPL
    if series.get("status") != "measured":
        return None, f"time series not shown: {series.get('reason')}"
    t = np.asarray(series["t_s"]) + series["bin_s"] / 2
    if not power_asked and not series["power"]:
        fig, (a1, a2) = plt.subplots(2, 1, figsize=(12, 4.6), sharex=True)
        _rate_panels(a1, a2, t, series)
        a2.set_xlabel("s since first send")
        return encode(fig, plt), (f"time series in {series['bin_s']:.3g} s bins: throughput, "
                                  "in-flight requests (no power source configured)")
    fig, (a1, a2, a3) = plt.subplots(3, 1, figsize=(12, 6.6), sharex=True)
    _rate_panels(a1, a2, t, series)
    if series["power"]:
        for i, p in enumerate(series["power"]):
            w = [np.nan if v is None else v for v in p["watts"]]
            a3.plot(t, w, color=COLORS[i % len(COLORS)], marker=".",
                    label=f"{p['label']} ({p['scope']}) [{p['evidence']}]")
        legend(a3, fontsize=8, loc="upper left")
        a3.set_title("power, mean per bin")
    else:
        a3.text(0.5, 0.5, "power unmeasured: no power samples in power.jsonl", ha="center",
                va="center", transform=a3.transAxes)
        a3.set_title("power [unmeasured]")
    a3.set_ylabel("W")
    a3.set_xlabel("s since first send")
    a3.grid(alpha=0.3)
    a3.ticklabel_format(axis="y", useOffset=False)
    hi = a3.get_ylim()[1]
    a3.set_ylim(0, hi * 1.1 if hi > 0 else 1)
    return encode(fig, plt), (f"time series in {series['bin_s']:.3g} s bins: throughput, in-flight "
                              "requests, power")
